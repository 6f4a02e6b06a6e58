#pragma once
/// The sources of a training run and how an epoch draws from them (see run_plan.hpp).
///
/// A source is a metadata table with a name (and optionally its own assignment config and
/// rule). How many samples an epoch takes from it (`source_draw`): a weight (a share of the
/// epoch's N samples, N = `draw_spec::epoch_samples`, by default the sources' rows together),
/// a count, or a repeat factor (× its rows). Shares of weights are apportioned by largest
/// remainder, so the counts add up to N exactly and each is within one sample of w · N / Σw.
///
/// Drawing is deterministic and keyed by (seed, epoch, source name): without replacement a
/// source of n rows asked for m = q · n + r samples gives every row q times and a keyed
/// uniform subset of r rows (selection sampling); with replacement, m keyed uniform rows. The
/// epoch's drawn list (`drawn_epoch`) is every source's draws, source after source; the plan
/// shuffles them, so their order there carries no meaning.

#include <algorithm>     // std::sort, std::fill
#include <bit>           // std::bit_cast
#include <charconv>      // std::to_chars, std::from_chars
#include <cmath>         // std::floor, std::isfinite, std::llround
#include <cstddef>       // std::size_t
#include <cstdint>       // std::uint32_t, std::uint64_t
#include <functional>    // std::function
#include <memory>        // std::shared_ptr
#include <numeric>       // std::iota
#include <optional>      // std::optional
#include <span>          // std::span
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <utility>       // std::pair
#include <vector>        // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/base/random.hpp"  // fast_source, detail::mix64
#include "vbucket/bucket/assign.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/bucket/meta.hpp"
#include "vbucket/bucket/rules.hpp"          // opensora_v2_rule
#include "vbucket/detail/keyed_shuffle.hpp"  // keyed_below, stream_key, plan_key
#include "vbucket/detail/parallel_tasks.hpp"
#include "vbucket/detail/parse_number.hpp"  // split_text

namespace vbucket {

namespace detail {
/// Domains of the run's keyed streams (apart from the planner's and `fast_source`'s).
inline constexpr std::uint64_t run_domain_draw = 0xbe5466cf34e90c6cULL;
inline constexpr std::uint64_t run_domain_assign = 0xc0ac29b7c97c50ddULL;
inline constexpr std::uint64_t run_domain_segment = 0x3f84d5b5b5470917ULL;
inline constexpr std::uint64_t run_domain_crop = 0x9d2c5680a3f1e7b1ULL;

/// A 64-bit hash of bytes (mix64 over 8-byte words, then the length).
inline std::uint64_t hash_bytes(std::string_view s, std::uint64_t h = 0) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w = 0;
    for (std::size_t b = 0; b < 8; ++b)
      w |= std::uint64_t{static_cast<unsigned char>(s[i + b])} << (8 * b);
    h = mix64(h + w * golden_gamma);
  }
  std::uint64_t w = 0;
  for (std::size_t b = 0; i + b < s.size(); ++b)
    w |= std::uint64_t{static_cast<unsigned char>(s[i + b])} << (8 * b);
  return mix64(mix64(h + w * golden_gamma) + s.size());
}
inline std::uint64_t hash_word(std::uint64_t h, std::uint64_t w) noexcept {
  return mix64(h + (w + 1) * golden_gamma);
}
/// The shortest text of a double that reads back exactly.
inline std::string exact_text(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}
}  // namespace detail

/// The fingerprint of a table's metadata (frames, height, width, fps of every row, and the row
/// count): hashed in blocks of 2^16 rows in parallel and combined in order, so it does not
/// depend on the thread count.
[[nodiscard]] inline std::uint64_t table_fingerprint(const meta_table& t, unsigned threads = 0) {
  constexpr std::size_t block = std::size_t{1} << 16;
  const std::size_t n = t.size();
  const std::size_t blocks = (n + block - 1) / block;
  std::vector<std::uint64_t> h(blocks);
  detail::parallel_tasks(blocks, threads, [&](std::size_t b) {
    std::uint64_t x = b;
    const std::size_t e = std::min(n, (b + 1) * block);
    for (std::size_t i = b * block; i < e; ++i) {
      const std::uint64_t fps_bits = std::bit_cast<std::uint64_t>(t.fps(i));
      x = detail::hash_word(
          x, std::uint64_t{t.num_frames_data()[i]} ^ (std::uint64_t{t.height_data()[i]} << 32));
      x = detail::hash_word(x, std::uint64_t{t.width_data()[i]} ^ (fps_bits << 1));
    }
    h[b] = x;
  });
  std::uint64_t f = detail::hash_word(0x6d657461ULL, n);
  for (std::uint64_t x : h) f = detail::hash_word(f, x);
  return f;
}

