#pragma once
// vbucket::run, private: the audit's per-epoch check (`audit_epoch_check`), used by
// `audit_ledgers` (audit.cpp) once per epoch; include/vbucket/run/audit.hpp says what it checks.

#include <algorithm>      // std::sort, std::upper_bound
#include <bit>            // std::popcount, std::countr_zero
#include <cmath>          // std::abs
#include <cstdint>        // std::uint64_t, std::uint32_t, std::int8_t
#include <cstdio>         // std::snprintf
#include <map>            // std::map
#include <new>            // std::bad_alloc
#include <optional>       // std::optional
#include <string>         // std::string
#include <tuple>          // std::tuple
#include <unordered_map>  // std::unordered_map
#include <unordered_set>  // std::unordered_set
#include <utility>        // std::pair, std::move
#include <vector>         // std::vector

#include "vbucket/run/audit.hpp"
#include "vbucket/run/ledger.hpp"

namespace vbucket::detail {

/// A deviation of an epoch that names no sample.
inline audit_deviation epoch_deviation(audit_issue issue, std::uint64_t epoch, std::string detail) {
  return {.issue = issue, .epoch = epoch, .detail = std::move(detail)};
}

/// One epoch's check: its header, its per-id table and its tallies.
class audit_epoch_check {
 public:
  audit_epoch_check(std::uint64_t epoch, const audit_options& o, audit_epoch& summary,
                    std::vector<audit_deviation>& deviations)
      : e_(epoch), o_(o), sum_(summary), dev_(deviations) {
    sum_.epoch = epoch;
  }

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
    dev_.push_back(epoch_deviation(audit_issue::header, e_, std::move(message)));
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
        header_issue(source_text(s) + " rows [" + std::to_string(src.first) + ", " +
                     std::to_string(src.first + src.rows) +
                     ") pass the id space n=" + std::to_string(n_));
        return valid_ = false;
      }
      if (src.draw == ledger_draw::all && src.drawn != src.rows) {
        header_issue(source_text(s) + " is drawn all but declares drawn=" +
                     std::to_string(src.drawn) + " for " + std::to_string(src.rows) + " rows");
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

  /// "epoch E: source S (\"NAME\")" (a message's start).
  [[nodiscard]] std::string source_text(std::size_t s) const {
    return "epoch " + std::to_string(e_) + ": source " + std::to_string(s) + " (\"" +
           sources_[s]->name + "\")";
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
          header_issue(source_text(i) + " declares drawn=" + std::to_string(s.drawn) +
                       " but its drawn lines (D) hold " + std::to_string(listed_count_[i]) +
                       " ids");
        } else if (s.digest && *s.digest != listed_digest_[i]) {
          a.ok = false;
          header_issue(source_text(i) +
                       ": the digest of its drawn lines (D) is not the declared one");
        }
      }
      if (s.count && *s.count != s.drawn) {
        a.ok = false;
        sum_.share_ok = false;
        dev_.push_back(epoch_deviation(audit_issue::share, e_,
                                       source_text(i) + " drew " + std::to_string(s.drawn) +
                                           " samples, its count is " + std::to_string(*s.count)));
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
          dev_.push_back(epoch_deviation(audit_issue::share, e_,
                                         source_text(i) + " drew " + buf + " (tolerance " +
                                             std::to_string(o_.share_tolerance) + ")"));
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

}  // namespace vbucket::detail
