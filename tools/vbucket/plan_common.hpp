#pragma once
/// What `vbucket plan`, `stats` and `assign` share: the flags that define an epoch plan (config,
/// metadata, rule, random source, seed, epoch, policy, world, balance, batching), the one
/// `batch_sampler` they define (the library does the rest), and the pad warning (--pad-warn).

#include <algorithm>     // std::copy
#include <array>         // std::array
#include <charconv>      // std::from_chars (--pad-warn)
#include <cstddef>       // std::size_t
#include <cstdint>       // std::uint64_t, std::uint32_t
#include <cstdio>        // std::snprintf, std::fputs (the pad warning)
#include <limits>        // std::numeric_limits
#include <memory>        // std::make_shared
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <vector>        // std::vector

#include "cli.hpp"
#include "vbucket/batch_sampler.hpp"
#include "vbucket/bucket_config.hpp"
#include "vbucket/csv.hpp"
#include "vbucket/epoch_plan.hpp"
#include "vbucket/json/bucket_config.hpp"
#include "vbucket/numpy_random.hpp"
#include "vbucket/packed_plan.hpp"
#include "vbucket/plan_stats.hpp"
#include "vbucket/random.hpp"
#include "vbucket/rules.hpp"
#include "vbucket/seeding.hpp"

namespace vbucket::cli {

/// The largest world size the CLI accepts.
inline constexpr std::uint64_t max_world = std::uint64_t{1} << 24;

/// Flag help texts shared by plan and stats.
namespace plan_help {
inline constexpr std::string_view config =
    "bucket config (JSON), as Open-Sora's dict: {\"360p\": {\"102\": [[0.15, 0.33], 4]}}";
inline constexpr std::string_view meta =
    "metadata CSV with columns num_frames,height,width,fps (any order, others ignored; "
    "fps empty, nan or 0 = unknown; sizes may be written as floats such as 51.0)";
inline constexpr std::string_view rule = "opensora-v2 (Open-Sora 2.0, default) or opensora-v1.2";
inline constexpr std::string_view rng =
    "numpy (Open-Sora's draws with seed + epoch, default) or fast (counter-based)";
static_assert(defaults::rng == rng_mode::numpy, "plan_help::rng names the default");
inline constexpr std::string_view seed =
    "the run's seed, a non-negative integer (below 2^64 with --rng fast)";
inline constexpr std::string_view epoch = "the epoch, an integer in [0, 2^64)";
inline constexpr std::string_view policy =
    "incomplete batches: pad (default), drop, or downgrade (to a smaller bucket, then pad)";
static_assert(defaults::policy == incomplete_policy::pad, "plan_help::policy names the default");
inline constexpr std::string_view drop_last =
    "drop incomplete steps instead of repeating batches (and --policy drop unless given)";
inline constexpr std::string_view balance =
    "step balance: cost-sorted chunks of G = 960 batches (--balance-group), so that each step's "
    "batches cost about the same; fully balanced when W divides G, the order never depends on W";
inline constexpr std::string_view balance_group =
    "step balance with chunks of G batches (implies --balance): use a multiple of every world "
    "size the run will use, the same when resuming (the resume state records it)";
inline constexpr std::string_view pad_warn =
    "warn on stderr when pads are more than this fraction of the batch slots, naming the worst "
    "buckets (0.25; 1 = never)";
inline constexpr std::string_view fps_max =
    "opensora-v2: frames are thinned to at most F per second (16)";
inline constexpr std::string_view frame_interval = "opensora-v1.2: the frame interval (1)";
inline constexpr std::string_view threads = "worker threads; 0 = one per core (0)";
inline constexpr std::string_view batching =
    "fixed (default: one bucket and its batch size per batch) or packed (samples of any shapes "
    "up to --token-budget per batch, for variable-length attention)";
inline constexpr std::string_view token_budget =
    "packed: the most latent tokens one rank's step may hold, (1 + (T-1)/4) * (H/16) * (W/16) "
    "summed over its samples (see `vbucket fit-bs` for the budget that fits a GPU)";
inline constexpr std::string_view compression =
    "the latent token formula's VAE compression T,H,W (4,8,8): a sample costs "
    "ceil((1 + (T-1)/ct) / pt) * (H/(ch*ph)) * (W/(cw*pw)) tokens (--token-budget, --balance)";
inline constexpr std::string_view patch = "the latent token formula's patch T,H,W (1,2,2)";
static_assert(token_formula{} == token_formula{4, 8, 8, 1, 2, 2}, "plan_help names the default");
inline constexpr std::string_view drop_oversized =
    "packed: drop (and count) samples costing more than --token-budget instead of failing";
}  // namespace plan_help

/// The flags that define the sampler beyond config, metadata, world, seed and epoch: the same
/// for `plan` and `stats`, which place them after their own (`join_flags`).
inline constexpr flag sampler_flags[] = {
    {"policy", "POLICY", false, plan_help::policy},
    {"rule", "RULE", false, plan_help::rule},
    {"rng", "RNG", false, plan_help::rng},
    {"fps-max", "F", false, plan_help::fps_max},
    {"frame-interval", "N", false, plan_help::frame_interval},
    {"balance", "", false, plan_help::balance},
    {"balance-group", "G", false, plan_help::balance_group},
    {"threads", "N", false, plan_help::threads},
    {"pad-warn", "F", false, plan_help::pad_warn},
    {"batching", "MODE", false, plan_help::batching},
    {"token-budget", "B", false, plan_help::token_budget},
    {"drop-oversized", "", false, plan_help::drop_oversized},
    {"compression", "T,H,W", false, plan_help::compression},
    {"patch", "T,H,W", false, plan_help::patch},
};

/// Flag tables one after another, as one table (at compile time).
template <std::size_t... N>
constexpr std::array<flag, (N + ...)> join_flags(const flag (&... tables)[N]) {
  std::array<flag, (N + ...)> out{};
  std::size_t i = 0;
  ((std::copy(tables, tables + N, out.begin() + static_cast<std::ptrdiff_t>(i)), i += N), ...);
  return out;
}

enum class plan_rule { opensora_v2, opensora_v12 };

/// The flags that define a plan.
struct plan_flags {
  std::string config_path;
  std::string meta_path;
  plan_rule rule = plan_rule::opensora_v2;
  rng_mode rng = defaults::rng;
  /// Any size with --rng numpy, below 2^64 with --rng fast (check_seed).
  big_seed seed{defaults::seed};
  std::uint64_t epoch = defaults::epoch;
  double fps_max = 16.0;
  std::int64_t frame_interval = 1;
  incomplete_policy policy = defaults::policy;
  bool drop_last = false;
  std::uint32_t world = defaults::world;
  std::uint32_t balance_group = 0;
  unsigned threads = 0;
  double pad_warn = 0.25;
  batching_mode batching = batching_mode::fixed;
  double token_budget = 0.0;
  bool drop_oversized = false;
  token_formula tokens{};
};

/// Three positive integers "T,H,W" (the token formula's factors).
inline std::array<std::int64_t, 3> parse_triple_flag(std::string_view name,
                                                     const std::string& text) {
  std::array<std::int64_t, 3> out{};
  std::size_t pos = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const std::size_t end = i < 2 ? text.find(',', pos) : text.size();
    if (end == std::string::npos) break;
    const std::string part = text.substr(pos, end - pos);
    const char* const last = part.data() + part.size();
    const auto [p, ec] = std::from_chars(part.data(), last, out[i]);
    if (part.empty() || ec != std::errc{} || p != last || out[i] < 1 || out[i] > 65536)
      throw usage_error("--" + std::string(name) +
                        ": expected three integers from 1 to 65536 as T,H,W, got \"" + text + "\"");
    pos = end + 1;
    if (i == 2) return out;
  }
  throw usage_error("--" + std::string(name) + ": expected three integers from 1 to 65536 as " +
                    "T,H,W, got \"" + text + "\"");
}