/// Assigns rows of `table` to buckets of `config`, with draws keyed by `key` and `epoch` (the
/// run derives the key from its seed and the source's name): every row when `rows` is empty
/// (out.size() == table.size()), else out[i] = row rows[i]'s bucket (out.size() == rows.size()),
/// the same bucket the whole table gives that row.
using run_assign_fn = std::function<void(
    std::span<bucket_id> out, std::span<const std::uint32_t> rows, const bucket_config& config,
    const meta_table& table, std::uint64_t key, std::uint64_t epoch, unsigned threads)>;

/// A `run_assign_fn` for a rule of the library or a user's (`bucket_rule<Rule, fast_source>`):
/// `assign_into(out, config, table, rule, fast_source(key, epoch), threads)`, or
/// `assign_rows_into` over `rows`.
template <class Rule>
  requires bucket_rule<Rule, fast_source>
[[nodiscard]] run_assign_fn rule_assigner(Rule rule) {
  return [rule = std::move(rule)](std::span<bucket_id> out, std::span<const std::uint32_t> rows,
                                  const bucket_config& config, const meta_table& table,
                                  std::uint64_t key, std::uint64_t epoch, unsigned threads) {
    if (rows.empty())
      assign_into(out, config, table, rule, fast_source(key, epoch), threads);
    else
      assign_rows_into(out, rows, config, table, rule, fast_source(key, epoch), threads);
  };
}

/// One metadata source of a run.
struct run_source {
  std::string name;                         ///< unique; keys its draws; in the state line
  std::shared_ptr<const meta_table> table;  ///< its rows
  /// Its own assignment config (probabilities), with the same buckets as every stage's config
  /// (batch sizes always come from the stage); nullopt: the stage's config.
  std::optional<bucket_config> config;
  run_assign_fn assign = rule_assigner(opensora_v2_rule{});  ///< its rule
  std::string rule_name = "opensora_v2";  ///< names `assign` in the settings hash
};

/// How many samples an epoch draws from a source.
enum class draw_kind : std::uint8_t {
  repeat,  ///< value × its rows (rounded to the nearest integer)
  weight,  ///< a share of the epoch's samples: value / Σ weights of what counts leave
  count,   ///< exactly value samples
};

/// The most samples an epoch draws (its positions are 32-bit): `draw_spec::epoch_samples` and
/// every source's draws together are at most this.
inline constexpr std::uint64_t max_epoch_samples = (std::uint64_t{1} << 32) - 1;
/// The largest value of a draw (a weight, a count or a repeat factor).
inline constexpr double max_draw_value = 1e15;

struct source_draw {
  draw_kind kind = draw_kind::repeat;
  double value = 1.0;
  friend bool operator==(const source_draw&, const source_draw&) = default;

  /// Why this is not a draw — a value that is not a finite number from 0 to `max_draw_value`,
  /// or a count that is not an integer — or empty: the one check of a draw, for every reader.
  [[nodiscard]] std::string problem() const {
    if (!std::isfinite(value) || value < 0.0 || value > max_draw_value)
      return "draw value " + detail::exact_text(value) + " must be a finite number from 0 to " +
             detail::exact_text(max_draw_value);
    if (kind == draw_kind::count && value != std::floor(value))
      return "a count must be an integer, got " + detail::exact_text(value);
    return {};
  }
};

/// How an epoch draws from the sources.
struct draw_spec {
  /// One per source, in the run's source order; empty: each source once (repeat 1).
  std::vector<source_draw> draws;
  /// N, what weights share (after counts and repeats); 0: Σ rows of all sources.
  std::uint64_t epoch_samples = 0;
  bool replacement = false;

  friend bool operator==(const draw_spec&, const draw_spec&) = default;

