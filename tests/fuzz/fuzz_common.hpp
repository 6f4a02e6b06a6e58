#pragma once
/// Helpers shared by the libFuzzer targets: invariant checks that abort with a message (so
/// libFuzzer records the input as a crash), and the bad-input contract for error messages.

#include <cstdio>       // std::fprintf
#include <cstdlib>      // std::abort
#include <string_view>  // std::string_view

namespace vbucket_fuzz {

[[noreturn]] inline void fail(const char* what, const char* file, int line) {
  std::fprintf(stderr, "fuzz invariant violated at %s:%d: %s\n", file, line, what);
  std::abort();
}

/// A `vbucket::error` message must be one non-empty line that starts with `prefix` (the file
/// name the caller passed), so the CLI can print it as its single line on stderr.
inline void check_message(std::string_view message, std::string_view prefix) {
  bool good = !message.empty() && message.substr(0, prefix.size()) == prefix;
  for (char c : message) good = good && c != '\n' && c != '\r';
  if (good) return;
  std::fprintf(stderr, "bad error message (want one line starting with \"%.*s\"): \"%.*s\"\n",
               static_cast<int>(prefix.size()), prefix.data(), static_cast<int>(message.size()),
               message.data());
  std::abort();
}

}  // namespace vbucket_fuzz

#define VBUCKET_FUZZ_CHECK(cond) \
  ((cond) ? static_cast<void>(0) : ::vbucket_fuzz::fail(#cond, __FILE__, __LINE__))