/// Reads the plan-defining flags present in `a` (those a command does not declare are absent).
inline plan_flags read_plan_flags(const args& a) {
  plan_flags f;
  f.config_path = a.value("config");
  f.meta_path = a.value("meta");
  const std::string rule = a.value_or("rule", "opensora-v2");
  if (rule == "opensora-v2") {
    f.rule = plan_rule::opensora_v2;
  } else if (rule == "opensora-v1.2") {
    f.rule = plan_rule::opensora_v12;
  } else {
    throw usage_error("--rule: unknown rule \"" + rule +
                      "\" (expected opensora-v2 or opensora-v1.2)");
  }
  f.rng = parse_rng_flag("rng", a.value_or("rng", std::string(to_string(defaults::rng))));
  constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();
  if (a.has("seed")) f.seed = parse_seed_flag("seed", a.value("seed"), f.rng);
  if (a.has("epoch")) f.epoch = parse_uint_flag("epoch", a.value("epoch"), 0, u64_max);
  if (a.has("fps-max")) {
    if (f.rule != plan_rule::opensora_v2)
      throw usage_error("--fps-max applies to --rule opensora-v2 only");
    f.fps_max = parse_positive_flag("fps-max", a.value("fps-max"));
  }
  if (a.has("frame-interval")) {
    if (f.rule != plan_rule::opensora_v12)
      throw usage_error("--frame-interval applies to --rule opensora-v1.2 only");
    f.frame_interval = static_cast<std::int64_t>(
        parse_uint_flag("frame-interval", a.value("frame-interval"), 1, std::uint64_t{1} << 31));
  }
  f.drop_last = a.has("drop-last");
  if (a.has("policy")) {
    const auto p = parse_policy(a.value("policy"));
    if (!p)
      throw usage_error("--policy: unknown policy \"" + a.value("policy") +
                        "\" (expected pad, drop or downgrade)");
    f.policy = *p;
  } else if (f.drop_last) {
    f.policy = incomplete_policy::drop;
  }
  if (a.has("world"))
    f.world = static_cast<std::uint32_t>(parse_uint_flag("world", a.value("world"), 1, max_world));
  if (a.has("balance-group")) {
    f.balance_group = static_cast<std::uint32_t>(
        parse_uint_flag("balance-group", a.value("balance-group"), 1, max_world));
  } else if (a.has("balance")) {
    f.balance_group = default_balance_group;  // never the world size: see plan_options
  }
  if (a.has("pad-warn")) {
    const std::string& text = a.value("pad-warn");
    double v = -1.0;
    const char* const end = text.data() + text.size();
    const auto [p, ec] = std::from_chars(text.data(), end, v);
    if (text.empty() || ec != std::errc{} || p != end || !(v >= 0.0 && v <= 1.0))
      throw usage_error("--pad-warn: expected a fraction from 0 to 1, got \"" + text + "\"");
    f.pad_warn = v;
  }
  if (a.has("threads"))
    f.threads = static_cast<unsigned>(parse_uint_flag("threads", a.value("threads"), 0, 4096));
  if (a.has("batching")) {
    const auto m = parse_batching(a.value("batching"));
    if (!m)
      throw usage_error("--batching: unknown batching \"" + a.value("batching") +
                        "\" (expected fixed or packed)");
    f.batching = *m;
  }
  if (f.batching == batching_mode::packed) {
    if (!a.has("token-budget"))
      throw usage_error("--batching packed needs --token-budget B (latent tokens per batch)");
    f.token_budget = parse_positive_flag("token-budget", a.value("token-budget"));
    f.drop_oversized = a.has("drop-oversized");
    if (a.has("policy"))
      throw usage_error(
          "--policy applies to --batching fixed only (packed batches are never "
          "padded: a batch holds whole samples up to the budget)");
    if (a.has("pad-warn")) throw usage_error("--pad-warn applies to --batching fixed only");
  } else {
    for (const char* name : {"token-budget", "drop-oversized"})
      if (a.has(name))
        throw usage_error("--" + std::string(name) + " applies to --batching packed only");
  }
  if (a.has("compression")) {
    const auto c = parse_triple_flag("compression", a.value("compression"));
    f.tokens.compression_t = c[0];
    f.tokens.compression_h = c[1];
    f.tokens.compression_w = c[2];
  }
  if (a.has("patch")) {
    const auto c = parse_triple_flag("patch", a.value("patch"));
    f.tokens.patch_t = c[0];
    f.tokens.patch_h = c[1];
    f.tokens.patch_w = c[2];
  }
  return f;
}

