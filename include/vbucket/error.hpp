#pragma once
/// Errors at the API edge: bad data (config, metadata, files) is reported by throwing
/// `vbucket::error`, whose message names the file, key or row and says what is wrong.
/// Programmer errors (violated preconditions) are assertions, not errors.

#include <stdexcept>  // std::runtime_error
#include <string>     // std::string

namespace vbucket {

/// The one exception type vbucket throws for bad input. `what()` is a single line.
class error : public std::runtime_error {
 public:
  explicit error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace vbucket
