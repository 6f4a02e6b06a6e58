#pragma once
/// Whole-table assignment: every sample of a `meta_table` (or any range of `video_meta`)
/// through a bucket rule, in parallel. The result is independent of the thread count,
/// because each sample's draws depend only on its index. `opensora_v2_rule` with `fast_source`
/// runs through `compiled_v2_rule` on large tables (the same buckets, faster).

#include <algorithm>    // std::min
#include <concepts>     // std::same_as
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t
#include <limits>       // std::numeric_limits
#include <span>         // std::span
#include <type_traits>  // std::remove_cvref_t
#include <utility>      // std::declval
#include <vector>       // std::vector

#include "bucket_config.hpp"
#include "compiled_rule.hpp"
#include "meta.hpp"
#include "rules.hpp"
#include "vbucket/base/random.hpp"
#include "vbucket/detail/compiled.hpp"
#include "vbucket/detail/parallel_tasks.hpp"

namespace vbucket {

namespace detail {
/// Runs fn(begin, end) over [0, n) in `threads` contiguous chunks (0: one per core), on the
/// library's task pool (`parallel_tasks`).
template <class Fn>
void parallel_chunks(std::size_t n, unsigned threads, Fn fn) {
  constexpr std::size_t min_chunk = 1u << 14;  // below this a thread costs more than it saves
  const std::size_t chunks = task_workers((n + min_chunk - 1) / min_chunk, threads);
  if (chunks <= 1) {
    fn(std::size_t{0}, n);
    return;
  }
  const std::size_t step = (n + chunks - 1) / chunks;
  parallel_tasks(chunks, static_cast<unsigned>(chunks),
                 [&](std::size_t c) { fn(std::min(n, c * step), std::min(n, (c + 1) * step)); });
}

/// Whole tables of at least this many samples assigned by Open-Sora 2.0's rule with the fast
/// draws go through `compiled_v2_rule`, whose tables cost a few microseconds to build and
/// which gives exactly the same buckets.
inline constexpr std::size_t compile_v2_from = std::size_t{1} << 12;
template <class Rule, class Source>
inline constexpr bool compiles_v2 = std::same_as<Rule, opensora_v2_rule>&& fast_draws<Source>;
/// Whether `compiled_v2_rule` can be built for the rule (it validates it; the rule alone
/// accepts an invalid fps_max without throwing).
inline bool compilable(const opensora_v2_rule& rule) noexcept {
  return rule.fps_max > 0.0 && rule.fps_max < std::numeric_limits<double>::infinity();
}

/// The records of a user's range that `assign_range` converts at a time.
inline constexpr std::size_t meta_block = 256;

/// NumPy's streams (sample, 0) of a block of samples seeded ahead, the others from `inner`:
/// the same streams as `inner` gives, so a rule draws the same from it.
struct seeded_numpy_source {
  const numpy_source* inner;
  const numpy_rng::pcg64_state* states;  // of the samples first, first + 1, ...
  std::uint64_t first;
  std::size_t count;
  [[nodiscard]] numpy_rng stream(std::uint64_t sample, std::uint64_t sub) const noexcept {
    const std::uint64_t j = sample - first;
    return sub == 0 && j < count ? numpy_rng(states[j]) : inner->stream(sample, sub);
  }
};
template <>
inline constexpr bool independent_streams<seeded_numpy_source> = true;

/// Rules whose every sample draws from its stream (sample, 0) with NumPy's draws: their
/// streams are seeded a block at a time (`numpy_source::seed_streams`, vectorised).
template <class Rule, class Source>
inline constexpr bool seeds_numpy_blocks =
    std::same_as<Rule, opensora_v2_rule>&& std::same_as<Source, numpy_source>;

/// out[j] = rule.assign(config, metas[j], first + j, source) for every j.
template <class Rule, random_source Source>
void assign_metas(std::span<bucket_id> out, const bucket_config& config,
                  std::span<const sample_meta> metas, std::uint64_t first, const Rule& rule,
                  const Source& source) {
  if constexpr (seeds_numpy_blocks<Rule, Source>) {
    constexpr std::size_t block = 256;
    numpy_rng::pcg64_state states[block];
    for (std::size_t s = 0; s < metas.size(); s += block) {
      const std::size_t k = std::min(block, metas.size() - s);
      source.seed_streams(first + s, 0, std::span<numpy_rng::pcg64_state>(states, k));
      const seeded_numpy_source seeded{&source, states, first + s, k};
      for (std::size_t j = s; j < s + k; ++j)
        out[j] = rule.assign(config, metas[j], first + j, seeded);
    }
  } else {
    for (std::size_t j = 0; j < metas.size(); ++j)
      out[j] = rule.assign(config, metas[j], first + j, source);
  }
}
}  // namespace detail

/// Writes the bucket of sample i of `table` to out[i] (`no_bucket` or `invalid_sample` when
/// there is none). Precondition: out.size() == table.size(). `threads` = 0 uses every core.
/// A rule with a member `assign_rows(config, table, begin, end, out, source)` (as
/// `compiled_v2_rule` has) does each thread's rows through it; it must write exactly what
/// `assign` gives for each row.
template <class Rule, random_source Source>
  requires bucket_rule<Rule, Source>
void assign_into(std::span<bucket_id> out, const bucket_config& config, const meta_table& table,
                 const Rule& rule, const Source& source, unsigned threads = 0) {
  if constexpr (detail::compiles_v2<Rule, Source>) {
    if (table.size() >= detail::compile_v2_from && detail::compilable(rule)) {
      assign_into(out, config, table, compiled_v2_rule(config, rule), source, threads);
      return;
    }
  }
  detail::parallel_chunks(table.size(), threads, [&](std::size_t b, std::size_t e) {
    if constexpr (requires { rule.assign_rows(config, table, b, e, out, source); }) {
      rule.assign_rows(config, table, b, e, out, source);  // the rule's own whole-table path
      return;
    } else if constexpr (detail::seeds_numpy_blocks<Rule, Source>) {
      sample_meta block[detail::meta_block];  // the streams seeded a block at a time
      for (std::size_t s = b; s < e; s += detail::meta_block) {
        const std::size_t k = std::min(detail::meta_block, e - s);
        for (std::size_t j = 0; j < k; ++j) block[j] = table[s + j];
        detail::assign_metas(out.subspan(s, k), config, std::span<const sample_meta>(block, k), s,
                             rule, source);
      }
      return;
    }
    for (std::size_t i = b; i < e; ++i)
      out[i] = rule.assign(config, table[i], static_cast<std::uint64_t>(i), source);
  });
}

/// The buckets of the rows `rows` of `table`: out[i] = the bucket `assign_into` gives row
/// rows[i] (its own draws), in parallel. The run plan uses it to assign again only the draws
/// it has not delivered. Preconditions: out.size() == rows.size(); every row < table.size().
template <class Rule, random_source Source>
  requires bucket_rule<Rule, Source>
void assign_rows_into(std::span<bucket_id> out, std::span<const std::uint32_t> rows,
                      const bucket_config& config, const meta_table& table, const Rule& rule,
                      const Source& source, unsigned threads = 0) {
  if constexpr (detail::compiles_v2<Rule, Source>) {
    if (rows.size() >= detail::compile_v2_from && detail::compilable(rule)) {
      assign_rows_into(out, rows, config, table, compiled_v2_rule(config, rule), source, threads);
      return;
    }
  }
  detail::parallel_chunks(rows.size(), threads, [&](std::size_t b, std::size_t e) {
    if constexpr (requires { rule.assign_rows(config, table, rows, b, e, out, source); }) {
      rule.assign_rows(config, table, rows, b, e, out, source);
    } else {
      for (std::size_t i = b; i < e; ++i)
        out[i] = rule.assign(config, table[rows[i]], rows[i], source);
    }
  });
}

/// The bucket of every sample of `table`, in row order.
template <class Rule, random_source Source>
  requires bucket_rule<Rule, Source> std::vector<bucket_id> assign_all(const bucket_config& config,
                                                                       const meta_table& table,
                                                                       const Rule& rule,
                                                                       const Source& source,
                                                                       unsigned threads = 0) {
    std::vector<bucket_id> out(table.size());
    assign_into(std::span<bucket_id>(out), config, table, rule, source, threads);
    return out;
  }

/// The bucket of every element of a random-access range of a user's own `video_meta` type;
/// element i is sample index i.
template <class Rule, random_source Source, class Range>
  requires bucket_rule<Rule, Source> &&
      video_meta<std::remove_cvref_t<decltype(*std::declval<const Range&>().begin())>>
          std::vector<bucket_id> assign_range(const bucket_config& config, const Range& samples,
                                              const Rule& rule, const Source& source,
                                              unsigned threads = 0) {
    const auto first = samples.begin();
    const auto n = static_cast<std::size_t>(samples.end() - first);
    if constexpr (detail::compiles_v2<Rule, Source>) {
      if (n >= detail::compile_v2_from && detail::compilable(rule))
        return assign_range(config, samples, compiled_v2_rule(config, rule), source, threads);
    }
    std::vector<bucket_id> out(n);
    if constexpr (std::same_as<Rule, compiled_v2_rule> && detail::fast_draws<Source>) {
      // The records a block at a time into a small table, and the table through the rule's
      // whole-table path (vectorised), each row's draws those of its index in the range.
      detail::parallel_chunks(n, threads, [&](std::size_t b, std::size_t e) {
        sample_meta block[detail::meta_block];
        std::size_t large[detail::meta_block];  // rows a table cannot hold: assigned alone
        meta_table rows;
        rows.reserve(detail::meta_block);
        for (std::size_t s = b; s < e; s += detail::meta_block) {
          const std::size_t k = std::min(detail::meta_block, e - s);
          std::size_t num_large = 0;
          for (std::size_t j = 0; j < k; ++j) {
            block[j] = to_sample_meta(first[static_cast<std::ptrdiff_t>(s + j)]);
            const sample_meta& m = block[j];
            const bool fits = (m.num_frames <= meta_table::max_size) &
                              (m.height <= meta_table::max_size) &
                              (m.width <= meta_table::max_size);
            large[num_large] = j;
            num_large += static_cast<std::size_t>(!fits);
          }
          for (std::size_t q = 0; q < num_large; ++q) block[large[q]] = sample_meta{};
          rows.clear();
          rows.append(std::span<const sample_meta>(block, k));
          const std::span<bucket_id> part = std::span<bucket_id>(out).subspan(s, k);
          if constexpr (std::same_as<Source, fast_source>) {
            rule.assign_rows(config, rows, 0, k, part, shifted_source<fast_source>{source, s});
          } else {
            rule.assign_rows(config, rows, 0, k, part,
                             shifted_source<fast_source>{source.inner, source.first + s});
          }
          for (std::size_t q = 0; q < num_large; ++q) {
            const std::size_t j = large[q];
            part[j] = rule.assign(config, to_sample_meta(first[static_cast<std::ptrdiff_t>(s + j)]),
                                  s + j, source);
          }
        }
      });
      return out;
    }
    detail::parallel_chunks(n, threads, [&](std::size_t b, std::size_t e) {
      // The records' sizes a block at a time, then the rule over the block (for the built-in
      // rules and sources, compiled once in vbucket::compiled).
      sample_meta block[detail::meta_block];
      for (std::size_t s = b; s < e; s += detail::meta_block) {
        const std::size_t k = std::min(detail::meta_block, e - s);
        for (std::size_t j = 0; j < k; ++j)
          block[j] = to_sample_meta(first[static_cast<std::ptrdiff_t>(s + j)]);
        detail::assign_metas(std::span<bucket_id>(out).subspan(s, k), config,
                             std::span<const sample_meta>(block, k), s, rule, source);
      }
    });
    return out;
  }

}  // namespace vbucket

