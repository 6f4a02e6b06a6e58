// vbucket::run: the audit of a run's ledgers, compiled once (include/vbucket/run/audit.hpp
// declares it and says how it works).
#include "vbucket/run/audit.hpp"

#include <algorithm>      // std::sort, std::upper_bound, std::clamp, std::max
#include <bit>            // std::popcount, std::countr_zero
#include <charconv>       // std::from_chars
#include <cmath>          // std::abs
#include <cstdint>        // std::uint64_t, std::uint32_t, std::int8_t
#include <cstdio>         // std::snprintf
#include <map>            // std::map
#include <memory>         // std::unique_ptr
#include <new>            // std::bad_alloc
#include <optional>       // std::optional
#include <set>            // std::set
#include <span>           // std::span
#include <string>         // std::string
#include <string_view>    // std::string_view
#include <tuple>          // std::tuple
#include <unordered_map>  // std::unordered_map
#include <unordered_set>  // std::unordered_set
#include <utility>        // std::pair, std::move
#include <vector>         // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/run/ledger.hpp"

#include "ledger_binary.hpp"  // ledger_in: a binary record's first field

namespace vbucket {

namespace detail {
namespace {

/// The epoch field of a line, if it has a readable one (`e=` is written first).
std::optional<std::uint64_t> ledger_peek_epoch(std::string_view text) {
  if (text.size() < 4 || text[1] != ' ') return std::nullopt;
  std::size_t at = 2;
  while (at < text.size()) {
    std::size_t end = text.find(' ', at);
    if (end == std::string_view::npos) end = text.size();
    if (end - at > 2 && text[at] == 'e' && text[at + 1] == '=') {
      std::uint64_t v = 0;
      const auto r = std::from_chars(text.data() + at + 2, text.data() + end, v);
      if (r.ec != std::errc{} || r.ptr != text.data() + end) return std::nullopt;
      return v;
    }
    at = end + 1;
  }
  return std::nullopt;
}

/// A record tag for a message: 'B', or its byte in hex when it is not printable.
std::string ledger_tag_text(char tag) {
  const auto u = static_cast<unsigned char>(tag);
  if (u > 0x20 && u < 0x7f) return "'" + std::string(1, tag) + "'";
  constexpr char digits[] = "0123456789abcdef";
  return std::string("byte 0x") + digits[u >> 4] + digits[u & 0xf];
}

/// The epoch of a binary record (its first field), if it has a readable one.
std::optional<std::uint64_t> ledger_peek_epoch_binary(const ledger_line& line) {
  if (line.truncated || line.text.empty()) return std::nullopt;
  try {
    ledger_in in(line.text, ledger_where(std::string_view{}));
    return in.varint();
  } catch (const error&) {
    return std::nullopt;
  }
}

/// One epoch's check: its header, its per-id table and its tallies.
class audit_epoch_check {
 public:
  audit_epoch_check(std::uint64_t epoch, const audit_options& o, audit_epoch& summary,
                    std::vector<audit_deviation>& deviations)
      : e_(epoch), o_(o), sum_(summary), dev_(deviations) {
    sum_.epoch = epoch;
  }

  [[nodiscard]] bool have_header() const noexcept { return header_.has_value(); }

  void header_line(const ledger_epoch& h, ledger_where where) {
    if (!header_) {
      header_ = h;
      header_where_ = where.text();
      sum_.header = true;
      sum_.samples = h.samples;
      sources_.resize(h.sources);
      return;
    }
    const ledger_epoch& a = *header_;
    if (a.stage != h.stage || a.samples != h.samples || a.sources != h.sources ||
        a.seed != h.seed || a.fingerprint != h.fingerprint || a.pads != h.pads)
      header_issue(where.text() + ": epoch " + std::to_string(e_) +
                   "'s header differs from the one read first (n=" + std::to_string(a.samples) +
                   " src=" + std::to_string(a.sources) + " st=" + std::to_string(a.stage) + ")");
  }

  void source_line(const ledger_source& s, ledger_where where) {
    if (!header_) {
      header_issue(where.text() + ": source line before the epoch's header (E line)");
      return;
    }
    if (s.id >= sources_.size()) {
      header_issue(where.text() + ": source " + std::to_string(s.id) +
                   " but the epoch's header declares " + std::to_string(sources_.size()) +
                   " sources");
      return;
    }
    std::optional<ledger_source>& slot = sources_[s.id];
    if (!slot) {
      if (ready_) {
        header_issue(where.text() + ": source " + std::to_string(s.id) +
                     " declared after the epoch's first ids");
        return;
      }
      slot = s;
      return;
    }
    const ledger_source& a = *slot;
    if (a.name != s.name || a.first != s.first || a.rows != s.rows || a.drawn != s.drawn ||
        a.draw != s.draw || a.weight != s.weight || a.count != s.count || a.digest != s.digest)
      header_issue(where.text() + ": source " + std::to_string(s.id) + " (\"" + a.name +
                   "\") differs from its line read first");
  }