/// The sampler options the flags define, for `rank`.
inline sampler_options sampler_options_of(const plan_flags& f, std::uint32_t rank) {
  sampler_options o;
  o.seed = plan_seed(f.seed);
  o.world = f.world;
  o.rank = rank;
  o.rng = f.rng;
  o.policy = f.policy;  // --drop-last without --policy already chose drop (read_plan_flags)
  o.drop_last = f.drop_last;
  o.balance_group = f.balance_group;
  o.threads = f.threads;
  o.batching = f.batching;
  o.token_budget = f.token_budget;
  o.drop_oversized = f.drop_oversized;
  o.tokens = f.tokens;
  return o;
}

/// Loads the config the flags name, makes the one `batch_sampler` they define over the metadata
/// CSV streamed (for `rank`, at epoch --epoch) and returns `body(sampler)`. `body` is called with
/// one of four sampler types (two rules; built-in sources, or `numpy_seed_family`). Data errors
/// throw vbucket::error naming the file.
template <class Body>
decltype(auto) with_sampler(const plan_flags& f, std::uint32_t rank, Body&& body) {
  auto run = [&](const auto& tables, const auto& rule) -> decltype(auto) {
    const auto config =
        std::make_shared<const bucket_config>(json::load_bucket_config(f.config_path, tables));
    // Streamed: the sampler reads the CSV in chunks when it plans and keeps only the bucket
    // ids, so the metadata table never exists whole (a 100 M-row CSV plans in under 2 GB).
    const streamed_meta_csv meta{f.meta_path};
    sampler_options o = sampler_options_of(f, rank);
    if (seed_u64(f.seed)) {
      batch_sampler sampler(meta, config, rule, o);
      sampler.set_epoch(f.epoch);
      return body(sampler);
    }
    o.rng = rng_mode::fast;  // ignored: the family draws (numpy; check_seed refused fast)
    batch_sampler sampler(meta, config, rule, o, numpy_seed_family{f.seed});
    sampler.set_epoch(f.epoch);
    return body(sampler);
  };
  if (f.rule == plan_rule::opensora_v2)
    return run(opensora_v2_tables{}, opensora_v2_rule{f.fps_max});
  return run(opensora_v12_tables{}, opensora_v12_rule{f.frame_interval});
}

