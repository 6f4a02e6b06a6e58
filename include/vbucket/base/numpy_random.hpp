#pragma once
/// Bit-exact reproduction of `numpy.random.default_rng(seed).random()`: numpy's SeedSequence
/// turns the seed into PCG64 state, and PCG64 (XSL-RR output) drives `Generator.random()`.
/// Reference: numpy/random/bit_generator.pyx (SeedSequence), numpy/random/_pcg64.pyx and
/// numpy/random/src/pcg64/pcg64.h (PCG64), numpy/random/src/distributions (next_double).

#include <algorithm>    // std::max, std::min, std::reverse
#include <array>        // std::array
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint32_t, std::uint64_t
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/base/random_source.hpp"  // random_source, detail::independent_streams
#include "vbucket/detail/compiled.hpp"
#include "vbucket/detail/simd.hpp"  // VBUCKET_AVX2_DISPATCH, simd_path, detail::use_avx2
#include "vbucket/detail/u128.hpp"

// The intrinsics only where the vector path is defined (header-only code, vbucket::compiled).
#if VBUCKET_AVX2_DISPATCH && VBUCKET_HEADER_DEFINITIONS
#include <immintrin.h>  // AVX2 intrinsics (used only in target("avx2") functions)
#endif

namespace vbucket {

/// A non-negative integer of any size, held as numpy holds seed entropy: little-endian
/// 32-bit words, at least one word, no high zero words.
class big_seed {
 public:
  /// Zero.
  big_seed() : words_{0} {}

  /// A seed that fits in 64 bits.
  big_seed(std::uint64_t value) {  // NOLINT(google-explicit-constructor): seeds are numbers
    words_.push_back(static_cast<std::uint32_t>(value));
    if ((value >> 32) != 0) words_.push_back(static_cast<std::uint32_t>(value >> 32));
  }

  /// Parses a plain decimal integer (digits only: no sign, no spaces); throws vbucket::error.
  static VBUCKET_COMPILED_INLINE big_seed parse(std::string_view decimal);

  /// The value as little-endian 32-bit words (what numpy feeds to SeedSequence).
  std::span<const std::uint32_t> words() const noexcept { return words_; }

  /// The value in decimal.
  VBUCKET_COMPILED_INLINE std::string to_string() const;

  /// Equal values (the representation is canonical).
  friend bool operator==(const big_seed&, const big_seed&) = default;

 private:
  // this = this * factor + addend, growing by a word when needed.
  void multiply_add(std::uint32_t factor, std::uint32_t addend) {
    std::uint64_t carry = addend;
    for (std::uint32_t& word : words_) {
      const std::uint64_t product = std::uint64_t{word} * factor + carry;
      word = static_cast<std::uint32_t>(product);
      carry = product >> 32;
    }
    if (carry != 0) words_.push_back(static_cast<std::uint32_t>(carry));
    while (words_.size() > 1 && words_.back() == 0) words_.pop_back();
  }

  std::vector<std::uint32_t> words_;
};

#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE big_seed big_seed::parse(std::string_view decimal) {
  if (decimal.empty()) {
    throw error("seed is empty: expected a non-negative decimal integer");
  }
  for (std::size_t i = 0; i < decimal.size(); ++i) {
    const char c = decimal[i];
    if (c >= '0' && c <= '9') continue;
    if (i == 0 && (c == '-' || c == '+')) {
      throw error("seed \"" + std::string(decimal) +
                  "\" has a sign: expected a non-negative decimal integer without sign");
    }
    throw error("seed \"" + std::string(decimal) + "\" has a non-digit character at position " +
                std::to_string(i) + ": expected a non-negative decimal integer");
  }
  big_seed result;
  // Nine digits at a time keep chunk * 10^9 + carry inside 64 bits.
  std::size_t pos = 0;
  std::size_t chunk_len = decimal.size() % 9;
  if (chunk_len == 0) chunk_len = 9;
  while (pos < decimal.size()) {
    std::uint32_t chunk = 0;
    std::uint32_t scale = 1;
    for (std::size_t i = 0; i < chunk_len; ++i) {
      chunk = chunk * 10 + static_cast<std::uint32_t>(decimal[pos + i] - '0');
      scale *= 10;
    }
    result.multiply_add(scale, chunk);
    pos += chunk_len;
    chunk_len = 9;
  }
  return result;
}

