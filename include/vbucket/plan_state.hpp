#pragma once
/// The resume state of an epoch plan (`plan_state`): what a trainer saves in a checkpoint, and
/// its text form "vbucket-plan seed=S epoch=E consumed=C balance=G".

#include <algorithm>     // std::min
#include <charconv>      // std::from_chars
#include <cstdint>       // std::uint32_t, std::uint64_t
#include <limits>        // std::numeric_limits
#include <optional>      // std::optional
#include <string>        // std::string, std::to_string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc

#include "error.hpp"

namespace vbucket {

/// Resume state: what a trainer saves in a checkpoint. `consumed` counts global batches (all
/// ranks together) of the epoch already trained on. `balance_group` is the plan's step balance
/// group (`plan_options::balance_group`, 0 = none): the global order depends on it, so a state
/// is only valid for a plan with the same group; nullopt = not recorded (a state built from
/// (seed, epoch, consumed) alone, or a string from before the field existed), not checked.
/// Written as "vbucket-plan seed=S epoch=E consumed=C balance=G" (without " balance=G" when
/// not recorded).
struct plan_state {
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  std::uint64_t consumed = 0;
  std::optional<std::uint32_t> balance_group;

  constexpr plan_state() noexcept = default;
  constexpr plan_state(std::uint64_t seed_, std::uint64_t epoch_, std::uint64_t consumed_,
                       std::optional<std::uint32_t> balance_group_ = std::nullopt) noexcept
      : seed(seed_), epoch(epoch_), consumed(consumed_), balance_group(balance_group_) {}

  /// The state after `steps` more steps under world size `world`.
  [[nodiscard]] constexpr plan_state advanced(std::uint64_t steps,
                                              std::uint32_t world) const noexcept {
    return {seed, epoch, consumed + steps * world, balance_group};
  }

  [[nodiscard]] std::string to_string() const {
    std::string s = "vbucket-plan seed=" + std::to_string(seed) +
                    " epoch=" + std::to_string(epoch) + " consumed=" + std::to_string(consumed);
    if (balance_group) s += " balance=" + std::to_string(*balance_group);
    return s;
  }

  /// Parses `to_string()`'s form (fields in any order, separated by spaces; balance optional).
  /// Throws `vbucket::error` naming what is wrong.
  static plan_state parse(std::string_view text) {
    auto fail = [&](const std::string& why) -> plan_state {
      throw error("plan state \"" + std::string(text) + "\": " + why);
    };
    constexpr std::string_view tag = "vbucket-plan";
    std::size_t pos = text.find_first_not_of(' ');
    if (pos == std::string_view::npos || text.substr(pos, tag.size()) != tag)
      return fail("expected \"vbucket-plan seed=S epoch=E consumed=C [balance=G]\"");
    pos += tag.size();
    plan_state s;
    constexpr std::string_view names[] = {"seed", "epoch", "consumed", "balance"};
    bool seen[4] = {false, false, false, false};
    while (true) {
      const std::size_t start = text.find_first_not_of(' ', pos);
      if (start == std::string_view::npos) break;
      if (start == pos) return fail("fields must be separated by spaces");
      const std::size_t end = std::min(text.find(' ', start), text.size());
      const std::string_view field = text.substr(start, end - start);
      const std::size_t eq = field.find('=');
      const std::string_view name = field.substr(0, eq);
      int which = -1;
      for (int k = 0; k < 4; ++k)
        if (name == names[k]) which = k;
      if (eq == std::string_view::npos || which < 0)
        return fail("unknown field \"" + std::string(field) + "\"");
      if (seen[which]) return fail("duplicate field \"" + std::string(name) + "\"");
      seen[which] = true;
      const std::string_view value = field.substr(eq + 1);
      std::uint64_t v = 0;
      const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (value.empty() || ec != std::errc{} || p != value.data() + value.size())
        return fail(std::string(name) + " must be a non-negative integer below 2^" +
                    (which == 3 ? "32" : "64"));
      if (which == 3) {
        if (v > std::numeric_limits<std::uint32_t>::max())
          return fail("balance must be a non-negative integer below 2^32");
        s.balance_group = static_cast<std::uint32_t>(v);
      } else {
        (which == 0 ? s.seed : which == 1 ? s.epoch : s.consumed) = v;
      }
      pos = end;
    }
    for (int k = 0; k < 3; ++k)
      if (!seen[k]) return fail("missing field \"" + std::string(names[k]) + "\"");
    return s;
  }

  friend constexpr bool operator==(const plan_state&, const plan_state&) = default;
};

}  // namespace vbucket
