// vbucket::run: the run spec's field table, its checks and its text, compiled once
// (include/vbucket/run/run_spec.hpp declares them).
#include "vbucket/run/run_spec.hpp"

#include <array>         // std::array
#include <charconv>      // std::from_chars (a triple's factors in messages)
#include <cstdint>       // std::uint64_t, std::int64_t
#include <limits>        // std::numeric_limits
#include <map>           // std::map
#include <optional>      // std::optional
#include <span>          // std::span
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <utility>       // std::move

#include "vbucket/base/error.hpp"
#include "vbucket/detail/parse_number.hpp"  // parse_uint_in, parse_positive, shortest_text, split_text

namespace vbucket {

namespace detail {

[[nodiscard]] std::optional<std::array<std::int64_t, 3>> spec_triple(std::string_view t) {
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

[[nodiscard]] std::string spec_triple_text(std::int64_t a, std::int64_t b, std::int64_t c) {
  return std::to_string(a) + "," + std::to_string(b) + "," + std::to_string(c);
}

/// Whether `name` is one of the '|'-separated `choices`.
[[nodiscard]] bool spec_is_choice(std::string_view choices, std::string_view name) {
  for (const std::string_view c : split_text(choices, '|'))
    if (c == name) return true;
  return false;
}

/// "a, b or c" of '|'-separated choices.
[[nodiscard]] std::string spec_choice_list(std::string_view choices) {
  const std::vector<std::string_view> all = split_text(choices, '|');
  std::string out;
  for (std::size_t i = 0; i < all.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + std::string(all[i]);
  return out;
}

// The field table's readers and writers, one pair per field, and what the field describes.
#define VBUCKET_SPEC_RW(member, from_text, to_text)              \
  [](run_spec& s, std::string_view t) { s.member = from_text; }, \
      [](const run_spec& s) -> std::string { return to_text; }, field_use::plan
// An optional member: given or not (its text is the default in effect when it is not).
#define VBUCKET_SPEC_GIVEN(member) [](const run_spec& s) { return s.member.has_value(); }
#define VBUCKET_SPEC_MEDIA_SECONDS(member)                                \
  [](run_spec& s, std::string_view t) { s.member = *parse_positive(t); }, \
      [](const run_spec& s) -> std::string { return shortest_text(s.member); }, field_use::media

/// The most seconds a media field accepts, as the table's bound.
constexpr std::uint64_t max_spec_seconds = static_cast<std::uint64_t>(defaults::max_seconds);

constexpr run_field run_field_table[] = {
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
     VBUCKET_SPEC_RW(fps_max, *parse_positive(t), shortest_text(s.v2_rule().fps_max)),
     VBUCKET_SPEC_GIVEN(fps_max)},
    {"frame_interval", field_kind::count, "N", "", 1, std::uint64_t{1} << 31,
     "opensora-v1.2: the frame interval",
     VBUCKET_SPEC_RW(frame_interval, static_cast<std::int64_t>(*parse_uint_in(t, 1, 1ULL << 31)),
                     std::to_string(s.v12_rule().frame_interval)),
     VBUCKET_SPEC_GIVEN(frame_interval)},
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
     VBUCKET_SPEC_RW(policy, *parse_policy(t), std::string(policy_name(s.batches().policy))),
     VBUCKET_SPEC_GIVEN(policy)},
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
#undef VBUCKET_SPEC_GIVEN

/// Why `text` is not a value of `f`, or empty when it is one.
[[nodiscard]] std::string spec_check(const run_field& f, std::string_view text) {
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

std::span<const run_field> run_spec::fields() noexcept { return detail::run_field_table; }

const run_field* run_spec::find(std::string_view name) noexcept {
  for (const run_field& f : fields())
    if (f.name == name) return &f;
  return nullptr;
}

[[nodiscard]] std::string field_text(const run_spec& s, const run_field& f) { return f.text(s); }

[[nodiscard]] std::string field_help(const run_field& f) {
  std::string out(f.help);
  if (f.kind == field_kind::flag) return out;
  const std::string d = f.text(run_spec{});
  if (!d.empty()) out += " (default: " + d + ")";
  return out;
}

std::string run_spec::check_value(std::string_view name, std::string_view text) {
  const run_field* f = find(name);
  if (f == nullptr) return "unknown field \"" + std::string(name) + "\"";
  return detail::spec_check(*f, text);
}

void run_spec::set(std::string_view name, std::string_view text, const field_naming& naming) {
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

std::map<std::string, std::string> run_spec::to_map() const {
  std::map<std::string, std::string> out;
  for (const run_field& f : fields()) {
    if (f.given != nullptr && !f.given(*this)) continue;  // an optional left unset
    std::string t = f.text(*this);
    if (!t.empty()) out.emplace(std::string(f.name), std::move(t));  // empty: unset, no default
  }
  return out;
}

void run_spec::validate(const field_naming& naming) const {
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

}  // namespace vbucket