  /// A `D` or `X` chunk (a repeated identical chunk is read once).
  void ids_line(const ledger_ids& c, ledger_where where) {
    if (!prepare(where)) return;
    const std::uint64_t digest = ledger_digest(c.ids);
    const auto key = std::make_tuple(c.tag, c.tag == 'D' ? std::to_string(c.source) : c.why, c.at);
    const auto [it, fresh] = chunks_.try_emplace(key, c.ids.size(), digest);
    if (!fresh) {
      if (it->second != std::pair<std::uint64_t, std::uint64_t>(c.ids.size(), digest))
        header_issue(where.text() + ": " + (c.tag == 'D' ? "drawn" : "dropped") +
                     " chunk at=" + std::to_string(c.at) + " differs from the one read first");
      return;
    }
    if (c.tag == 'D') {
      if (c.source >= sources_.size() || !sources_[c.source] ||
          sources_[c.source]->draw != ledger_draw::listed) {
        header_issue(where.text() + ": drawn ids of source " + std::to_string(c.source) +
                     ", which is not a listed source of the epoch");
        return;
      }
      listed_count_[c.source] += c.ids.size();
      listed_digest_[c.source] += digest;
      for (const std::uint64_t id : c.ids) {
        if (id >= n_ || source_of(id) != c.source) {
          header_issue(where.text() + ": drawn id " + std::to_string(id) +
                       " is not a row of source " + std::to_string(c.source));
          continue;
        }
        drawn_bits_[id >> 6] |= std::uint64_t{1} << (id & 63);
        add(id, +1);
      }
      return;
    }
    sum_.dropped += c.ids.size();
    sum_.dropped_by[c.why] += c.ids.size();
    for (const std::uint64_t id : c.ids) account(id, dropped_by_source_);
  }

  void batch_line(const ledger_batch& b, ledger_where where) {
    ++sum_.batches;
    if (b.stage != last_stage_) sum_.stages.insert(last_stage_ = b.stage);
    if (b.world != last_world_) sum_.worlds.insert(last_world_ = b.world);
    if (b.rank < (1u << 20)) {  // a flag per rank, into the set at the end
      if (b.rank >= rank_seen_.size()) rank_seen_.resize(b.rank + 1, false);
      rank_seen_[b.rank] = true;
    } else {
      sum_.ranks.insert(b.rank);
    }
    if (!prepare(where)) return;
    const std::size_t real = b.repeat ? 0 : b.ids.size() - b.pads;
    if (b.repeat) {
      ++sum_.repeat_batches;
      sum_.repeat_samples += b.ids.size();
    } else {
      sum_.pads += b.pads;
    }
    const std::uint64_t* ids = b.ids.data();
    // Batched across lines, so the table's entries can be fetched well ahead of their use.
    pending_.insert(pending_.end(), ids, ids + real);
    if (pending_.size() >= pending_batch) flush();
    sum_.delivered += real;
    for (std::size_t i = real; i < b.ids.size(); ++i)
      if (ids[i] >= n_) unexpected(ids[i]);
    for (const ledger_substitution& s : b.substitutions) {
      ++sum_.substitutions;
      ++sum_.substituted_by[s.why];
      if (s.replacement >= n_) unexpected(s.replacement);
    }
  }

  /// The end of pass 1: missing samples, header checks, shares. Returns the samples to name.
  std::vector<std::uint64_t> finish() {
    flush();
    std::vector<std::uint64_t> named(candidates_.begin(), candidates_.end());
    for (std::uint32_t r = 0; r < rank_seen_.size(); ++r)
      if (rank_seen_[r]) sum_.ranks.insert(r);
    if (!header_) {
      if (!ready_)
        header_issue("epoch " + std::to_string(e_) +
                     " has lines but no header (E line): its samples cannot be checked");
      return {};
    }
    if (!prepare(std::nullopt)) return {};
    if (bitmap_) {
      for (const auto& s : sources_) {
        if (s->rows == 0) continue;
        const std::uint64_t first = s->first, last = s->first + s->rows;
        for (std::uint64_t w = first >> 6; w <= (last - 1) >> 6; ++w) {
          std::uint64_t clear = ~bits_[w];
          if (w == first >> 6) clear &= ~std::uint64_t{0} << (first & 63);
          if (w == (last - 1) >> 6 && (last & 63) != 0)
            clear &= ~std::uint64_t{0} >> (64 - (last & 63));
          if (clear == 0) continue;
          sum_.missing += static_cast<std::uint64_t>(std::popcount(clear));
          while (clear != 0 && named.size() < o_.max_named) {
            named.push_back(w * 64 + static_cast<std::uint64_t>(std::countr_zero(clear)));
            clear &= clear - 1;
          }
          sum_.unnamed += static_cast<std::uint64_t>(std::popcount(clear));
        }
      }
    } else {
      // A count is its byte plus what spilled past ±127 (in id order, walked alongside).
      std::vector<std::pair<std::uint64_t, std::int64_t>> spill(spill_.begin(), spill_.end());
      std::sort(spill.begin(), spill.end());
      std::size_t next_spill = 0;
      for (std::uint64_t id = 0; id < n_; ++id) {
        std::int64_t c = counts_[static_cast<std::size_t>(id)];
        if (next_spill < spill.size() && spill[next_spill].first == id)
          c += spill[next_spill++].second;
        if (c == 0) continue;
        const bool drawn = (drawn_bits_[id >> 6] >> (id & 63)) & 1;
        if (c > 0) {
          sum_.missing += static_cast<std::uint64_t>(c);
        } else if (drawn) {
          sum_.duplicated += static_cast<std::uint64_t>(-c);
        } else {
          sum_.unexpected += static_cast<std::uint64_t>(-c);
        }
        if (candidates_.contains(id)) continue;
        if (named.size() < o_.max_named) {
          named.push_back(id);
        } else {
          ++sum_.unnamed;
        }
      }
    }
    std::sort(named.begin(), named.end());
    check_sources();
    return named;
  }

