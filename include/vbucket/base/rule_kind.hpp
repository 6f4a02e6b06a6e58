#pragma once
/// The built-in bucket rules by name ("opensora-v2", "opensora-v1.2"): the one parser of rule
/// names for the run spec, the CLI and the binding.

#include <cstdint>      // std::uint8_t
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "error.hpp"

namespace vbucket {

/// The built-in bucket rules by name.
enum class rule_kind : std::uint8_t { opensora_v2, opensora_v12 };

/// "opensora-v2" or "opensora-v1.2".
[[nodiscard]] constexpr std::string_view rule_name(rule_kind r) noexcept {
  return r == rule_kind::opensora_v2 ? "opensora-v2" : "opensora-v1.2";
}

/// The rule named "opensora-v2" or "opensora-v1.2"; nullopt for any other text.
[[nodiscard]] constexpr std::optional<rule_kind> parse_rule_name(std::string_view name) noexcept {
  if (name == "opensora-v2") return rule_kind::opensora_v2;
  if (name == "opensora-v1.2") return rule_kind::opensora_v12;
  return std::nullopt;
}

/// `parse_rule_name`, or `vbucket::error` "<what>: unknown rule "x" (expected ...)".
[[nodiscard]] inline rule_kind parse_rule_or_throw(std::string_view name,
                                                   std::string_view what = "rule") {
  if (const auto r = parse_rule_name(name)) return *r;
  throw error(std::string(what) + ": unknown rule \"" + std::string(name) +
              "\" (expected opensora-v2 or opensora-v1.2)");
}

}  // namespace vbucket