VBUCKET_COMPILED_INLINE std::string big_seed::to_string() const {
  constexpr std::uint32_t kBillion = 1000000000;
  std::vector<std::uint32_t> rest = words_;
  std::string digits;  // least significant first, reversed at the end
  while (true) {
    // Divide rest by 10^9 in place, most significant word first.
    std::uint64_t remainder = 0;
    for (std::size_t i = rest.size(); i-- > 0;) {
      const std::uint64_t current = (remainder << 32) | rest[i];
      rest[i] = static_cast<std::uint32_t>(current / kBillion);
      remainder = current % kBillion;
    }
    while (rest.size() > 1 && rest.back() == 0) rest.pop_back();
    const bool last = rest.size() == 1 && rest[0] == 0;
    auto chunk = static_cast<std::uint32_t>(remainder);
    for (int i = 0; i < 9 && (!last || chunk != 0 || i == 0); ++i) {
      digits.push_back(static_cast<char>('0' + chunk % 10));
      chunk /= 10;
    }
    if (last) break;
  }
  std::reverse(digits.begin(), digits.end());
  return digits;
}
#endif  // VBUCKET_HEADER_DEFINITIONS

namespace detail {

// SeedSequence constants (numpy/random/bit_generator.pyx, after O'Neill's seed_seq_fe).
inline constexpr std::uint32_t kSeedInitA = 0x43b0d7e5;
inline constexpr std::uint32_t kSeedMultA = 0x931e8875;
inline constexpr std::uint32_t kSeedInitB = 0x8b51f9dd;
inline constexpr std::uint32_t kSeedMultB = 0x58f38ded;
inline constexpr std::uint32_t kSeedMixMultL = 0xca01f9dd;
inline constexpr std::uint32_t kSeedMixMultR = 0x4973f715;
inline constexpr std::size_t kSeedPoolSize = 4;
// Hashmix calls made before the first entropy word past the pool: one per pool word to fill
// it, then one per ordered pair of distinct pool words.
inline constexpr std::size_t kSeedFixedHashes = kSeedPoolSize + kSeedPoolSize * (kSeedPoolSize - 1);
// generate_state(4, uint64) draws eight 32-bit words.
inline constexpr std::size_t kSeedStateWords = 8;

using seed_pool = std::array<std::uint32_t, kSeedPoolSize>;

// hash_const before each hashmix call: it evolves independently of the data, so tabulating it
// removes a serial multiply chain from the hot path.
template <std::size_t N>
constexpr std::array<std::uint32_t, N> hash_constants(std::uint32_t init, std::uint32_t mult) {
  std::array<std::uint32_t, N> result{};
  for (std::size_t i = 0; i < N; ++i) {
    result[i] = init;
    init *= mult;
  }
  return result;
}
inline constexpr auto kHashConstA = hash_constants<kSeedFixedHashes + 1>(kSeedInitA, kSeedMultA);
inline constexpr auto kHashConstB = hash_constants<kSeedStateWords + 1>(kSeedInitB, kSeedMultB);

// numpy's hashmix with hash_const == before (and before * mult == after).
constexpr std::uint32_t hashmix(std::uint32_t value, std::uint32_t before,
                                std::uint32_t after) noexcept {
  value ^= before;
  value *= after;
  value ^= value >> 16;
  return value;
}

constexpr std::uint32_t mix(std::uint32_t x, std::uint32_t y) noexcept {
  std::uint32_t result = kSeedMixMultL * x - kSeedMixMultR * y;
  result ^= result >> 16;
  return result;
}

// The start of SeedSequence.mix_entropy, given the first kSeedPoolSize entropy words (zero
// where the entropy is shorter, which hashes exactly as numpy's padding): fill the pool, then
// each pool word in turn stirs the other three. Spelled out so that every hash constant is a
// literal and compilers keep the pool in registers on the hot path.
constexpr seed_pool mix_head(std::uint32_t w0, std::uint32_t w1, std::uint32_t w2,
                             std::uint32_t w3) noexcept {
  constexpr const auto& k = kHashConstA;
  std::uint32_t p0 = hashmix(w0, k[0], k[1]);
  std::uint32_t p1 = hashmix(w1, k[1], k[2]);
  std::uint32_t p2 = hashmix(w2, k[2], k[3]);
  std::uint32_t p3 = hashmix(w3, k[3], k[4]);
  p1 = mix(p1, hashmix(p0, k[4], k[5]));
  p2 = mix(p2, hashmix(p0, k[5], k[6]));
  p3 = mix(p3, hashmix(p0, k[6], k[7]));
  p0 = mix(p0, hashmix(p1, k[7], k[8]));
  p2 = mix(p2, hashmix(p1, k[8], k[9]));
  p3 = mix(p3, hashmix(p1, k[9], k[10]));
  p0 = mix(p0, hashmix(p2, k[10], k[11]));
  p1 = mix(p1, hashmix(p2, k[11], k[12]));
  p3 = mix(p3, hashmix(p2, k[12], k[13]));
  p0 = mix(p0, hashmix(p3, k[13], k[14]));
  p1 = mix(p1, hashmix(p3, k[14], k[15]));
  p2 = mix(p2, hashmix(p3, k[15], k[16]));
  return {p0, p1, p2, p3};
}
static_assert(kSeedFixedHashes == 16, "mix_head spells out a pool of four");

// The rest of SeedSequence.mix_entropy: an entropy word past the pool is hashed once per pool
// word, each time with a fresh hash_const (which starts at kHashConstA[kSeedFixedHashes]).
constexpr void mix_tail_word(seed_pool& pool, std::uint32_t& hash_const,
                             std::uint32_t word) noexcept {
  for (std::uint32_t& slot : pool) {
    const std::uint32_t before = hash_const;
    hash_const *= kSeedMultA;
    slot = mix(slot, hashmix(word, before, hash_const));
  }
}

// SeedSequence.mix_entropy over `length` entropy words produced in order by next_word();
// streaming them lets callers synthesize words (e.g. seed + offset) without a buffer.
template <class NextWord>
constexpr seed_pool mix_entropy(std::size_t length, NextWord&& next_word) noexcept {
  std::array<std::uint32_t, kSeedPoolSize> head{};
  for (std::size_t i = 0; i < std::min(length, kSeedPoolSize); ++i) head[i] = next_word();
  seed_pool pool = mix_head(head[0], head[1], head[2], head[3]);
  std::uint32_t hash_const = kHashConstA[kSeedFixedHashes];
  for (std::size_t i = kSeedPoolSize; i < length; ++i) mix_tail_word(pool, hash_const, next_word());
  return pool;
}

// SeedSequence.generate_state(4, np.uint64): 32-bit words paired little-endian.
constexpr std::array<std::uint64_t, 4> generate_state(const seed_pool& pool) noexcept {
  std::array<std::uint32_t, kSeedStateWords> words{};
  for (std::size_t i = 0; i < kSeedStateWords; ++i) {
    words[i] = hashmix(pool[i % kSeedPoolSize], kHashConstB[i], kHashConstB[i + 1]);
  }
  std::array<std::uint64_t, 4> state{};
  for (std::size_t i = 0; i < state.size(); ++i) {
    state[i] = words[2 * i] | (std::uint64_t{words[2 * i + 1]} << 32);
  }
  return state;
}

// Produces the little-endian words of seed + offset one at a time, carrying as it goes.
class offset_sum_words {
 public:
  offset_sum_words(std::span<const std::uint32_t> seed, u128 offset) noexcept
      : seed_(seed), offset_(offset) {}