  /// The id space and source lookup, for pass 2.
  [[nodiscard]] std::uint64_t samples() const noexcept { return n_; }
  [[nodiscard]] std::optional<std::uint32_t> source_index(std::uint64_t id) const noexcept {
    const std::uint32_t s = source_of(id);
    if (s == no_source) return std::nullopt;
    return s;
  }
  [[nodiscard]] const ledger_source& source(std::uint32_t s) const { return *sources_[s]; }
  [[nodiscard]] bool drawn_all(std::uint32_t s) const {
    return sources_[s]->draw == ledger_draw::all;
  }

  void header_issue(std::string message) {
    ++sum_.line_issues;
    audit_deviation d;
    d.issue = audit_issue::header;
    d.epoch = e_;
    d.detail = std::move(message);
    dev_.push_back(std::move(d));
  }

 private:
  static constexpr std::uint32_t no_source = 0xffffffffu;
  static constexpr std::size_t pending_batch = 1024;

  /// Accounts the pending delivered ids, prefetching their table entries ahead.
  void flush() {
    const std::size_t count = pending_.size();
    const std::uint64_t* ids = pending_.data();
    constexpr std::size_t ahead = 24;
    if (!(bitmap_ && single_full_)) {
      for (std::size_t i = 0; i < count; ++i) {
#if defined(__GNUC__)
        if (i + ahead < count && ids[i + ahead] < n_) {
          if (bitmap_) {
            __builtin_prefetch(&bits_[ids[i + ahead] >> 6], 1);
          } else {
            __builtin_prefetch(&counts_[static_cast<std::size_t>(ids[i + ahead])], 1);
          }
        }
#endif
        account(ids[i], delivered_by_source_);
      }
      pending_.clear();
      return;
    }
    // One source drawn whole: a test-and-set per id.
    std::uint64_t fresh = 0;
    for (std::size_t i = 0; i < count; ++i) {
#if defined(__GNUC__)
      if (i + ahead < count && ids[i + ahead] < n_)
        __builtin_prefetch(&bits_[ids[i + ahead] >> 6], 1);
#endif
      const std::uint64_t id = ids[i];
      if (id >= n_) {
        unexpected(id);
        continue;
      }
      std::uint64_t& w = bits_[id >> 6];
      const std::uint64_t m = std::uint64_t{1} << (id & 63);
      if ((w & m) != 0) {
        duplicate(id);
        continue;
      }
      w |= m;
      ++fresh;
    }
    if (fresh != 0) delivered_by_source_[0] += fresh;
    pending_.clear();
  }

