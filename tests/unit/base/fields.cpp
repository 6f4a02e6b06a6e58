// Tensor files of include/vbucket/base/fields.hpp: a header that lies about its size is refused
// with a message naming the file (so that the Loader substitutes the clip), never read as 0 bytes.
#include "vbucket/base/fields.hpp"

#include <doctest/doctest.h>

#include <cstdint>     // std::uint64_t
#include <filesystem>  // std::filesystem::temp_directory_path
#include <fstream>     // std::ofstream
#include <optional>    // std::optional
#include <string>      // std::string

namespace {

/// A .safetensors file of one U8 tensor "x" with `shape` (JSON) and data_offsets [0, bytes].
std::string safetensors(const std::string& name, const std::string& shape, std::uint64_t bytes) {
  const std::string header = R"({"x": {"dtype": "U8", "shape": )" + shape +
                             R"(, "data_offsets": [0, )" + std::to_string(bytes) + "]}}";
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream f(path, std::ios::binary);
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  f << header << std::string(bytes, '\x07');
  return path.string();
}

}  // namespace

TEST_CASE("fields: a safetensors shape whose element count overflows is refused, naming it") {
  vbucket::field_tensor t;
  // 2^32 x 2^32 elements: 2^64, 0 in 64-bit arithmetic, which 0 bytes of data would "hold".
  const std::string huge = safetensors("vbucket_huge.safetensors", "[4294967296, 4294967296]", 0);
  const std::optional<std::string> e = vbucket::read_safetensors(huge, "x", t);
  REQUIRE(e.has_value());
  CHECK(e->find("vbucket_huge.safetensors: tensor x: shape (4294967296, 4294967296) is too "
                "large") != std::string::npos);
  const std::string negative = safetensors("vbucket_neg.safetensors", "[-2, -3]", 6);
  REQUIRE(vbucket::read_safetensors(negative, "x", t).has_value());
  // A true shape reads.
  const std::string fine = safetensors("vbucket_fine.safetensors", "[2, 3]", 6);
  CHECK_FALSE(vbucket::read_safetensors(fine, "x", t).has_value());
  CHECK(t.data.size() == 6);
}
