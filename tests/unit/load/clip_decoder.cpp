/// Tests of vbucket/load/clip_decoder.hpp's frame choice: `clip_frame_index` against Open-Sora's
/// `np.linspace(start, start + T * interval - 1, T, dtype=int)`, computed here independently in
/// exact integer arithmetic that rounds as IEEE double does (NumPy computes the step
/// (stop - start) / (T - 1), each j * step, then + start, each rounded to nearest-even, truncates,
/// and sets the last index to stop). Plain floor division is not NumPy's: it differs for about
/// 1.4 % of the (start, T, interval) of real clips (e.g. T = 36, interval 8: index 15 is 122 in
/// NumPy, 123 exactly), so the reference models the roundings.

#include "vbucket/load/clip_decoder.hpp"

#include <doctest/doctest.h>

#include <bit>      // std::bit_width
#include <cstdint>  // std::int64_t, std::uint64_t
#include <random>   // std::mt19937_64, std::uniform_int_distribution
#include <string>   // std::string

namespace {

__extension__ typedef unsigned __int128 u128;  // GCC and Clang

/// A positive binary fraction m · 2^e.
struct binary {
  u128 m = 0;
  int e = 0;
};

int bits(u128 v) {
  const auto hi = static_cast<std::uint64_t>(v >> 64);
  return static_cast<int>(hi != 0 ? 64 + std::bit_width(hi)
                                  : std::bit_width(static_cast<std::uint64_t>(v)));
}

/// `x` rounded to 53 significant bits, ties to even (what a double holds).
binary round53(binary x) {
  const int n = bits(x.m);
  if (n <= 53) return x;
  const int t = n - 53;
  u128 q = x.m >> t;
  const u128 rem = x.m & ((u128{1} << t) - 1), half = u128{1} << (t - 1);
  if (rem > half || (rem == half && (q & 1) != 0)) ++q;
  return {q, x.e + t};
}

/// Open-Sora's frame j, as NumPy's float64 linspace computes it, in integers.
std::int64_t numpy_linspace_index(std::int64_t start, std::int64_t frames, std::int64_t interval,
                                  std::int64_t j) {
  if (frames == 1) return start;
  const std::int64_t stop = start + frames * interval - 1;
  if (j == frames - 1) return stop;
  const auto delta = static_cast<u128>(stop - start), div = static_cast<u128>(frames - 1);
  // step = delta / div: 80 more bits than needed, and a sticky bit for the remainder
  const u128 scaled = delta << 80;
  const binary step = round53({(scaled / div) << 1 | (scaled % div != 0 ? 1 : 0), -81});
  const binary product = round53({step.m * static_cast<u128>(j), step.e});
  // + start, exactly (product.e < 0 here: the product is below 2^53), then rounded
  binary sum{product.m, product.e};
  if (sum.e < 0) {
    sum.m += static_cast<u128>(start) << (-sum.e);
  } else {
    sum.m = (sum.m << sum.e) + static_cast<u128>(start);
    sum.e = 0;
  }
  sum = round53(sum);
  const u128 whole = sum.e < 0 ? sum.m >> (-sum.e) : sum.m << sum.e;  // truncation (≥ 0)
  return static_cast<std::int64_t>(whole);
}

TEST_CASE("clip_frame_index: opensora is NumPy's linspace for random (start, T, interval)") {
  std::mt19937_64 gen(20261128);
  std::uniform_int_distribution<std::int64_t> start_of(0, 200000), frames_of(1, 300),
      interval_of(1, 12), small_start(0, 64);
  std::int64_t checked = 0, off_floor = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const std::int64_t start = trial % 2 == 0 ? small_start(gen) : start_of(gen);
    const std::int64_t t = frames_of(gen), interval = interval_of(gen);
    std::int64_t prev = -1;
    for (std::int64_t j = 0; j < t; ++j) {
      const std::int64_t got =
          vbucket::clip_frame_index(vbucket::frame_choice::opensora, start, t, interval, j);
      const std::int64_t want = numpy_linspace_index(start, t, interval, j);
      if (got != want) {
        FAIL_CHECK("start " << start << " T " << t << " interval " << interval << " j " << j << ": "
                            << got << " != NumPy's " << want);
      }
      // strictly increasing, inside [start, start + T * interval - 1]
      CHECK(got > prev);
      CHECK(got <= start + t * interval - 1);
      prev = got;
      if (t > 1 && j < t - 1 && want != start + (j * (t * interval - 1)) / (t - 1)) ++off_floor;
      ++checked;
    }
  }
  MESSAGE(checked << " indices checked; " << off_floor << " where NumPy is not the exact floor");
  CHECK(off_floor > 0);  // the reference models NumPy's rounding, not the exact quotient
}

TEST_CASE("clip_frame_index: the worked cases, and stride") {
  using vbucket::frame_choice;
  // np.linspace(0, 33, 17, dtype=int) at interval 2: the last frame one later than the stride's
  CHECK(vbucket::clip_frame_index(frame_choice::opensora, 0, 17, 2, 16) == 33);
  CHECK(vbucket::clip_frame_index(frame_choice::stride, 0, 17, 2, 16) == 32);
  CHECK(vbucket::clip_last_frame(frame_choice::opensora, 5, 4, 3) == 5 + 12 - 1);
  // interval 1: the same frames either way
  for (std::int64_t j = 0; j < 9; ++j)
    CHECK(vbucket::clip_frame_index(frame_choice::opensora, 7, 9, 1, j) == 7 + j);
  // one frame: the start
  CHECK(vbucket::clip_frame_index(frame_choice::opensora, 11, 1, 4, 0) == 11);
  // NumPy's rounding (numpy 1.24, np.linspace(0, 287, 36, dtype=int)[15]): 15 · 287 / 35 is
  // exactly 123, but 15 · fl(8.2) + 0 rounds to just below it, so NumPy takes 122
  CHECK(numpy_linspace_index(0, 36, 8, 15) == 122);
  CHECK(vbucket::clip_frame_index(frame_choice::opensora, 0, 36, 8, 15) == 122);
  CHECK(vbucket::parse_frame_choice("opensora") == frame_choice::opensora);
  CHECK(vbucket::parse_frame_choice("stride") == frame_choice::stride);
  CHECK_FALSE(vbucket::parse_frame_choice("linspace").has_value());
  CHECK(std::string(vbucket::frame_choice_name(frame_choice::opensora)) == "opensora");
}

}  // namespace