  /// Allocates the per-id table at the first ids of the epoch (all sources must be known).
  bool prepare(std::optional<ledger_where> where) {
    if (ready_) return valid_;
    ready_ = true;
    if (!header_) {
      if (where)
        header_issue(where->text() + ": ids of epoch " + std::to_string(e_) +
                     " before any header (E line) of the epoch");
      return valid_ = false;
    }
    n_ = header_->samples;
    bool listed = false;
    for (const auto& s : sources_) listed = listed || (s && s->draw == ledger_draw::listed);
    // The per-id tables: a bit per id (drawn all), a count byte and a bit (listed).
    const std::uint64_t words = n_ / 64 + (n_ % 64 != 0 ? 1 : 0);
    const std::uint64_t limit = o_.max_table_bytes;
    const bool too_large = words > limit / 8 || (listed && n_ > limit - words * 8);
    if (too_large) {
      header_issue(header_where_ + ": epoch " + std::to_string(e_) + "'s id space n=" +
                   std::to_string(n_) + " needs more than " + std::to_string(limit) +
                   " bytes of per-id tables (audit_options::max_table_bytes): not audited");
      return valid_ = false;
    }
    for (std::size_t s = 0; s < sources_.size(); ++s) {
      if (!sources_[s]) {
        header_issue("epoch " + std::to_string(e_) + ": the header declares " +
                     std::to_string(sources_.size()) + " sources but source " + std::to_string(s) +
                     " has no S line");
        return valid_ = false;
      }
      const ledger_source& src = *sources_[s];
      if (src.first > n_ || src.rows > n_ - src.first) {
        header_issue("epoch " + std::to_string(e_) + ": source " + std::to_string(s) + " (\"" +
                     src.name + "\") rows [" + std::to_string(src.first) + ", " +
                     std::to_string(src.first + src.rows) +
                     ") pass the id space n=" + std::to_string(n_));
        return valid_ = false;
      }
      if (src.draw == ledger_draw::all && src.drawn != src.rows) {
        header_issue("epoch " + std::to_string(e_) + ": source " + std::to_string(s) + " (\"" +
                     src.name + "\") is drawn all but declares drawn=" + std::to_string(src.drawn) +
                     " for " + std::to_string(src.rows) + " rows");
        return valid_ = false;
      }
      by_first_.push_back(static_cast<std::uint32_t>(s));
    }
    std::sort(by_first_.begin(), by_first_.end(), [&](std::uint32_t a, std::uint32_t b) {
      return sources_[a]->first < sources_[b]->first;
    });
    for (std::size_t i = 1; i < by_first_.size(); ++i) {
      const ledger_source& a = *sources_[by_first_[i - 1]];
      const ledger_source& b = *sources_[by_first_[i]];
      if (a.first + a.rows > b.first) {
        header_issue("epoch " + std::to_string(e_) + ": sources \"" + a.name + "\" and \"" +
                     b.name + "\" overlap");
        return valid_ = false;
      }
    }
    for (const std::uint32_t s : by_first_) firsts_.push_back(sources_[s]->first);
    delivered_by_source_.assign(sources_.size(), 0);
    dropped_by_source_.assign(sources_.size(), 0);
    listed_count_.assign(sources_.size(), 0);
    listed_digest_.assign(sources_.size(), 0);
    bitmap_ = !listed;
    single_full_ = sources_.size() == 1 && sources_[0]->first == 0 && sources_[0]->rows == n_;
    try {
      if (bitmap_) {
        bits_.assign(static_cast<std::size_t>(words), 0);
        sum_.memory_bytes = words * 8;
      } else {
        counts_.assign(static_cast<std::size_t>(n_), 0);
        drawn_bits_.assign(static_cast<std::size_t>(words), 0);
        sum_.memory_bytes = n_ + words * 8;
      }
    } catch (const std::bad_alloc&) {
      header_issue(header_where_ + ": epoch " + std::to_string(e_) + "'s id space n=" +
                   std::to_string(n_) + ": out of memory for its per-id tables: not audited");
      return valid_ = false;
    }
    if (!bitmap_) {
      for (const auto& s : sources_) {
        if (s->draw != ledger_draw::all) continue;
        for (std::uint64_t id = s->first; id < s->first + s->rows; ++id) {
          counts_[static_cast<std::size_t>(id)] = 1;
          drawn_bits_[id >> 6] |= std::uint64_t{1} << (id & 63);
        }
      }
    }
    return valid_ = true;
  }

  [[nodiscard]] std::uint32_t source_of(std::uint64_t id) const noexcept {
    if (single_full_) return id < n_ ? 0 : no_source;
    const auto it = std::upper_bound(firsts_.begin(), firsts_.end(), id);
    if (it == firsts_.begin()) return no_source;
    const std::uint32_t s = by_first_[static_cast<std::size_t>(it - firsts_.begin() - 1)];
    return id - sources_[s]->first < sources_[s]->rows ? s : no_source;
  }

  void add(std::uint64_t id, int delta) {
    std::int8_t& c = counts_[static_cast<std::size_t>(id)];
    if ((delta > 0 && c == 127) || (delta < 0 && c == -127)) {
      spill_[id] += delta;
    } else {
      c = static_cast<std::int8_t>(c + delta);
    }
  }

  /// A delivered or dropped id.
  void account(std::uint64_t id, std::vector<std::uint64_t>& per_source) {
    const std::uint32_t s = id < n_ ? source_of(id) : no_source;
    if (s == no_source) {
      if (bitmap_ || id >= n_) {
        unexpected(id);
      } else {
        add(id, -1);  // not drawn: counted as unexpected at the end
        candidate(id);
      }
      return;
    }
    ++per_source[s];
    if (bitmap_) {
      std::uint64_t& w = bits_[id >> 6];
      const std::uint64_t m = std::uint64_t{1} << (id & 63);
      if ((w & m) != 0) {
        duplicate(id);
        return;
      }
      w |= m;
    } else {
      add(id, -1);  // counted at the end (duplicated or unexpected by the drawn bit)
    }
  }

  void unexpected(std::uint64_t id) {
    ++sum_.unexpected;
    candidate(id);
  }
  void duplicate(std::uint64_t id) {
    ++sum_.duplicated;
    candidate(id);
  }
  void candidate(std::uint64_t id) {
    if (candidates_.size() < o_.max_named) {
      candidates_.insert(id);
    } else if (!candidates_.contains(id)) {
      ++sum_.unnamed;
    }
  }