  std::uint32_t operator()() noexcept {
    const std::uint64_t seed_word = index_ < seed_.size() ? seed_[index_] : 0u;
    const std::uint64_t sum = seed_word + static_cast<std::uint32_t>(offset_) + carry_;
    offset_ >>= 32;
    carry_ = sum >> 32;
    ++index_;
    return static_cast<std::uint32_t>(sum);
  }

 private:
  std::span<const std::uint32_t> seed_;
  u128 offset_;
  std::uint64_t carry_ = 0;
  std::size_t index_ = 0;
};

// Number of words of seed + offset as numpy would coerce it (no high zero words, at least one),
// given seed without high zero words.
inline std::size_t offset_sum_length(std::span<const std::uint32_t> seed, u128 offset) noexcept {
  std::size_t offset_length = 0;
  for (u128 rest = offset; rest != 0; rest >>= 32) ++offset_length;
  const std::size_t length = std::max({seed.size(), offset_length, std::size_t{1}});
  // The top word of the longer operand is non-zero, so the sum is `length` words long unless a
  // carry leaves the top. Offset words end by word 4; above that a carry survives only
  // through all-ones seed words.
  std::uint64_t carry = 0;
  for (std::size_t i = 0; i < std::min(length, kSeedPoolSize); ++i) {
    const std::uint64_t seed_word = i < seed.size() ? seed[i] : 0u;
    carry = (seed_word + static_cast<std::uint32_t>(offset >> (32 * i)) + carry) >> 32;
  }
  for (std::size_t i = kSeedPoolSize; carry != 0 && i < length; ++i) {
    carry = seed[i] == 0xffffffffu ? 1 : 0;
  }
  return length + static_cast<std::size_t>(carry);
}

// PCG_DEFAULT_MULTIPLIER_128 from numpy's pcg64.h.
inline constexpr u128 kPcgMultiplier =
    (u128{2549297995355413924ULL} << 64) | u128{4865540595714422341ULL};

}  // namespace detail

