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

#include <array>         // std::array
#include <charconv>      // std::from_chars (a triple's factors in messages)
#include <cstdint>       // std::uint64_t, std::uint32_t, std::int64_t
#include <limits>        // std::numeric_limits
#include <map>           // std::map
#include <memory>        // std::shared_ptr, std::unique_ptr
#include <optional>      // std::optional
#include <ranges>        // std::ranges::sized_range (a table's rows, for a cache manifest)
#include <span>          // std::span
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <utility>       // std::forward, std::move
#include <vector>        // std::vector (per-sample costs)

#include "vbucket/base/error.hpp"
#include "vbucket/base/numpy_random.hpp"  // big_seed
#include "vbucket/base/rule_kind.hpp"     // rule_kind, rule_name, parse_rule_name
#include "vbucket/base/sample_costs.hpp"  // read_sample_costs
#include "vbucket/bucket/aspect.hpp"      // opensora_v2_tables, opensora_v12_tables
#include "vbucket/bucket/csv.hpp"         // streamed_meta_csv (chunk_rows)
#include "vbucket/bucket/rules.hpp"       // opensora_v2_rule, opensora_v12_rule
#include "vbucket/bucket/seeding.hpp"     // check_seed, plan_seed, seed_u64, numpy_seed_family
#include "vbucket/cache/cache_plan.hpp"   // cached_rule, load_cache_manifest
#include "vbucket/detail/parse_number.hpp"
#include "vbucket/load/clip_decoder.hpp"  // defaults::timeout_seconds, io_timeout_seconds, retries, ...
#include "vbucket/plan/packed_plan.hpp"      // batching_mode, parse_batching
#include "vbucket/plan/plan_options.hpp"     // defaults, rng_mode, incomplete_policy, token_formula
#include "vbucket/sample/any_sampler.hpp"    // any_sampler, make_any_sampler
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

  /// The incomplete-batch policy in effect: the given one, else drop with drop_last, else pad.
  [[nodiscard]] incomplete_policy effective_policy() const noexcept {
    if (policy) return *policy;
    return drop_last ? incomplete_policy::drop : defaults::policy;
  }
  /// The step balance group in effect: balance_group, else `default_balance_group` with
  /// balance, else 0 (off).
  [[nodiscard]] std::uint32_t effective_balance_group() const noexcept {
    if (balance_group != 0) return balance_group;
    return balance ? default_balance_group : 0;
  }

  /// The sampler's options for this spec (rank `rank`; the plan's 64-bit seed of `seed`).
  [[nodiscard]] sampler_options to_sampler_options() const {
    sampler_options o;
    o.seed = plan_seed(seed);
    o.world = world;
    o.rank = rank;
    o.rng = rng;
    o.policy = effective_policy();
    o.drop_last = drop_last;
    o.balance_group = effective_balance_group();
    o.threads = threads;
    o.batching = batching;
    o.token_budget = token_budget.value_or(0.0);
    o.drop_oversized = drop_oversized;
    o.tokens = tokens;
    return o;
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

  /// The big-seed dispatch: calls `f(options, sources)` with the sampler options and
  /// `builtin_sources{}` when the seed fits in 64 bits, or `numpy_seed_family{seed}` (NumPy
  /// draws of a seed of any size; `validate` refused fast draws for it) otherwise.
  template <class F>
  decltype(auto) visit_sources(F&& f) const {
    sampler_options o = to_sampler_options();
    if (seed_u64(seed)) return std::forward<F>(f)(o, builtin_sources{});
    o.rng = rng_mode::fast;  // ignored: the family draws NumPy's (rng applies to built-ins)
    return std::forward<F>(f)(o, numpy_seed_family{seed});
  }
};

namespace detail {

/// "T,H,W" as three integers from 1 to 65536, or nullopt.
[[nodiscard]] inline std::optional<std::array<std::int64_t, 3>> spec_triple(std::string_view t) {
  std::array<std::int64_t, 3> out{};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::size_t comma = t.find(',');
    if ((i < 2) == (comma == std::string_view::npos)) return std::nullopt;
    const auto v = parse_uint_in(t.substr(0, comma), 1, 65536);
    if (!v) return std::nullopt;
    out[i] = static_cast<std::int64_t>(*v);
    t = i < 2 ? t.substr(comma + 1) : std::string_view();
  }
  return out;
}