#if VBUCKET_EXTERN_TEMPLATES
namespace vbucket {
// The built-in rules over the built-in sources on a meta_table: compiled once in the
// vbucket::compiled library (src/vbucket.cpp).
extern template void assign_into<opensora_v2_rule, fast_source>(std::span<bucket_id>,
                                                                const bucket_config&,
                                                                const meta_table&,
                                                                const opensora_v2_rule&,
                                                                const fast_source&, unsigned);
extern template std::vector<bucket_id> assign_all<opensora_v2_rule, fast_source>(
    const bucket_config&, const meta_table&, const opensora_v2_rule&, const fast_source&, unsigned);
extern template void assign_into<opensora_v2_rule, numpy_source>(std::span<bucket_id>,
                                                                 const bucket_config&,
                                                                 const meta_table&,
                                                                 const opensora_v2_rule&,
                                                                 const numpy_source&, unsigned);
extern template std::vector<bucket_id> assign_all<opensora_v2_rule, numpy_source>(
    const bucket_config&, const meta_table&, const opensora_v2_rule&, const numpy_source&,
    unsigned);
extern template void assign_into<opensora_v12_rule, fast_source>(std::span<bucket_id>,
                                                                 const bucket_config&,
                                                                 const meta_table&,
                                                                 const opensora_v12_rule&,
                                                                 const fast_source&, unsigned);
extern template std::vector<bucket_id> assign_all<opensora_v12_rule, fast_source>(
    const bucket_config&, const meta_table&, const opensora_v12_rule&, const fast_source&,
    unsigned);
extern template void assign_into<opensora_v12_rule, numpy_source>(std::span<bucket_id>,
                                                                  const bucket_config&,
                                                                  const meta_table&,
                                                                  const opensora_v12_rule&,
                                                                  const numpy_source&, unsigned);
extern template std::vector<bucket_id> assign_all<opensora_v12_rule, numpy_source>(
    const bucket_config&, const meta_table&, const opensora_v12_rule&, const numpy_source&,
    unsigned);
extern template void assign_into<compiled_v2_rule, fast_source>(std::span<bucket_id>,
                                                                const bucket_config&,
                                                                const meta_table&,
                                                                const compiled_v2_rule&,
                                                                const fast_source&, unsigned);
extern template std::vector<bucket_id> assign_all<compiled_v2_rule, fast_source>(
    const bucket_config&, const meta_table&, const compiled_v2_rule&, const fast_source&, unsigned);
extern template void assign_rows_into<opensora_v2_rule, fast_source>(
    std::span<bucket_id>, std::span<const std::uint32_t>, const bucket_config&, const meta_table&,
    const opensora_v2_rule&, const fast_source&, unsigned);
extern template void assign_rows_into<opensora_v12_rule, fast_source>(
    std::span<bucket_id>, std::span<const std::uint32_t>, const bucket_config&, const meta_table&,
    const opensora_v12_rule&, const fast_source&, unsigned);
extern template void assign_rows_into<compiled_v2_rule, fast_source>(
    std::span<bucket_id>, std::span<const std::uint32_t>, const bucket_config&, const meta_table&,
    const compiled_v2_rule&, const fast_source&, unsigned);
// The built-in rules over the built-in sources on a user's records (assign_range).
extern template void detail::assign_metas<opensora_v2_rule, fast_source>(
    std::span<bucket_id>, const bucket_config&, std::span<const sample_meta>, std::uint64_t,
    const opensora_v2_rule&, const fast_source&);
extern template void detail::assign_metas<opensora_v2_rule, numpy_source>(
    std::span<bucket_id>, const bucket_config&, std::span<const sample_meta>, std::uint64_t,
    const opensora_v2_rule&, const numpy_source&);
extern template void detail::assign_metas<opensora_v12_rule, fast_source>(
    std::span<bucket_id>, const bucket_config&, std::span<const sample_meta>, std::uint64_t,
    const opensora_v12_rule&, const fast_source&);
extern template void detail::assign_metas<opensora_v12_rule, numpy_source>(
    std::span<bucket_id>, const bucket_config&, std::span<const sample_meta>, std::uint64_t,
    const opensora_v12_rule&, const numpy_source&);
extern template void detail::assign_metas<compiled_v2_rule, fast_source>(
    std::span<bucket_id>, const bucket_config&, std::span<const sample_meta>, std::uint64_t,
    const compiled_v2_rule&, const fast_source&);
}  // namespace vbucket
#endif