  /// "x1/w0.7/n1000;N=0;R=0" (x: repeat, w: weight, n: count; N: epoch_samples; R:
  /// replacement), no spaces.
  [[nodiscard]] std::string to_string() const {
    std::string s;
    for (std::size_t i = 0; i < draws.size(); ++i) {
      if (i) s += '/';
      s += draws[i].kind == draw_kind::repeat   ? 'x'
           : draws[i].kind == draw_kind::weight ? 'w'
                                                : 'n';
      s += detail::exact_text(draws[i].value);
    }
    if (draws.empty()) s += '-';
    return s + ";N=" + std::to_string(epoch_samples) + ";R=" + (replacement ? "1" : "0");
  }
  /// Parses `to_string()`'s form; throws `vbucket::error` naming the text.
  static draw_spec parse(std::string_view text) {
    auto fail = [&]() -> draw_spec {
      throw error("draw spec \"" + std::string(text) + "\" is not of the form x1/w0.7/n10;N=0;R=0");
    };
    const std::size_t a = text.find(";N="), b = text.find(";R=");
    if (a == std::string_view::npos || b == std::string_view::npos || b < a) return fail();
    draw_spec d;
    const std::string_view list = text.substr(0, a);
    if (list != "-") {
      for (const std::string_view item : detail::split_text(list, '/')) {
        if (item.size() < 2) return fail();
        source_draw sd;
        if (item[0] == 'x') {
          sd.kind = draw_kind::repeat;
        } else if (item[0] == 'w') {
          sd.kind = draw_kind::weight;
        } else if (item[0] == 'n') {
          sd.kind = draw_kind::count;
        } else {
          return fail();
        }
        const auto r = std::from_chars(item.data() + 1, item.data() + item.size(), sd.value);
        if (r.ec != std::errc{} || r.ptr != item.data() + item.size()) return fail();
        d.draws.push_back(sd);
      }
    }
    const std::string_view n = text.substr(a + 3, b - a - 3), r = text.substr(b + 3);
    const auto rn = std::from_chars(n.data(), n.data() + n.size(), d.epoch_samples);
    if (rn.ec != std::errc{} || rn.ptr != n.data() + n.size() || (r != "0" && r != "1"))
      return fail();
    d.replacement = r == "1";
    return d;
  }
};

