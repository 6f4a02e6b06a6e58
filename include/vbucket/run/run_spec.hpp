#pragma once
/// `run_spec`: one description of a run — what is planned (metadata, config), with which rule,
/// draws, seed and epoch, for which ranks, how batches are formed, and how long reading its
/// media may take (deadlines, retries, a loader's outage deadline) — with its defaults and
/// its validation in one place. Every front end translates names onto it and holds no default
/// or rule of its own: the CLI's flags (`--fps-max` is field `fps_max`), a run file in JSON
/// (`vbucket::json::load_run_spec`), Python's keyword arguments (through the binding).
///
///     vbucket::run_spec spec = vbucket::run_spec::from_map(
///         {{"config", "cfg.json"}, {"meta", "meta.csv"}, {"seed", "42"}, {"world", "8"}});
///     const vbucket::sampler_options o = spec.to_sampler_options();
///     spec.visit_rule([&](const auto& tables, const auto& rule) { /* config, sampler */ });
///
/// `run_spec::fields()` is the field table: name, kind, a value name for usage lines, the
/// choices of an enumeration and one line of help. The default of a field is its value in a
/// default-constructed `run_spec` (`field_text(run_spec{}, f)`), so the member initialisers
/// below are the only place a default is written. Adding an option is one entry in `fields()`
/// (plus its member and its use); the CLI's flags, `--help`, the JSON reader, Python's keyword
/// arguments, docstrings and stubs follow from the table.

#include <array>        // std::array
#include <cstdint>      // std::uint64_t, std::uint32_t, std::int64_t
#include <limits>       // std::numeric_limits
#include <map>          // std::map
#include <memory>       // std::shared_ptr, std::unique_ptr
#include <optional>     // std::optional
#include <ranges>       // std::ranges::sized_range (a table's rows, for a cache manifest)
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::forward, std::move
#include <vector>       // std::vector (per-sample costs)

#include "vbucket/base/error.hpp"
#include "vbucket/base/numpy_random.hpp"  // big_seed
#include "vbucket/base/rule_kind.hpp"     // rule_kind, rule_name, parse_rule_name
#include "vbucket/base/sample_costs.hpp"  // read_sample_costs
#include "vbucket/bucket/aspect.hpp"      // opensora_v2_tables, opensora_v12_tables
#include "vbucket/bucket/csv.hpp"         // streamed_meta_csv (chunk_rows)
#include "vbucket/bucket/rules.hpp"       // opensora_v2_rule, opensora_v12_rule
#include "vbucket/bucket/seeding.hpp"     // plan_seed
#include "vbucket/cache/cache_plan.hpp"   // cached_rule, load_cache_manifest
#include "vbucket/detail/parse_number.hpp"
#include "vbucket/load/clip_decoder.hpp"  // defaults::timeout_seconds, io_timeout_seconds, retries, ...
#include "vbucket/plan/packed_plan.hpp"      // batching_mode, parse_batching
#include "vbucket/plan/plan_options.hpp"     // defaults, rng_mode, incomplete_policy, token_formula
#include "vbucket/sample/any_sampler.hpp"    // any_sampler, make_any_sampler, visit_seed_sources
#include "vbucket/sample/batch_sampler.hpp"  // sampler_options, builtin_sources