[[nodiscard]] inline std::string spec_triple_text(std::int64_t a, std::int64_t b, std::int64_t c) {
  return std::to_string(a) + "," + std::to_string(b) + "," + std::to_string(c);
}

/// Whether `name` is one of the '|'-separated `choices`.
[[nodiscard]] constexpr bool spec_is_choice(std::string_view choices, std::string_view name) {
  while (!choices.empty()) {
    const std::size_t bar = choices.find('|');
    if (choices.substr(0, bar) == name) return true;
    if (bar == std::string_view::npos) break;
    choices.remove_prefix(bar + 1);
  }
  return false;
}

/// "a, b or c" of '|'-separated choices.
[[nodiscard]] inline std::string spec_choice_list(std::string_view choices) {
  std::string out;
  std::size_t count = 0;
  for (std::string_view c = choices; !c.empty(); ++count) {
    const std::size_t bar = c.find('|');
    c = bar == std::string_view::npos ? std::string_view() : c.substr(bar + 1);
  }
  std::size_t i = 0;
  for (std::string_view c = choices; !c.empty(); ++i) {
    const std::size_t bar = c.find('|');
    if (i > 0) out += i + 1 == count ? " or " : ", ";
    out += c.substr(0, bar);
    c = bar == std::string_view::npos ? std::string_view() : c.substr(bar + 1);
  }
  return out;
}

// The field table's readers and writers, one pair per field, and what the field describes.
#define VBUCKET_SPEC_RW(member, from_text, to_text)              \
  [](run_spec& s, std::string_view t) { s.member = from_text; }, \
      [](const run_spec& s) -> std::string { return to_text; }, field_use::plan
#define VBUCKET_SPEC_MEDIA_SECONDS(member)                                \
  [](run_spec& s, std::string_view t) { s.member = *parse_positive(t); }, \
      [](const run_spec& s) -> std::string { return shortest_text(s.member); }, field_use::media

/// The most seconds a media field accepts, as the table's bound.
inline constexpr std::uint64_t max_spec_seconds = static_cast<std::uint64_t>(defaults::max_seconds);