  void check_sources() {
    double weights = 0;
    std::uint64_t weighted_drawn = 0;
    for (const auto& s : sources_) {
      if (s->weight) {
        weights += *s->weight;
        weighted_drawn += s->drawn;
      }
    }
    for (std::uint32_t i = 0; i < sources_.size(); ++i) {
      const ledger_source& s = *sources_[i];
      audit_source a;
      a.id = i;
      a.name = s.name;
      a.weight = s.weight;
      a.count = s.count;
      a.drawn = s.drawn;
      a.delivered = delivered_by_source_[i];
      a.dropped = dropped_by_source_[i];
      sum_.drawn += s.drawn;
      if (s.draw == ledger_draw::listed) {
        if (listed_count_[i] != s.drawn) {
          a.ok = false;
          header_issue("epoch " + std::to_string(e_) + ": source " + std::to_string(i) + " (\"" +
                       s.name + "\") declares drawn=" + std::to_string(s.drawn) +
                       " but its drawn lines (D) hold " + std::to_string(listed_count_[i]) +
                       " ids");
        } else if (s.digest && *s.digest != listed_digest_[i]) {
          a.ok = false;
          header_issue("epoch " + std::to_string(e_) + ": source " + std::to_string(i) + " (\"" +
                       s.name + "\"): the digest of its drawn lines (D) is not the declared one");
        }
      }
      if (s.count && *s.count != s.drawn) {
        a.ok = false;
        sum_.share_ok = false;
        audit_deviation d;
        d.issue = audit_issue::share;
        d.epoch = e_;
        d.detail = "epoch " + std::to_string(e_) + ": source " + std::to_string(i) + " (\"" +
                   s.name + "\") drew " + std::to_string(s.drawn) + " samples, its count is " +
                   std::to_string(*s.count);
        dev_.push_back(std::move(d));
      }
      if (s.weight && weights > 0 && weighted_drawn > 0) {
        a.share = static_cast<double>(s.drawn) / static_cast<double>(weighted_drawn);
        a.weight_share = *s.weight / weights;
        if (std::abs(a.share - a.weight_share) > o_.share_tolerance) {
          a.ok = false;
          sum_.share_ok = false;
          char buf[160];
          std::snprintf(buf, sizeof buf, "%.4f of the weighted samples, its weight says %.4f",
                        a.share, a.weight_share);
          audit_deviation d;
          d.issue = audit_issue::share;
          d.epoch = e_;
          d.detail = "epoch " + std::to_string(e_) + ": source " + std::to_string(i) + " (\"" +
                     s.name + "\") drew " + buf + " (tolerance " +
                     std::to_string(o_.share_tolerance) + ")";
          dev_.push_back(std::move(d));
        }
      }
      sum_.sources.push_back(std::move(a));
    }
  }

  std::uint64_t e_;
  const audit_options& o_;
  audit_epoch& sum_;
  std::vector<audit_deviation>& dev_;
  std::optional<ledger_epoch> header_;
  std::string header_where_;  // "file:line" of the header read first
  std::vector<std::optional<ledger_source>> sources_;
  bool ready_ = false;
  bool valid_ = false;
  bool bitmap_ = true;
  bool single_full_ = false;
  std::uint64_t n_ = 0;
  std::vector<std::uint32_t> by_first_;
  std::vector<std::uint64_t> firsts_;
  std::vector<std::uint64_t> bits_;        // bitmap: delivered or dropped
  std::vector<std::int8_t> counts_;        // listed: drawn − delivered − dropped
  std::vector<std::uint64_t> drawn_bits_;  // listed: drawn at least once
  std::unordered_map<std::uint64_t, std::int64_t> spill_;
  std::vector<std::uint64_t> delivered_by_source_;
  std::vector<std::uint64_t> dropped_by_source_;
  std::vector<std::uint64_t> listed_count_;
  std::vector<std::uint64_t> listed_digest_;
  std::unordered_set<std::uint64_t> candidates_;
  std::vector<std::uint64_t> pending_;  // delivered ids not yet set in bits_ (see flush)
  std::uint32_t last_stage_ = 0xffffffffu;
  std::uint32_t last_world_ = 0xffffffffu;
  std::vector<bool> rank_seen_;
  std::map<std::tuple<char, std::string, std::uint64_t>, std::pair<std::uint64_t, std::uint64_t>>
      chunks_;
};

/// One ledger file being merged: its reader and the line read ahead.
struct audit_file {
  ledger_reader reader;
  std::string name;
  bool has = false;
  ledger_line line{};
  std::uint64_t offset = 0;  // of `line`
  std::uint64_t number = 0;  // line number before `line`
  std::optional<std::uint64_t> epoch{};
  bool guessed = false;  // `epoch` is the block's: the line has no readable epoch field
  std::uint64_t last_epoch = 0;
  bool read_any = false;           // a line of some epoch was read (last_epoch is one)
  std::uint64_t block_offset = 0;  // where the current epoch's lines start
  std::uint64_t block_number = 0;

  std::optional<std::uint32_t> rank{};  // from a name rank-RRRRR.ledger
  bool rank_reported = false;

  audit_file(const std::string& path, std::size_t block) : reader(path, block), name(path) {
    const std::size_t slash = path.find_last_of('/');
    const std::string_view base =
        std::string_view(path).substr(slash == std::string::npos ? 0 : slash + 1);
    if (base.size() > 12 && base.substr(0, 5) == "rank-" &&
        base.substr(base.size() - 7) == ".ledger") {
      std::uint32_t r = 0;
      const std::string_view digits = base.substr(5, base.size() - 12);
      const auto res = std::from_chars(digits.data(), digits.data() + digits.size(), r);
      if (res.ec == std::errc{} && res.ptr == digits.data() + digits.size()) rank = r;
    }
  }