/// numpy.random.default_rng(seed): SeedSequence -> PCG64.
class numpy_rng {
 public:
  /// The whole state of the generator (PCG64's 128-bit state and odd increment).
  struct pcg64_state {
    u128 state = 0;
    u128 increment = 1;
  };

  /// The generator in the state `s` (as saved by `raw_state`).
  explicit numpy_rng(const pcg64_state& s) noexcept : state_(s.state), increment_(s.increment) {}

  /// The generator's state: `numpy_rng(g.raw_state())` continues as `g` does.
  [[nodiscard]] pcg64_state raw_state() const noexcept { return {state_, increment_}; }

  /// The state SeedSequence's generate_state(4, uint64) words `words` give PCG64.
  [[nodiscard]] static pcg64_state seeded_state(
      const std::array<std::uint64_t, 4>& words) noexcept {
    // numpy's pcg64_set_seed: words 0..1 are the initial state and 2..3 the stream, each with
    // the first word as the high half; then pcg_setseq_128_srandom_r.
    const u128 initial_state = (u128{words[0]} << 64) | words[1];
    const u128 stream = (u128{words[2]} << 64) | words[3];
    const u128 increment = (stream << 1) | 1u;
    // One step from state 0 (state = increment), plus the initial state, then one more step.
    return {(increment + initial_state) * detail::kPcgMultiplier + increment, increment};
  }

  /// default_rng(seed) for a seed that fits in 64 bits.
  explicit numpy_rng(std::uint64_t seed) noexcept {
    // Missing words hash exactly like zero words, so both halves can always be passed.
    seed_from(detail::mix_head(static_cast<std::uint32_t>(seed),
                               static_cast<std::uint32_t>(seed >> 32), 0, 0));
  }

  /// SeedSequence(entropy) for an explicit uint32 entropy array, taken verbatim (high zero
  /// words count when there are more than four words, as in numpy).
  explicit numpy_rng(std::span<const std::uint32_t> entropy_words) noexcept {
    std::size_t next = 0;
    seed_from(detail::mix_entropy(entropy_words.size(),
                                  [&]() noexcept { return entropy_words[next++]; }));
  }

  /// default_rng(seed) for a seed of any size.
  explicit numpy_rng(const big_seed& seed) noexcept : numpy_rng(seed.words()) {}

  /// default_rng(seed + offset) without allocating: the sum is formed as the seed is mixed.
  numpy_rng(const big_seed& seed, u128 offset) noexcept {
    const std::span<const std::uint32_t> words = seed.words();
    if (words.size() <= 4) {
      // Common case: the sum is one 128-bit add plus a carry word. Up to the pool size,
      // missing words hash like zero words, so four words stand for any shorter sum.
      u128 low = 0;
      for (std::size_t i = words.size(); i-- > 0;) low = (low << 32) | words[i];
      const u128 sum = low + offset;
      detail::seed_pool pool = detail::mix_head(
          static_cast<std::uint32_t>(sum), static_cast<std::uint32_t>(sum >> 32),
          static_cast<std::uint32_t>(sum >> 64), static_cast<std::uint32_t>(sum >> 96));
      if (sum < low) {  // the carry is a fifth entropy word
        std::uint32_t hash_const = detail::kHashConstA[detail::kSeedFixedHashes];
        detail::mix_tail_word(pool, hash_const, 1);
      }
      seed_from(pool);
      return;
    }
    seed_from(detail::mix_entropy(detail::offset_sum_length(words, offset),
                                  detail::offset_sum_words(words, offset)));
  }