inline constexpr run_field run_field_table[] = {
    {"config", field_kind::path, "CFG.json", "", 0, 0,
     "bucket config (JSON), as Open-Sora's dict: {\"360p\": {\"102\": [[0.15, 0.33], 4]}}",
     VBUCKET_SPEC_RW(config, std::string(t), s.config)},
    {"meta", field_kind::path, "META.csv", "", 0, 0,
     "metadata CSV with columns num_frames,height,width,fps (any order, others ignored; fps "
     "empty, nan or 0 = unknown; sizes may be written as floats such as 51.0)",
     VBUCKET_SPEC_RW(meta, std::string(t), s.meta)},
    {"cache", field_kind::path, "MANIFEST.csv", "", 0, 0,
     "plan over a latent cache (a `vbucket cache-plan --out` manifest of the same config and "
     "metadata): draws as the rule and, where the drawn shape is not cached for the sample, "
     "takes its nearest cached shape (no bucket when it has none)",
     VBUCKET_SPEC_RW(cache, std::string(t), s.cache)},
    {"chunk_rows", field_kind::count, "N", "", 1, std::uint64_t{1} << 32,
     "metadata CSV rows read at a time when the metadata is streamed (less memory, more "
     "passes; the batches do not depend on it)",
     VBUCKET_SPEC_RW(chunk_rows, static_cast<std::size_t>(*parse_uint_in(t, 1, 1ULL << 32)),
                     std::to_string(s.chunk_rows))},
    {"rule", field_kind::choice, "RULE", "opensora-v2|opensora-v1.2", 0, 0,
     "the bucket rule: Open-Sora 2.0's or v1.2's",
     VBUCKET_SPEC_RW(rule, *parse_rule_name(t), std::string(rule_name(s.rule)))},
    {"fps_max", field_kind::number, "F", "", 0, 0,
     "opensora-v2: frames are thinned to at most F per second",
     VBUCKET_SPEC_RW(fps_max, *parse_positive(t), shortest_text(s.v2_rule().fps_max))},
    {"frame_interval", field_kind::count, "N", "", 1, std::uint64_t{1} << 31,
     "opensora-v1.2: the frame interval",
     VBUCKET_SPEC_RW(frame_interval, static_cast<std::int64_t>(*parse_uint_in(t, 1, 1ULL << 31)),
                     std::to_string(s.v12_rule().frame_interval))},
    {"rng", field_kind::choice, "RNG", "numpy|fast", 0, 0,
     "the draws: numpy (Open-Sora's, bit for bit, with seed + epoch) or fast (counter-based)",
     VBUCKET_SPEC_RW(rng, *parse_rng_mode(t), std::string(to_string(s.rng)))},
    {"seed", field_kind::seed, "S", "", 0, 0,
     "the run's seed, a non-negative integer (below 2^64 with rng fast)",
     VBUCKET_SPEC_RW(seed, big_seed::parse(t), s.seed.to_string())},
    {"epoch", field_kind::count, "E", "", 0, std::numeric_limits<std::uint64_t>::max(),
     "the epoch, an integer in [0, 2^64)",
     VBUCKET_SPEC_RW(epoch, *parse_uint_in(t, 0, ~std::uint64_t{0}), std::to_string(s.epoch))},
    {"world", field_kind::count, "W", "", 1, max_run_world, "number of data-parallel ranks",
     VBUCKET_SPEC_RW(world, static_cast<std::uint32_t>(*parse_uint_in(t, 1, max_run_world)),
                     std::to_string(s.world))},
    {"rank", field_kind::count, "R", "", 0, max_run_world - 1, "this rank, below world",
     VBUCKET_SPEC_RW(rank, static_cast<std::uint32_t>(*parse_uint_in(t, 0, max_run_world - 1)),
                     std::to_string(s.rank))},
    {"policy", field_kind::choice, "POLICY", "pad|drop|downgrade", 0, 0,
     "a bucket's incomplete last batch: pad (cycling its own samples), drop, or downgrade (to "
     "a smaller bucket, then pad); drop when drop_last is given without it",
     VBUCKET_SPEC_RW(policy, *parse_policy(t), std::string(policy_name(s.effective_policy())))},
    {"drop_last", field_kind::flag, "", "", 0, 0,
     "drop incomplete steps instead of repeating batches (and policy drop unless given)",
     VBUCKET_SPEC_RW(drop_last, t == "true", s.drop_last ? "true" : "false")},
    {"balance", field_kind::flag, "", "", 0, 0,
     "step balance: cost-sorted chunks of G = 960 batches (balance_group), so that each step's "
     "batches cost about the same; fully balanced when W divides G, the order never depends "
     "on W",
     VBUCKET_SPEC_RW(balance, t == "true", s.balance ? "true" : "false")},
    {"balance_group", field_kind::count, "G", "", 0, max_run_world,
     "step balance with chunks of G batches (implies balance; 0 = off): a multiple of every "
     "world size the run will use, the same when resuming (the resume state records it)",
     VBUCKET_SPEC_RW(balance_group, static_cast<std::uint32_t>(*parse_uint_in(t, 0, max_run_world)),
                     std::to_string(s.balance_group))},
    {"sample_costs", field_kind::path, "COSTS.txt", "", 0, 0,
     "per-sample costs: a text file with one number >= 0 per metadata row (e.g. expected "
     "decode time in latent tokens; a header line is allowed), added to each batch's cost: "
     "step balance (balance, balance_group) sorts the batches by it, so that each step's "
     "costs are about equal; fixed batching only (the resume state records their hash)",
     VBUCKET_SPEC_RW(sample_costs, std::string(t), s.sample_costs)},
    {"threads", field_kind::count, "N", "", 0, 4096,
     "worker threads for assignment and planning; 0 = one per core (the batches do not "
     "depend on it)",
     VBUCKET_SPEC_RW(threads, static_cast<unsigned>(*parse_uint_in(t, 0, 4096)),
                     std::to_string(s.threads))},
    {"batching", field_kind::choice, "MODE", "fixed|packed", 0, 0,
     "fixed (one bucket and its batch size per batch) or packed (samples of any shapes up to "
     "token_budget per batch, for variable-length attention)",
     VBUCKET_SPEC_RW(batching, *parse_batching(t), std::string(batching_name(s.batching)))},
    {"token_budget", field_kind::number, "B", "", 0, 0,
     "packed: the most latent tokens one rank's step may hold (see `vbucket fit-bs` for the "
     "budget that fits a GPU)",
     VBUCKET_SPEC_RW(token_budget, *parse_positive(t),
                     s.token_budget ? shortest_text(*s.token_budget) : std::string())},
    {"drop_oversized", field_kind::flag, "", "", 0, 0,
     "packed: drop (and count) samples costing more than token_budget instead of failing",
     VBUCKET_SPEC_RW(drop_oversized, t == "true", s.drop_oversized ? "true" : "false")},
    {"compression", field_kind::triple, "T,H,W", "", 0, 0,
     "the latent token formula's VAE compression: a sample costs ceil((1 + (T-1)/ct) / pt) * "
     "(H/(ch*ph)) * (W/(cw*pw)) tokens (token_budget, balance)",
     [](run_spec& s, std::string_view t) {
       const auto v = *spec_triple(t);
       s.tokens.compression_t = v[0];
       s.tokens.compression_h = v[1];
       s.tokens.compression_w = v[2];
     },
     [](const run_spec& s) {
       return spec_triple_text(s.tokens.compression_t, s.tokens.compression_h,
                               s.tokens.compression_w);
     },
     field_use::plan},
    {"patch", field_kind::triple, "T,H,W", "", 0, 0, "the latent token formula's patch",
     [](run_spec& s, std::string_view t) {
       const auto v = *spec_triple(t);
       s.tokens.patch_t = v[0];
       s.tokens.patch_h = v[1];
       s.tokens.patch_w = v[2];
     },
     [](const run_spec& s) {
       return spec_triple_text(s.tokens.patch_t, s.tokens.patch_h, s.tokens.patch_w);
     },
     field_use::plan},
    {"timeout", field_kind::number, "SECONDS", "", 0, max_spec_seconds,
     "the deadline of one clip's probe or decode and of listing one shard, network included "
     "(connect, reads, retries): past it the clip fails",
     VBUCKET_SPEC_MEDIA_SECONDS(timeout)},
    {"io_timeout", field_kind::number, "SECONDS", "", 0, max_spec_seconds,
     "over the network, a connect or a read that stalls this long fails (and may be retried)",
     VBUCKET_SPEC_MEDIA_SECONDS(io_timeout)},
    {"retries", field_kind::count, "N", "", 0, static_cast<std::uint64_t>(defaults::max_retries),
     "further attempts at a URL after a failure that may pass (refused, reset, 5xx, timeout)",
     [](run_spec& s, std::string_view t) {
       s.retries = static_cast<std::uint32_t>(
           *parse_uint_in(t, 0, static_cast<std::uint64_t>(defaults::max_retries)));
     },
     [](const run_spec& s) { return std::to_string(s.retries); }, field_use::media},
    {"outage_deadline", field_kind::number, "SECONDS", "", 0, max_spec_seconds,
     "a loader whose sources cannot be reached (refused, 5xx, timeouts) stalls and tries the "
     "same samples again; an outage longer than this fails it",
     VBUCKET_SPEC_MEDIA_SECONDS(outage_deadline)},
};
#undef VBUCKET_SPEC_RW
#undef VBUCKET_SPEC_MEDIA_SECONDS

