#pragma once
/// The resume state of an epoch plan (`plan_state`): what a trainer saves in a checkpoint, and
/// its text form "vbucket-plan seed=S epoch=E consumed=C balance=G ...".

#include <algorithm>     // std::min
#include <charconv>      // std::from_chars
#include <cstdint>       // std::uint32_t, std::uint64_t
#include <limits>        // std::numeric_limits
#include <optional>      // std::optional
#include <string>        // std::string, std::to_string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc

#include "vbucket/base/error.hpp"
#include "vbucket/detail/compiled.hpp"

namespace vbucket {

/// Resume state: what a trainer saves in a checkpoint. `consumed` counts global batches (all
/// ranks together) of the epoch already trained on. `balance_group` is the plan's step balance
/// group (`plan_options::balance_group`, 0 = none): the global order depends on it, so a state
/// is only valid for a plan with the same group; nullopt = not recorded (a state built from
/// (seed, epoch, consumed) alone, or a string from before the field existed), not checked.
/// `token_budget` is recorded by packed plans (`packed_options::token_budget`): their batches
/// depend on it, so a packed plan refuses a state of another budget and a fixed plan any state
/// with a budget.
/// `world` is the world size the state was saved under (`batch_sampler::state()` records it):
/// `consumed` is then a whole number of that world's steps, and the end of the epoch under that
/// world bounds it. `fingerprint` is the plan's fingerprint (`plan_fingerprint`, a hash of the
/// epoch's global batch sequence): a sampler refuses a state whose fingerprint is not its own
/// plan's, so a state saved before the metadata, config, rule, rng or policy changed cannot
/// resume a different plan silently. `sample_cost` is recorded by a plan made with per-sample
/// costs (`make_epoch_plan(..., sample_cost)`, `epoch_plan::sample_cost_hash`): the hash of
/// those costs, which order its batches; a plan refuses a state of other costs, and a state
/// recorded from a plan without them (one that records any optional field) when it has them.
/// Written as "vbucket-plan seed=S epoch=E consumed=C balance=G budget=B world=W
/// fingerprint=HHHHHHHHHHHHHHHH sample_cost=HHHHHHHHHHHHHHHH" (each optional field left out
/// when not recorded; B in the shortest form that reads back exactly; the fingerprint and the
/// cost hash as 16 lowercase hex digits).
struct plan_state {
  /// The world size a position records: `world` (the size it is dealt to now), unless the
  /// position lies past what that world's last step of the epoch can reach, `num_batches` +
  /// `world` - 1. That happens only when an epoch ended under `reached_under` with alignment
  /// repeats and was resumed under a smaller world with no step since; the position was
  /// reached under `reached_under`, so that is what it records (recording `world` would make a
  /// state its own loader refuses).
  [[nodiscard]] static constexpr std::uint32_t position_world(
      std::uint64_t consumed, std::uint64_t num_batches, std::uint32_t world,
      std::uint32_t reached_under) noexcept {
    return consumed > num_batches + (world - 1) ? reached_under : world;
  }

  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  std::uint64_t consumed = 0;
  std::optional<std::uint32_t> balance_group;
  std::optional<double> token_budget;
  std::optional<std::uint32_t> world;
  std::optional<std::uint64_t> fingerprint;
  std::optional<std::uint64_t> sample_cost;

  constexpr plan_state() noexcept = default;
  constexpr plan_state(std::uint64_t seed_, std::uint64_t epoch_, std::uint64_t consumed_,
                       std::optional<std::uint32_t> balance_group_ = std::nullopt,
                       std::optional<double> token_budget_ = std::nullopt) noexcept
      : seed(seed_),
        epoch(epoch_),
        consumed(consumed_),
        balance_group(balance_group_),
        token_budget(token_budget_) {}

  /// The state after `steps` more steps under world size `world_size`. Throws `vbucket::error`
  /// when the count of global batches would not fit in 64 bits.
  [[nodiscard]] constexpr plan_state advanced(std::uint64_t steps, std::uint32_t world_size) const {
    plan_state s = *this;
    const std::uint64_t w = world_size == 0 ? 1 : world_size;
    if (steps > (std::numeric_limits<std::uint64_t>::max() - consumed) / w)
      throw error("plan state: " + std::to_string(steps) + " steps of world " + std::to_string(w) +
                  " after " + std::to_string(consumed) +
                  " consumed global batches overflow a 64-bit count");
    s.consumed += steps * w;
    s.world = static_cast<std::uint32_t>(w);
    return s;
  }