/// How many samples each source gives an epoch under `spec` (sizes: rows per source). Throws
/// `vbucket::error` naming the source for a negative, non-finite or impossible value.
[[nodiscard]] inline std::vector<std::uint64_t> draw_counts(std::span<const std::uint64_t> sizes,
                                                            std::span<const std::string> names,
                                                            const draw_spec& spec) {
  const std::size_t k = sizes.size();
  if (!spec.draws.empty() && spec.draws.size() != k)
    throw error("draws: " + std::to_string(spec.draws.size()) + " given for " + std::to_string(k) +
                " sources");
  std::vector<std::uint64_t> m(k, 0);
  std::uint64_t total_rows = 0, fixed = 0;
  double weights = 0.0;
  for (std::size_t s = 0; s < k; ++s) total_rows += sizes[s];
  if (spec.epoch_samples > max_epoch_samples)
    throw error("draws: epoch_samples " + std::to_string(spec.epoch_samples) +
                " is above 4294967295 (an epoch holds fewer than 2^32 samples)");
  for (std::size_t s = 0; s < k; ++s) {
    const source_draw d = spec.draws.empty() ? source_draw{} : spec.draws[s];
    if (const std::string why = d.problem(); !why.empty())
      throw error("source \"" + names[s] + "\": " + why);
    if (d.kind == draw_kind::weight) {
      weights += d.value;
      continue;
    }
    const double want =
        d.kind == draw_kind::count ? d.value : std::round(d.value * static_cast<double>(sizes[s]));
    if (want > static_cast<double>(max_epoch_samples))
      throw error("source \"" + names[s] + "\": its draw takes " + detail::exact_text(want) +
                  " samples, more than an epoch holds (4294967295)");
    m[s] = static_cast<std::uint64_t>(want);
    fixed += m[s];
  }
  if (weights > 0.0) {
    const std::uint64_t n = spec.epoch_samples == 0 ? total_rows : spec.epoch_samples;
    if (fixed > n)
      throw error("draws: counts and repeats take " + std::to_string(fixed) +
                  " samples, more than the epoch's " + std::to_string(n));
    const std::uint64_t share = n - fixed;
    std::uint64_t given = 0;
    std::vector<std::pair<double, std::size_t>> rest;
    for (std::size_t s = 0; s < k; ++s) {
      if (spec.draws[s].kind != draw_kind::weight) continue;
      const double q = spec.draws[s].value / weights * static_cast<double>(share);
      m[s] = static_cast<std::uint64_t>(std::floor(q));
      given += m[s];
      rest.push_back({q - std::floor(q), s});
    }
    std::stable_sort(rest.begin(), rest.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (std::size_t i = 0; given < share && i < rest.size(); ++i, ++given) ++m[rest[i].second];
  }
  for (std::size_t s = 0; s < k; ++s)
    if (m[s] > 0 && sizes[s] == 0)
      throw error("source \"" + names[s] + "\" has no rows but its draw asks for " +
                  std::to_string(m[s]) + " samples");
  return m;
}

/// An epoch's drawn list: every source's draws, source after source (`offsets[s]` ..
/// `offsets[s + 1]`). Position p of the list is one draw (the unit the run delivers exactly
/// once). A source's draws are `passes[s]` whole passes over its rows (row = position mod rows,
/// not stored), then the rows of `listed[s]` (a subset, or every draw with replacement).
struct drawn_epoch {
  std::vector<std::uint64_t> offsets;              ///< k + 1
  std::vector<std::uint64_t> rows_of;              ///< per source: its table's rows
  std::vector<std::uint64_t> passes;               ///< per source: whole passes over its rows
  std::vector<std::vector<std::uint32_t>> listed;  ///< per source: the rows after the passes

  [[nodiscard]] std::size_t size() const noexcept {
    return offsets.empty() ? 0 : static_cast<std::size_t>(offsets.back());
  }
  [[nodiscard]] std::uint32_t source_of(std::uint64_t p) const noexcept {
    const auto it = std::upper_bound(offsets.begin(), offsets.end(), p);
    return static_cast<std::uint32_t>(it - offsets.begin() - 1);
  }
  [[nodiscard]] std::uint64_t count(std::size_t s) const noexcept {
    return offsets[s + 1] - offsets[s];
  }
  /// The row of draw p.
  [[nodiscard]] std::uint32_t row(std::uint64_t p) const noexcept {
    const std::uint32_t s = source_of(p);
    return row_in(s, p - offsets[s]);
  }
  /// The row of source s's draw `local` (its position from offsets[s]).
  [[nodiscard]] std::uint32_t row_in(std::size_t s, std::uint64_t local) const noexcept {
    const std::uint64_t n = rows_of[s], whole = passes[s] * n;
    return static_cast<std::uint32_t>(local >= whole ? listed[s][local - whole]
                                      : local < n    ? local
                                                     : local % n);
  }
  /// Whether source s is drawn once, every row (its draws are its rows in order).
  [[nodiscard]] bool full(std::size_t s) const noexcept {
    return passes[s] == 1 && listed[s].empty();
  }
};

/// Draws epoch `epoch` of a run seeded `seed` (see the header comment). Throws
/// `vbucket::error` when the epoch would hold 2^32 samples or more.
[[nodiscard]] inline drawn_epoch draw_epoch(std::span<const run_source> sources,
                                            const draw_spec& spec, std::uint64_t seed,
                                            std::uint64_t epoch) {
  const std::size_t k = sources.size();
  std::vector<std::uint64_t> sizes(k);
  std::vector<std::string> names(k);
  for (std::size_t s = 0; s < k; ++s) {
    sizes[s] = sources[s].table->size();
    names[s] = sources[s].name;
  }
  const std::vector<std::uint64_t> m = draw_counts(sizes, names, spec);
  drawn_epoch d;
  d.offsets.assign(k + 1, 0);
  for (std::size_t s = 0; s < k; ++s) d.offsets[s + 1] = d.offsets[s] + m[s];
  if (d.offsets[k] >= (std::uint64_t{1} << 32))
    throw error("run: an epoch of " + std::to_string(d.offsets[k]) + " samples (at most 2^32 - 1)");
  d.rows_of = sizes;
  d.passes.assign(k, 0);
  d.listed.resize(k);
  const std::uint64_t epoch_key = detail::plan_key(seed, epoch);
  for (std::size_t s = 0; s < k; ++s) {
    const std::uint64_t n = sizes[s];
    const std::uint64_t key =
        detail::stream_key(epoch_key, detail::run_domain_draw, detail::hash_bytes(names[s]));
    std::vector<std::uint32_t>& out = d.listed[s];
    if (spec.replacement) {
      out.resize(static_cast<std::size_t>(m[s]));
      for (std::uint64_t i = 0; i < m[s]; ++i)
        out[i] = static_cast<std::uint32_t>(detail::keyed_below(key, i, n));
      continue;
    }
    const std::uint64_t r = n == 0 ? 0 : m[s] % n;
    d.passes[s] = n == 0 ? 0 : m[s] / n;
    out.resize(static_cast<std::size_t>(r));
    std::uint64_t chosen = 0;
    // Selection sampling: row i is taken with probability (r − chosen) / (n − i); branch-free
    // (a taken row's slot is written before the count moves past it).
    for (std::uint64_t i = 0; i < n && chosen < r; ++i) {
      out[chosen] = static_cast<std::uint32_t>(i);
      chosen += detail::keyed_below(key, i, n - i) < r - chosen ? 1U : 0U;
    }
  }
  return d;
}

}  // namespace vbucket