  /// The next raw 64-bit output, as Generator.bit_generator.random_raw().
  std::uint64_t next_u64() noexcept {
    step();
    // XSL-RR: fold the halves, then rotate right by the top six bits.
    const auto folded =
        static_cast<std::uint64_t>(state_ >> 64) ^ static_cast<std::uint64_t>(state_);
    const auto rotation = static_cast<unsigned>(state_ >> 122);
    return (folded >> rotation) | (folded << ((64u - rotation) & 63u));
  }

  /// The next double in [0, 1), as Generator.random(): the top 53 bits scaled by 2^-53.
  double random() noexcept {
    // Through a signed integer (the value fits): one conversion instruction on x86-64.
    return static_cast<double>(static_cast<std::int64_t>(next_u64() >> 11)) *
           (1.0 / 9007199254740992.0);
  }

 private:
  void step() noexcept { state_ = state_ * detail::kPcgMultiplier + increment_; }

  void seed_from(const detail::seed_pool& pool) noexcept {
    const pcg64_state s = seeded_state(detail::generate_state(pool));
    state_ = s.state;
    increment_ = s.increment;
  }

  u128 state_ = 0;
  u128 increment_ = 0;
};

/// Open-Sora's NumPy draws: sample i, sub-stream s is `default_rng(seed + i · num_bucket + s)`.
/// `seed` is Open-Sora's `seed + epoch` and may be any non-negative integer.
class numpy_source {
 public:
  numpy_source(big_seed seed, std::uint64_t num_bucket)
      : seed_(std::move(seed)), num_bucket_(num_bucket) {}

  [[nodiscard]] numpy_rng stream(std::uint64_t sample, std::uint64_t sub) const noexcept {
    return numpy_rng(seed_, static_cast<u128>(sample) * num_bucket_ + sub);
  }
  [[nodiscard]] const big_seed& seed() const noexcept { return seed_; }
  [[nodiscard]] std::uint64_t num_bucket() const noexcept { return num_bucket_; }

  /// The states of the streams (first + j, sub) for j < out.size(): out[j] =
  /// `stream(first + j, sub).raw_state()`, a block at a time. On a CPU with AVX2 (`path` =
  /// `simd_path::automatic`) the SeedSequence hashing of eight samples runs in the lanes of one
  /// register; both paths give the same states, bit for bit (the same 32-bit integer operations).
  /// `simd_path::scalar` forces the scalar path, `simd_path::avx2` the vector one where the CPU
  /// has it.
  VBUCKET_COMPILED_INLINE void seed_streams(std::uint64_t first, std::uint64_t sub,
                                            std::span<numpy_rng::pcg64_state> out,
                                            simd_path path = simd_path::automatic) const noexcept;

 private:
  big_seed seed_;
  std::uint64_t num_bucket_;
};

#if VBUCKET_AVX2_DISPATCH && VBUCKET_HEADER_DEFINITIONS
// Templates only so that header-only code compiles them where they are used (GCC analyses a
// non-template target("avx2") function with intrinsics in every translation unit).
namespace detail::avx2_seed {
using v8 = __m256i;
template <int = 0>
[[gnu::target("avx2")]] inline v8 broadcast(std::uint32_t k) noexcept {
  return _mm256_set1_epi32(static_cast<int>(k));
}
// hashmix in each lane.
template <int = 0>
[[gnu::target("avx2")]] inline v8 hash(v8 value, std::uint32_t before,
                                       std::uint32_t after) noexcept {
  value = _mm256_mullo_epi32(_mm256_xor_si256(value, broadcast(before)), broadcast(after));
  return _mm256_xor_si256(value, _mm256_srli_epi32(value, 16));
}
// mix in each lane.
template <int = 0>
[[gnu::target("avx2")]] inline v8 mixed(v8 x, v8 y) noexcept {
  const v8 r = _mm256_sub_epi32(_mm256_mullo_epi32(x, broadcast(kSeedMixMultL)),
                                _mm256_mullo_epi32(y, broadcast(kSeedMixMultR)));
  return _mm256_xor_si256(r, _mm256_srli_epi32(r, 16));
}
}  // namespace detail::avx2_seed