  /// A fingerprint as 16 lowercase hex digits (the one format of every surface).
  static VBUCKET_COMPILED_INLINE std::string hex(std::uint64_t fingerprint);
  /// Parses 1 to 16 hex digits (either case; an optional "0x"). Throws `vbucket::error` naming
  /// `what` and the text otherwise.
  static VBUCKET_COMPILED_INLINE std::uint64_t parse_hex(std::string_view text,
                                                         std::string_view what = "fingerprint");

  [[nodiscard]] VBUCKET_COMPILED_INLINE std::string to_string() const;

  /// A budget in the shortest form that reads back exactly.
  static VBUCKET_COMPILED_INLINE std::string budget_text(double b);

  /// Throws `vbucket::error` unless this state can resume the plan of (seed, epoch, step balance
  /// group, token budget: nullopt for fixed batches, hash of the per-sample costs: nullopt
  /// without): seed and epoch must be equal, and a recorded group, budget or cost hash too (a
  /// state of fixed batches resumes no packed plan, and the other way round; a state recorded
  /// without per-sample costs resumes no plan with them). The one check of every plan's
  /// `deal(world, state)`.
  VBUCKET_COMPILED_INLINE void check_for(
      std::uint64_t plan_seed, std::uint64_t plan_epoch, std::uint32_t plan_group,
      std::optional<double> plan_budget,
      std::optional<std::uint64_t> plan_sample_cost = std::nullopt) const;

  /// Parses `to_string()`'s form (fields in any order, separated by spaces; balance and budget
  /// optional).
  /// Throws `vbucket::error` naming what is wrong.
  static VBUCKET_COMPILED_INLINE plan_state parse(std::string_view text);

  friend constexpr bool operator==(const plan_state&, const plan_state&) = default;
};
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE std::string plan_state::to_string() const {
  std::string s = "vbucket-plan seed=" + std::to_string(seed) + " epoch=" + std::to_string(epoch) +
                  " consumed=" + std::to_string(consumed);
  if (balance_group) s += " balance=" + std::to_string(*balance_group);
  if (token_budget) s += " budget=" + budget_text(*token_budget);
  if (world) s += " world=" + std::to_string(*world);
  if (fingerprint) s += " fingerprint=" + hex(*fingerprint);
  if (sample_cost) s += " sample_cost=" + hex(*sample_cost);
  return s;
}

VBUCKET_COMPILED_INLINE std::string plan_state::hex(std::uint64_t fingerprint) {
  constexpr char digits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, fingerprint >>= 4)
    out[static_cast<std::size_t>(i)] = digits[fingerprint & 0xf];
  return out;
}

VBUCKET_COMPILED_INLINE std::uint64_t plan_state::parse_hex(std::string_view text,
                                                            std::string_view what) {
  std::string_view digits = text;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X'))
    digits.remove_prefix(2);
  std::uint64_t v = 0;
  const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, 16);
  if (digits.empty() || digits.size() > 16 || ec != std::errc{} ||
      p != digits.data() + digits.size())
    throw error(std::string(what) + " \"" + std::string(text) +
                "\" is not a 64-bit hex number (1 to 16 hex digits)");
  return v;
}

VBUCKET_COMPILED_INLINE std::string plan_state::budget_text(double b) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, b);
  return std::string(buf, r.ptr);
}

VBUCKET_COMPILED_INLINE void plan_state::check_for(
    std::uint64_t plan_seed, std::uint64_t plan_epoch, std::uint32_t plan_group,
    std::optional<double> plan_budget, std::optional<std::uint64_t> plan_sample_cost) const {
  if (seed != plan_seed || epoch != plan_epoch)
    throw error("plan state " + to_string() + " is not for this plan (seed " +
                std::to_string(plan_seed) + ", epoch " + std::to_string(plan_epoch) + ")");
  if (balance_group && *balance_group != plan_group)
    throw error("plan state " + to_string() + " was saved from a plan with step balance " +
                "group " + std::to_string(*balance_group) + " but this plan has " +
                std::to_string(plan_group) + " (0 = none): the global orders differ, so " +
                "resuming would replay some batches and skip others; plan with balance group " +
                std::to_string(*balance_group));
  if (token_budget && !plan_budget)
    throw error("plan state " + to_string() + " was saved from a packed plan (batching " +
                "\"packed\", token budget " + budget_text(*token_budget) +
                ") but this plan has fixed batches (batching \"fixed\", no token budget): " +
                "resume it with batching \"packed\" and token budget " +
                budget_text(*token_budget));
  if (!token_budget && plan_budget && fingerprint)
    throw error("plan state " + to_string() + " was saved from a plan with fixed batches " +
                "(batching \"fixed\") but this plan is packed (batching \"packed\", token " +
                "budget " + budget_text(*plan_budget) + "): resume it with batching \"fixed\"");
  if (token_budget && *token_budget != *plan_budget)
    throw error("plan state " + to_string() + " was saved from a packed plan with token " +
                "budget " + budget_text(*token_budget) + " but this plan's budget is " +
                budget_text(*plan_budget) + ": the batches differ, so resuming would " +
                "replay some samples and skip others; plan with token budget " +
                budget_text(*token_budget));
  if (sample_cost && sample_cost != plan_sample_cost)
    throw error("plan state " + to_string() + " was saved from a plan balanced with " +
                "per-sample costs of hash " + hex(*sample_cost) + " but this plan " +
                (plan_sample_cost ? "has per-sample costs of hash " + hex(*plan_sample_cost)
                                  : std::string("has no per-sample costs")) +
                ": the batch costs differ, so the global orders may differ and resuming would " +
                "replay some batches and skip others; plan with the same per-sample costs");
  if (!sample_cost && plan_sample_cost && (balance_group || token_budget || world || fingerprint))
    throw error("plan state " + to_string() + " was saved from a plan without per-sample " +
                "costs but this plan has per-sample costs of hash " + hex(*plan_sample_cost) +
                ": the batch costs differ, so the global orders may differ and resuming would " +
                "replay some batches and skip others; plan without per-sample costs");
}

