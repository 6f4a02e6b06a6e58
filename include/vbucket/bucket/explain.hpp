#pragma once
/// Why one sample got its bucket, a smaller one, or none: the rule's own walk (`assign_traced`,
/// the code that assigns every sample, not a copy of it) recorded for one sample and put into
/// words. What `python -m vbucket explain` prints.
///
///     const auto e = vbucket::explain_sample(cfg, table, vbucket::opensora_v2_rule{}, 17,
///                                            vbucket::rng_mode::numpy, seed, epoch);
///     std::puts(vbucket::describe(e, cfg).c_str());

#include <cmath>        // std::isnan
#include <cstdint>      // std::uint64_t, std::int64_t
#include <cstdio>       // std::snprintf
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include "bucket_config.hpp"
#include "compiled_rule.hpp"
#include "meta.hpp"
#include "rules.hpp"
#include "seeding.hpp"
#include "vbucket/base/error.hpp"

namespace vbucket {

/// One sample's assignment with the rule's decisions in order.
struct rule_explanation {
  std::uint64_t index = 0;
  sample_meta meta{};
  bucket_id bucket = no_bucket;    ///< as `assign` gives it
  std::vector<rule_event> events;  ///< the walk, in order
};

/// The walk of `rule` over sample `index` with the draws of `source`: the same bucket as
/// `rule.assign(config, meta, index, source)`, with every decision recorded.
template <class Rule, random_source Source>
rule_explanation explain_assignment(const bucket_config& config, const sample_meta& meta,
                                    std::uint64_t index, const Rule& rule, const Source& source) {
  rule_trace trace;
  rule_explanation out;
  out.index = index;
  out.meta = meta;
  out.bucket = rule.assign_traced(config, meta, index, source, trace);
  out.events = std::move(trace.events);
  return out;
}

/// Row `index` of `table` under the seed convention of `assign_epoch` (`vbucket assign`, plan,
/// stats): numpy draws with Open-Sora's seed + epoch, or fast_source(seed, epoch). Throws
/// `vbucket::error` when the index is not a row of the table or the seed does not suit `mode`.
template <class Rule>
rule_explanation explain_sample(const bucket_config& config, const meta_table& table,
                                const Rule& rule, std::uint64_t index, rng_mode mode,
                                const big_seed& seed, std::uint64_t epoch) {
  if (index >= table.size())
    throw error("explain: sample " + std::to_string(index) + " is not a row of the metadata (" +
                std::to_string(table.size()) + " rows: 0 to " +
                std::to_string(table.size() == 0 ? 0 : table.size() - 1) + ")");
  const sample_meta m = table[static_cast<std::size_t>(index)];
  if (mode == rng_mode::numpy)
    return explain_assignment(config, m, index, rule,
                              numpy_epoch_source(seed, epoch, config.num_buckets()));
  return explain_assignment(config, m, index, rule, fast_epoch_source(seed, epoch));
}

/// The step's name: "invalid", "frames", "too_small", "no_image_key", "too_long",
/// "fewer_frames", "keep", "fast_draw", "fast_outcome", "chosen" or "none".
constexpr std::string_view step_name(rule_event::step s) noexcept {
  using ev = rule_event::step;
  switch (s) {
    case ev::invalid:
      return "invalid";
    case ev::frames:
      return "frames";
    case ev::too_small:
      return "too_small";
    case ev::no_image_key:
      return "no_image_key";
    case ev::too_long:
      return "too_long";
    case ev::fewer_frames:
      return "fewer_frames";
    case ev::keep:
      return "keep";
    case ev::fast_draw:
      return "fast_draw";
    case ev::fast_outcome:
      return "fast_outcome";
    case ev::chosen:
      return "chosen";
    case ev::none:
      return "none";
  }
  return "?";
}

/// The explanation in words, one decision per line.
VBUCKET_COMPILED_INLINE std::string describe(const rule_explanation& x, const bucket_config& c);

#if VBUCKET_HEADER_DEFINITIONS
namespace detail {
inline std::string explain_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}
inline std::string explain_key(const bucket_config& c, const rule_event& e) {
  const auto& r = c.resolutions()[static_cast<std::size_t>(e.resolution)];
  if (e.frames_index < 0) return r.info.name;
  return r.info.name + " frames " +
         std::to_string(r.frames[static_cast<std::size_t>(e.frames_index)].frames);
}
inline std::string explain_test(const rule_event& e, const char* name) {
  if (std::isnan(e.draw))
    return std::string(name) + " " + explain_number(e.probability) + ", decided without a draw";
  return "draw " + explain_number(e.draw) + " against " + name + " " +
         explain_number(e.probability);
}
}  // namespace detail