  void advance() {
    offset = reader.tell();
    number = reader.line_number();
    has = reader.next(line);
    if (!has) return;
    epoch = line.binary ? ledger_peek_epoch_binary(line) : ledger_peek_epoch(line.text);
    guessed = !epoch;
    if (guessed) epoch = last_epoch;  // a corrupt line belongs to the block it is in
  }
  [[nodiscard]] std::string where() const { return name + ":" + std::to_string(line.number); }
  [[nodiscard]] ledger_where at() const { return {name, line.number}; }
};

/// Pass 2 over an epoch's lines: where each named sample appeared.
struct audit_named {
  std::uint64_t drawn = 0;
  std::uint64_t seen = 0;
  std::vector<audit_place> places;
};

}  // namespace
}  // namespace detail

using namespace detail;  // the audit pass and the ledger reader's parsing

/// Audits the ledger files `paths` (every rank's; any order). Throws `vbucket::error` when a
/// file cannot be opened or is not a ledger; everything in the files is reported.
audit_report audit_ledgers(std::span<const std::string> paths, const audit_options& options) {
  audit_report report;
  std::vector<std::unique_ptr<audit_file>> files;
  // Read blocks of 1 MiB, smaller with many files: at most 64 MiB of blocks in all.
  const std::size_t block =
      std::clamp<std::size_t>((std::size_t{64} << 20) / std::max<std::size_t>(paths.size(), 1),
                              std::size_t{64} << 10, std::size_t{1} << 20);
  for (const std::string& p : paths) {
    files.push_back(std::make_unique<audit_file>(p, block));
    report.files.push_back(p);
    files.back()->advance();
  }
  std::set<std::uint64_t> finished;
  ledger_epoch eh;
  ledger_source sh;
  ledger_ids ch;
  ledger_batch bh;

  const auto line_issue = [&](audit_issue issue, std::uint64_t epoch, std::string message) {
    audit_deviation d;
    d.issue = issue;
    d.epoch = epoch;
    d.detail = std::move(message);
    report.deviations.push_back(std::move(d));
  };

  for (;;) {
    std::optional<std::uint64_t> epoch;
    for (const auto& f : files)
      if (f->has && (!epoch || *f->epoch < *epoch)) epoch = f->epoch;
    if (!epoch) break;
    const std::uint64_t e = *epoch;
    if (finished.contains(e)) {  // lines of an epoch after a later epoch's, in some file
      for (const auto& f : files) {
        while (f->has && *f->epoch == e) {
          ++report.lines;
          if (f->guessed || f->line.truncated) {
            line_issue(
                f->line.truncated ? audit_issue::truncated : audit_issue::corrupt, e,
                f->where() + ": " +
                    (f->line.truncated ? (f->line.binary ? "the last record is cut short"
                                                         : "the last line ends without a newline")
                                       : "a line without a readable epoch field") +
                    ": not counted");
          } else {
            line_issue(audit_issue::order, e,
                       f->where() + ": a line of epoch " + std::to_string(e) + " after epoch " +
                           std::to_string(f->last_epoch) +
                           "'s lines (a file's epochs must not go back): not counted");
          }
          f->advance();
        }
      }
      continue;
    }
    report.epochs.emplace_back();
    audit_epoch& sum = report.epochs.back();
    audit_epoch_check check(e, options, sum, report.deviations);

    // The files of this epoch, the ones whose block starts with the header first.
    std::vector<audit_file*> order;
    for (const auto& f : files)
      if (f->has && *f->epoch == e && f->line.tag == 'E') order.push_back(f.get());
    for (const auto& f : files)
      if (f->has && *f->epoch == e && f->line.tag != 'E') order.push_back(f.get());
    const bool prepass = order.front()->line.tag != 'E';
    if (prepass) {
      // Pre-pass: find the header and sources of the epoch in any file, then read from the
      // start of each block again.
      for (audit_file* f : order) {
        const std::uint64_t off = f->offset, num = f->number;
        while (f->has && *f->epoch == e) {
          if (!f->line.truncated && (f->line.tag == 'E' || f->line.tag == 'S')) {
            try {
              if (f->line.tag == 'E') {
                parse_ledger_record(f->line, f->at(), eh);
                check.header_line(eh, f->at());
              } else {
                parse_ledger_record(f->line, f->at(), sh);
                check.source_line(sh, f->at());
              }
            } catch (const error&) {  // reported when the line is read for real
            }
          }
          f->advance();
        }
        f->reader.seek(off, num);
        f->advance();
      }
    }

    for (audit_file* f : order) {
      if (f->read_any && f->last_epoch > e) {  // this file's epochs go back
        ++sum.line_issues;
        line_issue(audit_issue::order, e,
                   f->where() + ": a line of epoch " + std::to_string(e) + " after epoch " +
                       std::to_string(f->last_epoch) +
                       "'s lines (a file's epochs must not go back)");
      }
      f->block_offset = f->offset;
      f->block_number = f->number;
      while (f->has && *f->epoch == e) {
        ++report.lines;
        const ledger_line& l = f->line;
        if (l.truncated) {
          ++sum.line_issues;
          line_issue(
              audit_issue::truncated, e,
              f->where() +
                  (l.binary ? ": the last record is cut short (a write cut short): "
                            : ": the last line ends without a newline (a write cut short): ") +
                  "not counted");
        } else {
          try {
            switch (l.tag) {
              case 'B':
                parse_ledger_record(l, f->at(), bh);
                if (bh.epoch != e) throw error(f->where() + ": corrupt epoch field");
                report.ids += bh.ids.size();
                if (f->rank && bh.rank != *f->rank && !f->rank_reported) {
                  f->rank_reported = true;  // once per file
                  ++sum.line_issues;
                  line_issue(audit_issue::rank, e,
                             f->where() + ": a batch of rank " + std::to_string(bh.rank) +
                                 " in rank " + std::to_string(*f->rank) +
                                 "'s file (files swapped or renamed?)");
                }
                check.batch_line(bh, f->at());
                break;
              case 'D':
              case 'X':
                parse_ledger_record(l, f->at(), ch);
                report.ids += ch.ids.size();
                check.ids_line(ch, f->at());
                break;
              case 'E':  // (read by the pre-pass already, if there was one)
                parse_ledger_record(l, f->at(), eh);
                if (!prepass) check.header_line(eh, f->at());
                break;
              case 'S':
                parse_ledger_record(l, f->at(), sh);
                if (!prepass) check.source_line(sh, f->at());
                break;
              default:
                throw error(f->where() + ": unknown record tag " + ledger_tag_text(l.tag));
            }
          } catch (const error& err) {
            ++sum.line_issues;
            line_issue(audit_issue::corrupt, e, std::string(err.what()) + ": not counted");
          }
        }
        f->last_epoch = e;
        f->read_any = true;
        f->advance();
      }
    }

    const std::vector<std::uint64_t> named = check.finish();
    finished.insert(e);
    if (named.empty()) continue;

    // Pass 2: where the named samples appeared.
    std::unordered_map<std::uint64_t, audit_named> found;
    for (const std::uint64_t id : named) {
      audit_named& a = found[id];
      const auto s = check.source_index(id);
      if (s && check.drawn_all(*s)) a.drawn = 1;
    }
    const auto place = [&](const audit_file& f, std::uint64_t id, char tag, std::uint64_t step,
                           std::uint32_t rank, std::string how) {
      auto it = found.find(id);
      if (it == found.end()) return;
      if (tag == 'D') {
        ++it->second.drawn;
        return;
      }
      if (how == "delivered" || tag == 'X') ++it->second.seen;
      if (it->second.places.size() < options.max_places)
        it->second.places.push_back({f.name, f.line.number, tag, step, rank, std::move(how)});
    };
    std::set<std::tuple<char, std::string, std::uint64_t>> chunks;  // read once, as in pass 1
    for (audit_file* f : order) {
      const std::uint64_t off = f->offset, num = f->number;
      f->reader.seek(f->block_offset, f->block_number);
      f->advance();
      while (f->has && *f->epoch == e) {
        const ledger_line& l = f->line;
        if (!l.truncated) {
          try {
            if (l.tag == 'B') {
              parse_ledger_record(l, f->at(), bh);
              const std::size_t real = bh.repeat ? 0 : bh.ids.size() - bh.pads;
              for (std::size_t i = 0; i < bh.ids.size(); ++i)
                place(*f, bh.ids[i], 'B', bh.step, bh.rank,
                      i < real    ? "delivered"
                      : bh.repeat ? "repeat"
                                  : "pad");
              for (const ledger_substitution& s : bh.substitutions)
                place(*f, s.replacement, 'B', bh.step, bh.rank, "replacement");
            } else if (l.tag == 'D' || l.tag == 'X') {
              parse_ledger_record(l, f->at(), ch);
              const bool first_read =
                  chunks.emplace(ch.tag, ch.tag == 'D' ? std::to_string(ch.source) : ch.why, ch.at)
                      .second;
              for (std::size_t i = 0; first_read && i < ch.ids.size(); ++i)
                place(*f, ch.ids[i], l.tag, 0, 0,
                      l.tag == 'X' ? "dropped (" + ch.why + ")" : "drawn");
            }
          } catch (const error&) {  // reported in pass 1
          }
        }
        f->advance();
      }
      f->reader.seek(off, num);
      f->advance();
    }
    for (const std::uint64_t id : named) {
      audit_named& a = found[id];
      audit_deviation d;
      d.epoch = e;
      d.sample = id;
      d.drawn = a.drawn;
      d.seen = a.seen;
      if (a.drawn == 0) {
        d.issue = audit_issue::unexpected;
      } else if (a.seen < a.drawn) {
        d.issue = audit_issue::missing;
      } else if (a.seen > a.drawn) {
        d.issue = audit_issue::duplicated;
      } else {
        continue;  // (not reached: pass 1 and pass 2 count alike)
      }
      if (const auto s = check.source_index(id)) {
        const ledger_source& src = check.source(*s);
        d.detail = "source \"" + src.name + "\" row " + std::to_string(id - src.first);
      } else {
        d.detail = id < check.samples()
                       ? "in no source"
                       : "not below the id space n=" + std::to_string(check.samples());
      }
      d.places = std::move(a.places);
      report.deviations.push_back(std::move(d));
    }
  }
  // Epochs run one after the other: one with no line in any file was lost whole.
  std::vector<std::uint64_t> epochs;
  for (const audit_epoch& e : report.epochs) epochs.push_back(e.epoch);
  std::sort(epochs.begin(), epochs.end());
  for (std::size_t i = 1; i < epochs.size(); ++i) {
    const std::uint64_t a = epochs[i - 1], b = epochs[i];
    if (b - a < 2) continue;
    line_issue(audit_issue::header, a + 1,
               (b - a == 2 ? "epoch " + std::to_string(a + 1) + " has"
                           : "epochs " + std::to_string(a + 1) + " to " + std::to_string(b - 1) +
                                 " have") +
                   " no lines in any file, between epochs " + std::to_string(a) + " and " +
                   std::to_string(b) + ": its samples were neither declared nor delivered");
  }
  return report;
}

/// One deviation as one line, e.g. "epoch 3: sample 17 (source \"web\" row 17): duplicated:
/// drawn 1, delivered or dropped 2: rank 1 step 5 (rank-00001.ledger:12), ...".
[[nodiscard]] std::string format_audit_deviation(const audit_deviation& d) {
  std::string s = "epoch " + std::to_string(d.epoch) + ": ";
  if (!d.sample) return s + std::string(to_string(d.issue)) + ": " + d.detail;
  s += "sample " + std::to_string(*d.sample) + " (" + d.detail +
       "): " + std::string(to_string(d.issue)) + ": drawn " + std::to_string(d.drawn) +
       ", delivered or dropped " + std::to_string(d.seen);
  for (std::size_t i = 0; i < d.places.size(); ++i) {
    const audit_place& p = d.places[i];
    s += i == 0 ? ": " : "; ";
    s += p.how;
    if (p.tag == 'B') s += " at rank " + std::to_string(p.rank) + " step " + std::to_string(p.step);
    s += " (" + p.file + ":" + std::to_string(p.line) + ")";
  }
  return s;
}

/// The report: a table per epoch (and per source), then every deviation, then a verdict line.
[[nodiscard]] std::string format_audit_report(const audit_report& r) {
  std::string out;
  char buf[512];
  const auto u = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
  std::snprintf(buf, sizeof buf,
                "%-6s %-6s %-8s %10s %8s %12s %10s %10s %8s %10s %12s %8s %8s %8s %s\n", "epoch",
                "stage", "worlds", "batches", "repeats", "delivered", "pads", "rep.ids", "subst",
                "dropped", "drawn", "missing", "dup", "unexp", "status");
  out += buf;
  const auto join = [](const std::set<std::uint32_t>& s) {
    std::string t;
    for (const std::uint32_t v : s) t += (t.empty() ? "" : ",") + std::to_string(v);
    return t.empty() ? std::string("-") : t;
  };
  for (const audit_epoch& e : r.epochs) {
    std::snprintf(buf, sizeof buf,
                  "%-6llu %-6s %-8s %10llu %8llu %12llu %10llu %10llu %8llu %10llu %12llu %8llu "
                  "%8llu %8llu %s\n",
                  u(e.epoch), join(e.stages).c_str(), join(e.worlds).c_str(), u(e.batches),
                  u(e.repeat_batches), u(e.delivered), u(e.pads), u(e.repeat_samples),
                  u(e.substitutions), u(e.dropped), u(e.drawn), u(e.missing), u(e.duplicated),
                  u(e.unexpected), e.clean() ? "ok" : "DEVIATIONS");
    out += buf;
    for (const audit_source& s : e.sources) {
      std::string target = s.count ? "count " + std::to_string(*s.count) : std::string();
      if (s.weight) {
        std::snprintf(buf, sizeof buf, "share %.4f, weight %.4f", s.share, s.weight_share);
        target += (target.empty() ? "" : ", ") + std::string(buf);
      }
      std::snprintf(buf, sizeof buf,
                    "         source %u \"%s\": drawn %llu, delivered %llu, dropped %llu%s%s %s\n",
                    s.id, s.name.c_str(), u(s.drawn), u(s.delivered), u(s.dropped),
                    target.empty() ? "" : "; ", target.c_str(), s.ok ? "ok" : "OFF");
      out += buf;
    }
    for (const auto& [why, n] : e.dropped_by) {
      std::snprintf(buf, sizeof buf, "         dropped (%s): %llu\n", why.c_str(), u(n));
      out += buf;
    }
    for (const auto& [why, n] : e.substituted_by) {
      std::snprintf(buf, sizeof buf, "         substituted (%s): %llu\n", why.c_str(), u(n));
      out += buf;
    }
    if (e.unnamed != 0) {
      std::snprintf(buf, sizeof buf,
                    "         %llu more deviations not named (raise max_named, --max-named)\n",
                    u(e.unnamed));
      out += buf;
    }
  }
  for (const audit_deviation& d : r.deviations) out += format_audit_deviation(d) + "\n";
  std::snprintf(buf, sizeof buf,
                "%s: %zu files, %llu lines, %llu sample ids, %zu epochs, %zu deviations\n",
                r.clean() ? "clean" : "DEVIATIONS", r.files.size(), u(r.lines), u(r.ids),
                r.epochs.size(), r.deviations.size());
  out += buf;
  return out;
}

}  // namespace vbucket