/// Why `text` is not a value of `f`, or empty when it is one.
[[nodiscard]] inline std::string spec_check(const run_field& f, std::string_view text) {
  const std::string got = "got \"" + std::string(text) + "\"";
  switch (f.kind) {
    case field_kind::path:
      return text.empty() ? "expected a file name, got an empty text" : "";
    case field_kind::choice:
      if (spec_is_choice(f.choices, text)) return "";
      return "unknown " + std::string(f.name == "rng" ? "random source" : f.name) + " \"" +
             std::string(text) + "\" (expected " + spec_choice_list(f.choices) + ")";
    case field_kind::count:
      if (parse_uint_in(text, f.min, f.max)) return "";
      return "expected an integer from " + std::to_string(f.min) + " to " + std::to_string(f.max) +
             ", " + got;
    case field_kind::number: {
      const std::optional<double> v = parse_positive(text);
      if (f.max == 0) return v ? "" : "expected a positive number, " + got;
      if (v && *v <= static_cast<double>(f.max)) return "";
      return "expected a positive number up to " + std::to_string(f.max) + ", " + got;
    }
    case field_kind::seed:
      try {
        (void)big_seed::parse(text);
        return "";
      } catch (const error& e) {
        return e.what();
      }
    case field_kind::flag:
      return text == "true" || text == "false" ? "" : "expected true or false, " + got;
    case field_kind::triple: {
      if (spec_triple(text)) return "";
      std::string why = "expected three integers from 1 to 65536 as T,H,W, " + got;
      // Three integers with one out of range: name that factor too (compression_h, patch_t, ...)
      std::string_view rest = text;
      for (const char axis : {'t', 'h', 'w'}) {
        const std::size_t comma = rest.find(',');
        const std::string_view part = rest.substr(0, comma);
        std::int64_t v = 0;
        const auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
        if (part.empty() || ec != std::errc{} || p != part.data() + part.size()) break;
        if (v < 1 || v > 65536)
          return why + ": " + std::string(f.name) + "_" + axis +
                 " must be an integer from 1 to 65536, got " + std::to_string(v);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
      return why;
    }
  }
  return "unknown field kind";
}

}  // namespace detail