VBUCKET_COMPILED_INLINE std::string describe(const rule_explanation& x, const bucket_config& c) {
  using ev = rule_event::step;
  const sample_meta& m = x.meta;
  std::string out =
      "sample " + std::to_string(x.index) + ": " + std::to_string(m.num_frames) + " frames, " +
      std::to_string(m.height) + "x" + std::to_string(m.width) + ", fps " +
      (std::isnan(m.fps) ? std::string("unknown") : detail::explain_number(m.fps)) + "\n";
  for (const rule_event& e : x.events) {
    std::string line;
    switch (e.what) {
      case ev::invalid:
        line =
            "invalid metadata (fewer than one frame, or a side outside [1, 2^24]): never "
            "bucketed";
        break;
      case ev::frames:
        line = "the rule works with " + detail::explain_number(e.value) +
               " frames (frame interval " + detail::explain_number(e.probability) + ")";
        break;
      case ev::too_small: {
        const auto& r = c.resolutions()[static_cast<std::size_t>(e.resolution)];
        line = r.info.name + ": skipped, " + std::to_string(m.height * m.width) +
               " pixels is below 0.8 x its " + std::to_string(r.info.pixels) + " pixels";
        break;
      }
      case ev::no_image_key:
        line = detail::explain_key(c, e) + ": skipped, no frames key 1 for an image";
        break;
      case ev::too_long:
        line = detail::explain_key(c, e) + ": skipped, more frames than the clip has";
        break;
      case ev::fewer_frames:
        line = detail::explain_key(c, e) + ": " + detail::explain_test(e, "p_frames") +
               (e.passed ? ": moves on to fewer frames" : ": stays at this frames key");
        break;
      case ev::keep:
        line = detail::explain_key(c, e) + ": " + detail::explain_test(e, "p_resolution") +
               (e.passed ? ": taken" : ": not taken, downgraded (leaves this resolution)");
        break;
      case ev::fast_draw:
        line = "fast draws: one uniform " + detail::explain_number(e.draw) +
               " picks the first outcome whose cumulative probability exceeds it";
        break;
      case ev::fast_outcome:
        line = "  " + detail::explain_key(c, e) + ": probability " +
               detail::explain_number(e.probability) + ", cumulative " +
               detail::explain_number(e.value) + (e.passed ? ": taken" : ": passed over");
        break;
      case ev::chosen: {
        const auto& ratio = c.ratio_of(e.bucket);
        line = "bucket " + std::to_string(e.bucket) + ": " + detail::explain_key(c, e) +
               ", ratio " + ratio.key + ", target " + std::to_string(c.frames_of(e.bucket).frames) +
               "x" + std::to_string(ratio.height) + "x" + std::to_string(ratio.width);
        if (!c.enabled(e.bucket)) line += " (disabled in the config: its samples are dropped)";
        break;
      }
      case ev::none:
        line = "no bucket: the sample is not used this epoch";
        break;
    }
    out += line + "\n";
  }
  return out;
}
#endif  // VBUCKET_HEADER_DEFINITIONS

}  // namespace vbucket
