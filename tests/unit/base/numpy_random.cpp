#include "vbucket/base/numpy_random.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

/// What numpy produced for one entropy value (see tests/data/gen_numpy_vectors.py).
struct expected_stream {
  std::vector<std::uint64_t> random_bits;  // default_rng(x).random() x5, as IEEE bits
  std::vector<std::uint64_t> raw;          // PCG64(x).random_raw() x3
};

struct vector_line {
  std::string text;
  std::string kind;
  std::vector<std::string> args;  // fields between the kind and the outputs
  expected_stream expected;
};

std::vector<vector_line> load_vectors() {
  const std::string path = std::string(VBUCKET_TEST_DATA_DIR) + "/numpy_random_vectors.txt";
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  std::vector<vector_line> lines;
  std::string text;
  while (std::getline(in, text)) {
    if (text.empty() || text[0] == '#') continue;
    std::istringstream fields(text);
    std::vector<std::string> tokens;
    for (std::string token; fields >> token;) tokens.push_back(token);
    REQUIRE_MESSAGE(tokens.size() > 9, "short line: " << text);
    vector_line line;
    line.text = text;
    line.kind = tokens[0];
    line.args.assign(tokens.begin() + 1, tokens.end() - 8);
    for (std::size_t i = tokens.size() - 8; i < tokens.size() - 3; ++i) {
      // float.hex output: strtod reads hex floats exactly.
      line.expected.random_bits.push_back(
          std::bit_cast<std::uint64_t>(std::strtod(tokens[i].c_str(), nullptr)));
    }
    for (std::size_t i = tokens.size() - 3; i < tokens.size(); ++i) {
      line.expected.raw.push_back(std::stoull(tokens[i]));
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

/// Checks a freshly constructed generator pair against numpy: `make` builds a new one per call.
template <class Make>
void check_stream(const expected_stream& expected, Make make) {
  vbucket::numpy_rng values = make();
  for (const std::uint64_t bits : expected.random_bits) {
    CHECK(std::bit_cast<std::uint64_t>(values.random()) == bits);
  }
  vbucket::numpy_rng raw = make();
  for (const std::uint64_t word : expected.raw) CHECK(raw.next_u64() == word);
}

vbucket::u128 to_u128(const vbucket::big_seed& value) {
  REQUIRE(value.words().size() <= 4);
  vbucket::u128 result = 0;
  for (std::size_t i = value.words().size(); i-- > 0;) result = (result << 32) | value.words()[i];
  return result;
}

std::optional<std::uint64_t> to_u64(const vbucket::big_seed& value) {
  if (value.words().size() > 2) return std::nullopt;
  std::uint64_t result = 0;
  for (std::size_t i = value.words().size(); i-- > 0;) result = (result << 32) | value.words()[i];
  return result;
}

}  // namespace

TEST_CASE("numpy_rng matches numpy default_rng for integer seeds") {
  std::size_t count = 0;
  for (const vector_line& line : load_vectors()) {
    if (line.kind != "seed") continue;
    INFO(line.text);
    REQUIRE(line.args.size() == 1);
    const vbucket::big_seed seed = vbucket::big_seed::parse(line.args[0]);
    CHECK(seed.to_string() == line.args[0]);
    check_stream(line.expected, [&] { return vbucket::numpy_rng(seed); });
    check_stream(line.expected, [&] { return vbucket::numpy_rng(seed, 0); });
    check_stream(line.expected, [&] { return vbucket::numpy_rng(seed.words()); });
    if (const std::optional<std::uint64_t> small = to_u64(seed)) {
      CHECK(vbucket::big_seed(*small) == seed);
      check_stream(line.expected, [&] { return vbucket::numpy_rng(*small); });
    }
    ++count;
  }
  CHECK(count >= 200);
}

TEST_CASE("numpy_rng(seed, offset) matches numpy default_rng(seed + offset)") {
  std::size_t count = 0;
  for (const vector_line& line : load_vectors()) {
    if (line.kind != "offset") continue;
    INFO(line.text);
    REQUIRE(line.args.size() == 3);
    const vbucket::big_seed seed = vbucket::big_seed::parse(line.args[0]);
    const vbucket::u128 offset = to_u128(vbucket::big_seed::parse(line.args[1]));
    const vbucket::big_seed sum = vbucket::big_seed::parse(line.args[2]);
    check_stream(line.expected, [&] { return vbucket::numpy_rng(seed, offset); });
    check_stream(line.expected, [&] { return vbucket::numpy_rng(sum); });
    ++count;
  }
  CHECK(count >= 10);
}

TEST_CASE("numpy_rng(entropy words) matches numpy SeedSequence(uint32 array)") {
  std::size_t count = 0;
  for (const vector_line& line : load_vectors()) {
    if (line.kind != "words") continue;
    INFO(line.text);
    REQUIRE(!line.args.empty());
    const auto length = static_cast<std::size_t>(std::stoul(line.args[0]));
    REQUIRE(line.args.size() == length + 1);
    std::vector<std::uint32_t> words;
    for (std::size_t i = 1; i <= length; ++i) {
      words.push_back(static_cast<std::uint32_t>(std::stoul(line.args[i])));
    }
    check_stream(line.expected, [&] { return vbucket::numpy_rng(std::span(words)); });
    ++count;
  }
  CHECK(count >= 5);
}

TEST_CASE("numpy_rng(seed, offset) equals numpy_rng(seed + offset) across word boundaries") {
  // Sums computed here by big_seed parsing, independent of the offset path.
  struct sample {
    const char* seed;
    vbucket::u128 offset;
    const char* sum;
  };
  const vbucket::u128 all_ones = ~vbucket::u128{0};
  const sample samples[] = {
      {"4294967295", 1, "4294967296"},
      {"18446744073709551615", 1, "18446744073709551616"},
      {"340282366920938463463374607431768211455", 1, "340282366920938463463374607431768211456"},
      {"340282366920938463463374607431768211455", all_ones,
       "680564733841876926926749214863536422910"},
      {"0", all_ones, "340282366920938463463374607431768211455"},
  };
  for (const sample& s : samples) {
    INFO(s.seed << " + offset = " << s.sum);
    vbucket::numpy_rng via_offset(vbucket::big_seed::parse(s.seed), s.offset);
    vbucket::numpy_rng via_sum(vbucket::big_seed::parse(s.sum));
    for (int i = 0; i < 4; ++i) CHECK(via_offset.next_u64() == via_sum.next_u64());
  }
}

TEST_CASE("big_seed parses and prints decimal integers") {
  CHECK(vbucket::big_seed().to_string() == "0");
  CHECK(vbucket::big_seed().words().size() == 1);
  CHECK(vbucket::big_seed::parse("0") == vbucket::big_seed());
  CHECK(vbucket::big_seed::parse("000") == vbucket::big_seed());
  CHECK(vbucket::big_seed::parse("0042").to_string() == "42");
  CHECK(vbucket::big_seed::parse("1000000000").to_string() == "1000000000");
  CHECK(vbucket::big_seed::parse("1000000000000000000").to_string() == "1000000000000000000");

  const vbucket::big_seed two_32 = vbucket::big_seed::parse("4294967296");
  REQUIRE(two_32.words().size() == 2);
  CHECK(two_32.words()[0] == 0);
  CHECK(two_32.words()[1] == 1);
  CHECK(two_32 == vbucket::big_seed(std::uint64_t{1} << 32));

  const std::uint64_t max64 = std::numeric_limits<std::uint64_t>::max();
  CHECK(vbucket::big_seed(max64).to_string() == "18446744073709551615");
  CHECK(vbucket::big_seed::parse("18446744073709551616").words().size() == 3);

  for (const char* text :
       {"1", "9", "10", "999999999", "1000000001", "4294967295", "123456789012345678901234567890",
        "2037035976334486086268445688409378161051468393665936250636140449354381299763336706183"
        "397376",  // 2^300
        "100000000000000000000000000000000000000000000000000000000000000000000000000000001"}) {
    INFO(text);
    const vbucket::big_seed value = vbucket::big_seed::parse(text);
    CHECK(value.to_string() == text);
    CHECK(value.words().back() != 0);
  }
}

TEST_CASE("big_seed::parse rejects anything but plain digits") {
  for (const char* text : {"", "-1", "+1", "12a", " 5", "5 ", "1.0", "0x10"}) {
    INFO("input: \"" << text << "\"");
    CHECK_THROWS_AS(vbucket::big_seed::parse(text), vbucket::error);
    try {
      vbucket::big_seed::parse(text);
    } catch (const vbucket::error& e) {
      const std::string message = e.what();
      CHECK(message.find('\n') == std::string::npos);
      CHECK(message.find("seed") != std::string::npos);
    }
  }
}