namespace vbucket {

/// Calls `f(tables, rule)` with the resolution tables and a default rule of `r`.
template <class F>
decltype(auto) visit_rule_kind(rule_kind r, F&& f) {
  if (r == rule_kind::opensora_v2)
    return std::forward<F>(f)(opensora_v2_tables{}, opensora_v2_rule{});
  return std::forward<F>(f)(opensora_v12_tables{}, opensora_v12_rule{});
}

/// How a field's text is read.
enum class field_kind : std::uint8_t {
  path,    ///< a file name, any non-empty text
  choice,  ///< one of `run_field::choices`
  count,   ///< a decimal integer in [min, max]
  number,  ///< a finite number > 0 (at most `run_field::max` when that is not 0)
  seed,    ///< a non-negative decimal integer of any size (NumPy seeds are unbounded)
  flag,    ///< true or false (a CLI switch)
  triple,  ///< three integers from 1 to 65536 as "T,H,W"
};

/// "path", "choice", "count", "number", "seed", "flag" or "triple".
[[nodiscard]] constexpr std::string_view kind_name(field_kind k) noexcept {
  constexpr std::string_view names[] = {"path", "choice", "count", "number",
                                        "seed", "flag",   "triple"};
  return names[static_cast<std::size_t>(k)];
}

/// What a field describes: the plan (what is drawn, planned and batched: `vbucket plan`'s
/// flags, the sampler's keywords), or how media are read (the deadlines and retries of
/// probes, decodes and shard listings, the loader's outage deadline: `vbucket scan` and
/// `decode`'s flags, the keywords of `scan`, `decode_clip` and `Loader`). A run file and the
/// sampler take both; a plan never depends on a media field.
enum class field_use : std::uint8_t { plan, media };

/// How messages name a field: as a key (`fps_max`), or as a CLI flag (`--fps-max`), after a
/// prefix (a run file's name: `run.json: key "fps_max"`).
struct field_naming {
  enum class style : std::uint8_t { key, flag, file_key };
  style how = style::key;
  std::string_view file;  ///< file_key: the file's name
  /// file_key: the key as the file writes it, when it is not the field's own name (a stage's
  /// `stages[1].balance` for the field balance_group); empty: the field's name.
  std::string_view key_as = {};

  /// `fps_max`, `--fps-max` or `FILE: key "fps_max"`.
  [[nodiscard]] std::string operator()(std::string_view field) const {
    if (how == style::flag) {
      std::string out = "--";
      for (const char c : field) out.push_back(c == '_' ? '-' : c);
      return out;
    }
    if (how == style::file_key)
      return std::string(file) + ": key \"" + std::string(key_as.empty() ? field : key_as) + "\"";
    return std::string(field);
  }
};

struct run_spec;

/// One entry of the field table.
struct run_field {
  std::string_view name;        ///< the key (a CLI flag is the name with '-' for '_')
  field_kind kind;              ///< how its text is read
  std::string_view value_name;  ///< what a usage line calls its value (empty for a flag)
  std::string_view choices;     ///< choice: the names, separated by '|'
  std::uint64_t min = 0;        ///< count: the least value
  std::uint64_t max = 0;        ///< count: the greatest value; number: the greatest (0: none)
  std::string_view help;        ///< one line (the default is added by `field_help`)
  /// Stores a value read from text (already checked against kind, choices and range).
  void (*store)(run_spec&, std::string_view text);
  /// The field's value as text; empty when it is unset (no value, no default).
  std::string (*text)(const run_spec&);
  field_use use;  ///< what the field describes
  /// An optional field (fps_max, frame_interval, policy): whether `s` gives it (its text, the
  /// default in effect, is left out of `run_spec::to_map` when not); null: always given.
  bool (*given)(const run_spec&) = nullptr;
};

/// How a stage forms its batches: the part of a run's description that each stage of a run
/// plan owns (`run_stage::batches`) and each of its segments records
/// (`segment_settings::batches`). A run spec's is `run_spec::batches()`.
struct stage_batching {
  batching_mode batching = batching_mode::fixed;
  incomplete_policy policy = defaults::policy;  ///< fixed batching: the incomplete batches
  std::uint32_t balance_group = 0;              ///< step balance: 0 off
  double token_budget = 0.0;                    ///< packed batching: its budget (> 0)
  friend bool operator==(const stage_batching&, const stage_batching&) = default;
};

/// The largest world size (and balance group) a run accepts.
inline constexpr std::uint64_t max_run_world = std::uint64_t{1} << 24;

/// One description of a run. Members are public (an aggregate to read and to set in C++);
/// `from_map` and `set` read text and check each value, `validate` the combination.
struct run_spec {
  // --- what is planned ---
  std::string meta;                                         ///< metadata source: a CSV path
  std::size_t chunk_rows = streamed_meta_csv{}.chunk_rows;  ///< rows read at a time (streamed)
  std::string config;  ///< bucket config: a JSON path (Open-Sora's dict)
  std::string cache;   ///< a cache manifest CSV: plan over it (`cached_rule`); empty: no cache
  // --- the rule ---
  rule_kind rule = rule_kind::opensora_v2;
  std::optional<double> fps_max;               ///< opensora-v2 only; unset: the rule's (16)
  std::optional<std::int64_t> frame_interval;  ///< opensora-v1.2 only; unset: the rule's (1)
  // --- the draws ---
  rng_mode rng = defaults::rng;
  big_seed seed{defaults::seed};
  std::uint64_t epoch = defaults::epoch;
  // --- the ranks ---
  std::uint32_t world = defaults::world;
  std::uint32_t rank = 0;
  // --- the plan ---
  std::optional<incomplete_policy> policy;  ///< unset: drop with drop_last, else defaults::policy
  bool drop_last = false;
  bool balance = false;             ///< step balance with `default_balance_group`
  std::uint32_t balance_group = 0;  ///< step balance with this group (implies balance)
  /// A per-sample costs file (`read_sample_costs`: one number per metadata row), added to the
  /// batch costs that balance and order the batches; empty: none. Fixed batching only.
  std::string sample_costs;
  unsigned threads = 0;
  // --- batching ---
  batching_mode batching = batching_mode::fixed;
  std::optional<double> token_budget;  ///< packed: required
  bool drop_oversized = false;         ///< packed only
  token_formula tokens{};              ///< fields compression and patch
  // --- reading media (field_use::media; `ffmpeg::limits_of`, `loader_options`) ---
  double timeout = defaults::timeout_seconds;        ///< one probe, decode or shard listing
  double io_timeout = defaults::io_timeout_seconds;  ///< a stalled connect or read
  std::uint32_t retries = defaults::retries;         ///< further attempts at a URL
  double outage_deadline = defaults::outage_deadline_seconds;  ///< a loader's longest stall