VBUCKET_COMPILED_INLINE plan_state plan_state::parse(std::string_view text) {
  auto fail = [&](const std::string& why) -> plan_state {
    throw error("plan state \"" + std::string(text) + "\": " + why);
  };
  constexpr std::string_view tag = "vbucket-plan";
  std::size_t pos = text.find_first_not_of(' ');
  if (pos == std::string_view::npos || text.substr(pos, tag.size()) != tag)
    return fail(
        "expected \"vbucket-plan seed=S epoch=E consumed=C [balance=G] [budget=B] [world=W] "
        "[fingerprint=HEX] [sample_cost=HEX]\"");
  pos += tag.size();
  plan_state s;
  constexpr std::string_view names[] = {"seed",   "epoch", "consumed",    "balance",
                                        "budget", "world", "fingerprint", "sample_cost"};
  constexpr int num_names = 8;
  bool seen[num_names] = {};
  while (true) {
    const std::size_t start = text.find_first_not_of(' ', pos);
    if (start == std::string_view::npos) break;
    if (start == pos) return fail("fields must be separated by spaces");
    const std::size_t end = std::min(text.find(' ', start), text.size());
    const std::string_view field = text.substr(start, end - start);
    const std::size_t eq = field.find('=');
    const std::string_view name = field.substr(0, eq);
    int which = -1;
    for (int k = 0; k < num_names; ++k)
      if (name == names[k]) which = k;
    if (eq == std::string_view::npos || which < 0)
      return fail("unknown field \"" + std::string(field) + "\"");
    if (seen[which]) return fail("duplicate field \"" + std::string(name) + "\"");
    seen[which] = true;
    const std::string_view value = field.substr(eq + 1);
    if (which == 4) {
      double b = 0;
      const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), b);
      if (value.empty() || ec != std::errc{} || p != value.data() + value.size() || !(b > 0.0) ||
          !(b < std::numeric_limits<double>::infinity()))
        return fail("budget must be a positive finite number");
      s.token_budget = b;
      pos = end;
      continue;
    }
    if (which == 6 || which == 7) {
      try {
        (which == 6 ? s.fingerprint : s.sample_cost) = parse_hex(value);
      } catch (const error&) {
        return fail(std::string(name) + " must be 1 to 16 hex digits");
      }
      pos = end;
      continue;
    }
    std::uint64_t v = 0;
    const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (value.empty() || ec != std::errc{} || p != value.data() + value.size())
      return fail(std::string(name) + " must be a non-negative integer below 2^" +
                  (which == 3 || which == 5 ? "32" : "64"));
    if (which == 3) {
      if (v > std::numeric_limits<std::uint32_t>::max())
        return fail("balance must be a non-negative integer below 2^32");
      s.balance_group = static_cast<std::uint32_t>(v);
    } else if (which == 5) {
      if (v == 0 || v > std::numeric_limits<std::uint32_t>::max())
        return fail("world must be an integer from 1 to 2^32 - 1");
      s.world = static_cast<std::uint32_t>(v);
    } else {
      (which == 0 ? s.seed : which == 1 ? s.epoch : s.consumed) = v;
    }
    pos = end;
  }
  for (int k = 0; k < 3; ++k)
    if (!seen[k]) return fail("missing field \"" + std::string(names[k]) + "\"");
  return s;
}
#endif  // VBUCKET_HEADER_DEFINITIONS

}  // namespace vbucket
