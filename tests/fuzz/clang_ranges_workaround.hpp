#pragma once
/// Lets clang before 16 compile `vbucket::rank_steps` (include/vbucket/epoch_plan.hpp) with
/// libstdc++: those clangs check the constraints of `std::ranges::view_interface<D>`'s members
/// when the base is named, while D is still incomplete, and fail (a clang bug fixed in 16). For
/// the fuzz build only, view_interface<rank_steps> is reduced to view_base: rank_steps defines
/// begin, end and size itself, so it stays a sized random-access view. Include it first.

#include <ranges>  // std::ranges::view_interface, std::ranges::view_base

#if defined(__clang__) && __clang_major__ < 16 && defined(__GLIBCXX__)
namespace vbucket {
class rank_steps;
}  // namespace vbucket
template <>
class std::ranges::view_interface<vbucket::rank_steps> : public std::ranges::view_base {};
#endif