  /// The field table (see the file's comment).
  [[nodiscard]] static std::span<const run_field> fields() noexcept;
  /// The field named `name`, or null.
  [[nodiscard]] static const run_field* find(std::string_view name) noexcept;

  /// Why `text` is not a value of field `name` (its kind, choices and range), or empty when it
  /// is one: the one check of a field's text, for every reader (flags, run files, stages, run
  /// states, Python keywords).
  [[nodiscard]] static std::string check_value(std::string_view name, std::string_view text);

  /// Sets one field from text; `vbucket::error` names the field as `naming` says, and the
  /// value ("seed: expected a non-negative integer, got "x""; unknown keys too).
  void set(std::string_view name, std::string_view text, const field_naming& naming = {});

  /// A spec from string keys and values (the defaults for the rest), validated.
  [[nodiscard]] static run_spec from_map(const std::map<std::string, std::string>& values,
                                         const field_naming& naming = {}) {
    run_spec s;
    for (const auto& [key, value] : values) s.set(key, value, naming);
    s.validate(naming);
    return s;
  }

  /// Every field that has a value, as text (`from_map` of it gives this spec again).
  [[nodiscard]] std::map<std::string, std::string> to_map() const;

  /// Throws `vbucket::error` for a combination that is not a run: an option of the other rule
  /// or batching, a rank not below the world, a fast-draw seed of 2^64 or more, packed
  /// batching without a budget.
  void validate(const field_naming& naming = {}) const;

  /// The batching with the defaults in effect: the policy given, else drop with drop_last,
  /// else pad; the step balance group given, else `default_balance_group` with balance, else 0
  /// (off); the budget given, else 0.
  [[nodiscard]] stage_batching batches() const noexcept {
    const incomplete_policy p = drop_last ? incomplete_policy::drop : defaults::policy;
    const std::uint32_t g = balance ? default_balance_group : 0;
    return {batching, policy.value_or(p), balance_group != 0 ? balance_group : g,
            token_budget.value_or(0.0)};
  }

  /// The sampler's options for this spec (rank `rank`; the plan's 64-bit seed of `seed`).
  [[nodiscard]] sampler_options to_sampler_options() const {
    const stage_batching b = batches();
    return {.seed = plan_seed(seed),
            .world = world,
            .rank = rank,
            .rng = rng,
            .policy = b.policy,
            .drop_last = drop_last,
            .balance_group = b.balance_group,
            .threads = threads,
            .batching = b.batching,
            .token_budget = b.token_budget,
            .drop_oversized = drop_oversized,
            .tokens = tokens};
  }