inline std::span<const run_field> run_spec::fields() noexcept { return detail::run_field_table; }

inline const run_field* run_spec::find(std::string_view name) noexcept {
  for (const run_field& f : fields())
    if (f.name == name) return &f;
  return nullptr;
}

/// A field's value in `s` as text (empty: unset, no default).
[[nodiscard]] inline std::string field_text(const run_spec& s, const run_field& f) {
  return f.text(s);
}

/// A field's help line with its default: `help (default: X)`; flags and fields without a
/// default get none.
[[nodiscard]] inline std::string field_help(const run_field& f) {
  std::string out(f.help);
  if (f.kind == field_kind::flag) return out;
  const std::string d = f.text(run_spec{});
  if (!d.empty()) out += " (default: " + d + ")";
  return out;
}

inline std::string run_spec::check_value(std::string_view name, std::string_view text) {
  const run_field* f = find(name);
  if (f == nullptr) return "unknown field \"" + std::string(name) + "\"";
  return detail::spec_check(*f, text);
}

inline void run_spec::set(std::string_view name, std::string_view text,
                          const field_naming& naming) {
  const run_field* f = find(name);
  if (f == nullptr) {
    std::string known;
    for (const run_field& g : fields()) known += (known.empty() ? "" : ", ") + std::string(g.name);
    throw error((naming.how == field_naming::style::file_key ? std::string(naming.file) + ": "
                                                             : std::string()) +
                "unknown key \"" + std::string(name) + "\" (known: " + known + ")");
  }
  const std::string why = detail::spec_check(*f, text);
  if (!why.empty()) throw error(naming(f->name) + ": " + why);
  f->store(*this, text);
}

inline std::map<std::string, std::string> run_spec::to_map() const {
  std::map<std::string, std::string> out;
  for (const run_field& f : fields()) {
    if ((f.name == "fps_max" && !fps_max) || (f.name == "frame_interval" && !frame_interval) ||
        (f.name == "policy" && !policy) || (f.name == "config" && config.empty()) ||
        (f.name == "cache" && cache.empty()) || (f.name == "meta" && meta.empty()) ||
        (f.name == "sample_costs" && sample_costs.empty()))
      continue;
    std::string t = f.text(*this);
    if (!t.empty()) out.emplace(std::string(f.name), std::move(t));
  }
  return out;
}

inline void run_spec::validate(const field_naming& naming) const {
  // Cross-field messages name fields as the surface does, without a file prefix.
  const field_naming n = naming.how == field_naming::style::flag ? naming : field_naming{};
  if (fps_max && rule != rule_kind::opensora_v2)
    throw error(n("fps_max") + " applies to " + n("rule") + " opensora-v2 only");
  if (frame_interval && rule != rule_kind::opensora_v12)
    throw error(n("frame_interval") + " applies to " + n("rule") + " opensora-v1.2 only");
  if (rank >= world)
    throw error(n("rank") + " " + std::to_string(rank) + " is not below " + n("world") + " " +
                std::to_string(world) + " (ranks are 0 to " + std::to_string(world - 1) + ")");
  try {
    check_seed(rng, seed);
  } catch (const error& e) {
    throw error(n("seed") + ": " + e.what());
  }
  if (batching == batching_mode::packed) {
    if (!token_budget)
      throw error(n("batching") + " packed needs " + n("token_budget") +
                  " B (the token budget: latent tokens per batch)");
    if (policy)
      throw error(n("policy") + " applies to " + n("batching") +
                  " fixed only (packed batches are never padded: a batch holds whole samples up "
                  "to the budget)");
    if (!sample_costs.empty())
      throw error(n("sample_costs") + " applies to " + n("batching") +
                  " fixed only (packed plans take no per-sample costs)");
  } else {
    if (token_budget)
      throw error(n("token_budget") + " applies to " + n("batching") + " packed only");
    if (drop_oversized)
      throw error(n("drop_oversized") + " applies to " + n("batching") + " packed only");
  }
  tokens.validate();
}

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
