#pragma once
/// Open-Sora's "idx-T-H-W" sample strings, as its batch samplers yield them for its dataset's
/// __getitem__: encoding a batch, and decoding one string.

#include <cstdint>      // std::uint32_t, std::uint64_t, std::int64_t
#include <limits>       // std::numeric_limits
#include <optional>     // std::optional
#include <string>       // std::string, std::to_string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/bucket/batch.hpp"

namespace vbucket {

/// One decoded Open-Sora sample string.
struct indexed_sample {
  std::uint64_t index = 0;
  std::int64_t frames = 0;
  std::int64_t height = 0;
  std::int64_t width = 0;
  friend constexpr bool operator==(const indexed_sample&, const indexed_sample&) = default;
};

/// "idx-T-H-W", as Open-Sora's batch samplers yield for its dataset's __getitem__.
inline std::string encode_opensora_index(const indexed_sample& s) {
  return std::to_string(s.index) + "-" + std::to_string(s.frames) + "-" + std::to_string(s.height) +
         "-" + std::to_string(s.width);
}

/// Every sample of a batch as "idx-T-H-W".
inline std::vector<std::string> encode_opensora_batch(const batch& b) {
  std::vector<std::string> out;
  out.reserve(b.indices.size());
  for (std::uint32_t i : b.indices)
    out.push_back(encode_opensora_index({i, b.frames, b.height, b.width}));
  return out;
}

/// Parses "idx-T-H-W" (four non-negative decimal integers); nullopt when malformed.
constexpr std::optional<indexed_sample> try_decode_opensora_index(std::string_view s) noexcept {
  std::uint64_t v[4] = {0, 0, 0, 0};
  std::size_t pos = 0;
  for (int f = 0; f < 4; ++f) {
    if (f > 0) {
      if (pos >= s.size() || s[pos] != '-') return std::nullopt;
      ++pos;
    }
    const std::size_t start = pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      const auto digit = static_cast<std::uint64_t>(s[pos] - '0');
      const std::uint64_t limit =
          f == 0 ? std::numeric_limits<std::uint64_t>::max()
                 : static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
      if (v[f] > (limit - digit) / 10) return std::nullopt;
      v[f] = v[f] * 10 + digit;
      ++pos;
    }
    if (pos == start) return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  return indexed_sample{v[0], static_cast<std::int64_t>(v[1]), static_cast<std::int64_t>(v[2]),
                        static_cast<std::int64_t>(v[3])};
}

/// As `try_decode_opensora_index`; throws `vbucket::error` quoting the string when malformed.
inline indexed_sample decode_opensora_index(std::string_view s) {
  if (auto r = try_decode_opensora_index(s)) return *r;
  throw error("\"" + std::string(s) + "\" is not an Open-Sora sample string \"idx-T-H-W\"");
}

}  // namespace vbucket
