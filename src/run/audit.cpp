// vbucket::run: the audit of a run's ledgers, compiled once (include/vbucket/run/audit.hpp
// declares it and says how it works).
#include "vbucket/run/audit.hpp"

#include <algorithm>      // std::sort, std::clamp, std::max
#include <charconv>       // std::from_chars
#include <cstdint>        // std::uint64_t, std::uint32_t
#include <cstdio>         // std::snprintf
#include <memory>         // std::unique_ptr
#include <optional>       // std::optional
#include <set>            // std::set
#include <span>           // std::span
#include <string>         // std::string
#include <string_view>    // std::string_view
#include <tuple>          // std::tuple
#include <unordered_map>  // std::unordered_map
#include <utility>        // std::move
#include <vector>         // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/run/ledger.hpp"

#include "audit_epoch.hpp"    // audit_epoch_check
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
  /// Calls fn() at each line of epoch `e` from (from_offset, from_number) on, then reads on from
  /// where it was.
  template <class Fn>
  void reread(std::uint64_t e, std::uint64_t from_offset, std::uint64_t from_number, Fn&& fn) {
    const std::uint64_t off = offset, num = number;
    reader.seek(from_offset, from_number);
    for (advance(); has && *epoch == e; advance()) fn();
    reader.seek(off, num);
    advance();
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
    report.deviations.push_back(epoch_deviation(issue, epoch, std::move(message)));
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
        f->reread(e, f->offset, f->number, [&] {
          if (f->line.truncated || (f->line.tag != 'E' && f->line.tag != 'S')) return;
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
        });
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
      f->reread(e, f->block_offset, f->block_number, [&] {
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
      });
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

std::string format_audit_deviation(const audit_deviation& d) {
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

std::string format_audit_report(const audit_report& r) {
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