namespace detail {
/// SeedSequence for eight entropies of at most four words, a 32-bit lane each: entropy[w][k] is
/// word w of entropy k (0 where it is shorter); state[i][k] is word i of its
/// generate_state(4, uint64) as 32-bit words. The same operations as mix_head and
/// generate_state, lane by lane.
template <int = 0>
[[gnu::target("avx2")]] inline void seed_state_avx2(const std::uint32_t (&entropy)[4][8],
                                                    std::uint32_t (&state)[kSeedStateWords][8]) {
  using namespace avx2_seed;
  constexpr const auto& k = kHashConstA;
  v8 p0 = hash(_mm256_load_si256(reinterpret_cast<const v8*>(entropy[0])), k[0], k[1]);
  v8 p1 = hash(_mm256_load_si256(reinterpret_cast<const v8*>(entropy[1])), k[1], k[2]);
  v8 p2 = hash(_mm256_load_si256(reinterpret_cast<const v8*>(entropy[2])), k[2], k[3]);
  v8 p3 = hash(_mm256_load_si256(reinterpret_cast<const v8*>(entropy[3])), k[3], k[4]);
  p1 = mixed(p1, hash(p0, k[4], k[5]));
  p2 = mixed(p2, hash(p0, k[5], k[6]));
  p3 = mixed(p3, hash(p0, k[6], k[7]));
  p0 = mixed(p0, hash(p1, k[7], k[8]));
  p2 = mixed(p2, hash(p1, k[8], k[9]));
  p3 = mixed(p3, hash(p1, k[9], k[10]));
  p0 = mixed(p0, hash(p2, k[10], k[11]));
  p1 = mixed(p1, hash(p2, k[11], k[12]));
  p3 = mixed(p3, hash(p2, k[12], k[13]));
  p0 = mixed(p0, hash(p3, k[13], k[14]));
  p1 = mixed(p1, hash(p3, k[14], k[15]));
  p2 = mixed(p2, hash(p3, k[15], k[16]));
  const v8 pool[kSeedPoolSize] = {p0, p1, p2, p3};
  for (std::size_t i = 0; i < kSeedStateWords; ++i)
    _mm256_store_si256(reinterpret_cast<v8*>(state[i]),
                       hash(pool[i % kSeedPoolSize], kHashConstB[i], kHashConstB[i + 1]));
}
}  // namespace detail
#endif  // VBUCKET_AVX2_DISPATCH && VBUCKET_HEADER_DEFINITIONS

#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE void numpy_source::seed_streams(std::uint64_t first, std::uint64_t sub,
                                                        std::span<numpy_rng::pcg64_state> out,
                                                        simd_path path) const noexcept {
  std::size_t j = 0;
#if VBUCKET_AVX2_DISPATCH
  const std::span<const std::uint32_t> words = seed_.words();
  if (words.size() <= 4 && out.size() >= 8 && detail::use_avx2(path)) {
    u128 low = 0;
    for (std::size_t i = words.size(); i-- > 0;) low = (low << 32) | words[i];
    alignas(32) std::uint32_t entropy[4][8];
    alignas(32) std::uint32_t state[detail::kSeedStateWords][8];
    for (; j + 8 <= out.size(); j += 8) {
      unsigned carried = 0;  // lanes whose sum has a fifth word (done on the scalar path)
      for (std::size_t k = 0; k < 8; ++k) {
        const u128 sum = low + (static_cast<u128>(first + j + k) * num_bucket_ + sub);
        carried |= static_cast<unsigned>(sum < low) << k;
        for (std::size_t w = 0; w < 4; ++w)
          entropy[w][k] = static_cast<std::uint32_t>(sum >> (32 * w));
      }
      detail::seed_state_avx2(entropy, state);
      for (std::size_t k = 0; k < 8; ++k) {
        out[j + k] = numpy_rng::seeded_state({state[0][k] | std::uint64_t{state[1][k]} << 32,
                                              state[2][k] | std::uint64_t{state[3][k]} << 32,
                                              state[4][k] | std::uint64_t{state[5][k]} << 32,
                                              state[6][k] | std::uint64_t{state[7][k]} << 32});
      }
      for (std::size_t k = 0; k < 8; ++k)
        if ((carried >> k) & 1u) out[j + k] = stream(first + j + k, sub).raw_state();
    }
  }
#endif
  (void)path;
  for (; j < out.size(); ++j) out[j] = stream(first + j, sub).raw_state();
}
#endif  // VBUCKET_HEADER_DEFINITIONS

static_assert(random_source<numpy_source>);

namespace detail {
template <>
inline constexpr bool independent_streams<numpy_source> = true;
}  // namespace detail

}  // namespace vbucket
