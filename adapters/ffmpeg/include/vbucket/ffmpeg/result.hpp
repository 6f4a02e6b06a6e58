#pragma once
/// `result<T>`: a value or an error message, what vbucket::ffmpeg returns for every file (bad
/// media is data, not a programmer error, so nothing throws for it).
///
///     auto info = vbucket::ffmpeg::probe("clip.mp4");
///     if (!info) std::puts(info.error().c_str()); else use(info->num_frames);

#include <optional>  // std::optional
#include <string>    // std::string
#include <utility>   // std::move

#include "vbucket/base/error.hpp"

namespace vbucket::ffmpeg {

template <class T>
class result {
 public:
  result(T value) : value_(std::move(value)) {}  // NOLINT: implicit, like std::expected
  /// A failed result. `message` is one line naming the file and what is wrong.
  /// `transient`: the source could not be reached (a network failure that may pass).
  static result failure(std::string message, bool transient = false) {
    result r;
    r.error_ = std::move(message);
    r.transient_ = transient;
    return r;
  }

  [[nodiscard]] bool ok() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  /// The value; throws `vbucket::error` with the message when the result is an error.
  [[nodiscard]] const T& value() const& {
    if (!value_) throw vbucket::error(error_);
    return *value_;
  }
  [[nodiscard]] T&& value() && {
    if (!value_) throw vbucket::error(error_);
    return std::move(*value_);
  }
  [[nodiscard]] const T& operator*() const& { return value(); }
  [[nodiscard]] const T* operator->() const { return &value(); }
  /// The error message (empty when ok()).
  [[nodiscard]] const std::string& error() const noexcept { return error_; }
  /// Whether the error is the network's (connection refused or lost, a 5xx reply, a timeout):
  /// the same call may succeed later. A 404, bad data or a decode error is not.
  [[nodiscard]] bool transient() const noexcept { return transient_; }

 private:
  result() = default;
  std::optional<T> value_;
  std::string error_;
  bool transient_ = false;
};

}  // namespace vbucket::ffmpeg