/// `0x` and 16 hex digits: how the CLI prints a plan fingerprint.
inline std::string fingerprint_text(std::uint64_t fingerprint) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(fingerprint));
  return text;
}

/// Prints one warning line on stderr when the plan's pads are more than `threshold` of its
/// slots: their share, the buckets with the most, and what --policy downgrade would leave
/// when it would leave fewer. The semantics stay; a bucket far below its batch size is mostly
/// one sample repeated, which a user should hear about.
inline void warn_pads(std::string_view command, const epoch_plan& plan, const bucket_config& config,
                      double threshold) {
  const pad_report r = compute_pad_report(plan, config);
  if (!r.exceeds(threshold)) return;
  auto percent = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f%%", 100.0 * v);
    return std::string(text);
  };
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", threshold);
  std::string line = "vbucket " + std::string(command) + ": warning: " + percent(r.fraction()) +
                     " of the batch slots are pads (" + std::to_string(r.pads) + " of " +
                     std::to_string(r.slots) + ", above --pad-warn " + limit + "); most in ";
  for (std::size_t i = 0; i < r.worst.size(); ++i) {
    const bucket_pads& b = r.worst[i];
    if (i > 0) line += ", ";
    line += b.resolution + " frames " + std::to_string(b.frames) + " ratio " + b.ratio + " (" +
            std::to_string(b.pads) + " pads of " + std::to_string(b.slots) + " slots)";
  }
  if (r.downgrade_helps())
    line += "; --policy downgrade would leave " + percent(r.downgrade_fraction()) + " (" +
            std::to_string(r.downgrade_pads) + " of " + std::to_string(r.downgrade_slots) + ")";
  line += "\n";
  std::fputs(line.c_str(), stderr);
}

}  // namespace vbucket::cli
