#pragma once
/// Helpers shared by the doctest suites: what a call throws, and substring checks of messages.

#include <doctest/doctest.h>

#include <string>       // std::string
#include <string_view>  // std::string_view

#include "vbucket/base/error.hpp"

namespace vbucket_test {

/// The message of the vbucket::error that `fn` throws, or "" (and a failed check) if none.
template <class Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const vbucket::error& e) {
    return e.what();
  }
  FAIL_CHECK("no vbucket::error was thrown");
  return {};
}

/// Whether `haystack` contains `needle`.
inline bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

}  // namespace vbucket_test
