#pragma once
/// Errors at the API edge: bad data (config, metadata, files) is reported by throwing
/// `vbucket::error`, whose message names the file, key or row and says what is wrong.
/// Programmer errors (violated preconditions) are assertions, not errors.

#include <stdexcept>    // std::runtime_error
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "vbucket/detail/compiled.hpp"

namespace vbucket {

/// `text` on one line: control characters (a newline in a JSON key or a CSV field, DEL) are
/// written as escapes (`\n`, `\r`, `\t`, `\xNN`). The one escaper of every message: errors,
/// values quoted in messages, the CLI's lines.
[[nodiscard]] VBUCKET_COMPILED_INLINE std::string escape_control(std::string_view text);

/// The one exception type vbucket throws for bad input. `what()` is a single line: control
/// characters that reach the message from the input (a newline in a JSON key or a CSV field)
/// are written as escapes (`\n`, `\r`, `\t`, `\xNN`), so a tool can print it as one line.
class error : public std::runtime_error {
 public:
  VBUCKET_COMPILED_INLINE explicit error(const std::string& message);
};

#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE error::error(const std::string& message)
    : std::runtime_error(escape_control(message)) {}

VBUCKET_COMPILED_INLINE std::string escape_control(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 0xf];
    }
  }
  return out;
}
#endif

}  // namespace vbucket