  /// The Open-Sora 2.0 rule of this spec (fps_max, or the rule's default).
  [[nodiscard]] opensora_v2_rule v2_rule() const {
    opensora_v2_rule r;
    if (fps_max) r.fps_max = *fps_max;
    return r;
  }
  /// The Open-Sora v1.2 rule of this spec (frame_interval, or the rule's default).
  [[nodiscard]] opensora_v12_rule v12_rule() const {
    opensora_v12_rule r;
    if (frame_interval) r.frame_interval = *frame_interval;
    return r;
  }

  /// Calls `f(tables, rule)` with the resolution tables of the spec's rule and the rule made
  /// from the spec; both branches are instantiated, so `f` returns one type.
  template <class F>
  decltype(auto) visit_rule(F&& f) const {
    if (rule == rule_kind::opensora_v2) return std::forward<F>(f)(opensora_v2_tables{}, v2_rule());
    return std::forward<F>(f)(opensora_v12_tables{}, v12_rule());
  }

  /// Calls `f(options, sources)` with the sampler options and the random sources of `seed`
  /// (`visit_seed_sources`: the built-in ones below 2^64, `numpy_seed_family` above).
  template <class F>
  decltype(auto) visit_sources(F&& f) const {
    return visit_seed_sources(to_sampler_options(), seed, std::forward<F>(f));
  }
};

namespace detail {

/// "T,H,W" as three integers from 1 to 65536, or nullopt.
[[nodiscard]] std::optional<std::array<std::int64_t, 3>> spec_triple(std::string_view t);
/// Whether `name` is one of `choices` (names separated by '|').
[[nodiscard]] bool spec_is_choice(std::string_view choices, std::string_view name);

}  // namespace detail

/// A field's value in `s` as text (empty: unset, no default).
[[nodiscard]] std::string field_text(const run_spec& s, const run_field& f);

/// A field's help line with its default: `help (default: X)`; flags and fields without a
/// default get none.
[[nodiscard]] std::string field_help(const run_field& f);

/// The `any_sampler` a spec describes over `samples` and `config` (loaded with the resolution
/// tables of `spec.rule`, e.g. by `json::load_config(spec)`): the rule made from the spec, its
/// options, and its seed of any size (the big-seed dispatch of `make_any_sampler`), and the
/// per-sample costs of `spec.sample_costs` (read here, once). Validates the spec first.
template <sample_collection Samples>
[[nodiscard]] std::unique_ptr<any_sampler> make_any_sampler(
    std::shared_ptr<const Samples> samples, std::shared_ptr<const bucket_config> config,
    const run_spec& spec) {
  spec.validate();
  std::shared_ptr<const cache_set> cache;
  if (!spec.cache.empty()) {
    // The metadata's rows, which every sample of the manifest must be one of (a streamed
    // table is counted by one pass: only with a cache).
    std::optional<std::uint64_t> rows;
    if constexpr (std::same_as<std::remove_cv_t<Samples>, meta_table>)
      rows = samples->size();
    else if constexpr (chunked_samples<Samples>)
      rows = static_cast<std::uint64_t>(samples->for_each_chunk([](const meta_chunk&) {}));
    else if constexpr (std::ranges::sized_range<const Samples>)
      rows = static_cast<std::uint64_t>(std::ranges::size(*samples));
    cache = load_cache_manifest(spec.cache, *config, rows);
  }
  sampler_options options = spec.to_sampler_options();
  std::vector<double> costs;  // the sampler copies them
  if (!spec.sample_costs.empty()) {
    costs = read_sample_costs(spec.sample_costs);
    options.sample_costs = costs;
    options.sample_costs_name = spec.sample_costs;
  }
  return spec.visit_rule([&](const auto& /*tables*/, const auto& rule) {
    if (cache)
      return make_any_sampler(std::move(samples), std::move(config), cached_rule(rule, cache),
                              options, spec.seed);
    return make_any_sampler(std::move(samples), std::move(config), rule, options, spec.seed);
  });
}

}  // namespace vbucket
