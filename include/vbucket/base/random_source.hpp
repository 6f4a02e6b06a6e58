#pragma once
/// What a random source for bucket rules is (`random_source`): for sample i and sub-stream s,
/// a generator of uniform doubles in [0, 1). The generic part and the counter-based source:
///  - `fast_source`: counter-based, keyed by (seed, epoch, sample, sub-stream, draw), so any
///    thread or rank computes any sample's draws alone, and epochs never share streams.
/// Open-Sora's draws (`numpy_source`) are in `numpy_random.hpp`; `random.hpp` has both.

#include <concepts>     // std::same_as
#include <cstdint>      // std::uint64_t
#include <type_traits>  // std::is_same_v

namespace vbucket {

/// A generator of uniform doubles in [0, 1) (`random()`), advancing on each call.
template <class G>
concept uniform_stream = requires(G& g) {
  { g.random() } -> std::same_as<double>;
};

/// A keyed family of streams. Semantic requirements: `stream(i, s)` depends only on the
/// source's key and (i, s), never on call order or thread, so results are the same
/// whatever the thread count.
///
///     struct my_source { my_gen stream(std::uint64_t sample, std::uint64_t sub) const; };
///     static_assert(vbucket::random_source<my_source>);
template <class S>
concept random_source = requires(const S& s, std::uint64_t i) {
  { s.stream(i, i) } -> uniform_stream;
};

namespace detail {
/// SplitMix64's finaliser (Stafford's Mix13): a bijection on 64-bit words with full avalanche.
constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
inline constexpr std::uint64_t golden_gamma = 0x9e3779b97f4a7c15ULL;
constexpr double to_unit_double(std::uint64_t x) noexcept {
  // The top 53 bits fit a signed integer, which x86-64 converts in one instruction (an
  // unsigned 64-bit conversion takes a branch and several).
  return static_cast<double>(static_cast<std::int64_t>(x >> 11)) * 0x1.0p-53;
}
}  // namespace detail

/// One sample's stream from `fast_source`: draw d is mix64(state + (d + 1) · γ), SplitMix64
/// from a per-(sample, sub-stream) state.
class fast_stream {
 public:
  constexpr explicit fast_stream(std::uint64_t state) noexcept : state_(state) {}
  constexpr std::uint64_t next_u64() noexcept {
    state_ += detail::golden_gamma;
    return detail::mix64(state_);
  }
  constexpr double random() noexcept { return detail::to_unit_double(next_u64()); }

 private:
  std::uint64_t state_;
};

/// Counter-based source keyed by (seed, epoch). For one seed, distinct epochs get distinct
/// keys (the epoch enters through a bijection), and within a key distinct samples get
/// distinct stream states (mix64 of the key xor the sample index is a bijection in the
/// index), so unlike Open-Sora's `seed + epoch + i · num_bucket`, (epoch e, sample i + 1)
/// and (epoch e + num_bucket, sample i) are unrelated.
class fast_source {
 public:
  constexpr fast_source(std::uint64_t seed, std::uint64_t epoch) noexcept
      : key_(detail::mix64(detail::mix64(seed ^ 0x6a09e667f3bcc909ULL) +
                           epoch * detail::golden_gamma)) {}

  [[nodiscard]] constexpr fast_stream stream(std::uint64_t sample,
                                             std::uint64_t sub) const noexcept {
    return fast_stream(detail::mix64(key_ ^ sample) + sub * 0xd1b54a32d192ed03ULL);
  }
  /// Draw `draw` of (sample, sub) directly, without a stream object.
  [[nodiscard]] constexpr double draw(std::uint64_t sample, std::uint64_t sub,
                                      std::uint64_t draw_index) const noexcept {
    return detail::to_unit_double(detail::mix64(detail::mix64(key_ ^ sample) +
                                                sub * 0xd1b54a32d192ed03ULL +
                                                (draw_index + 1) * detail::golden_gamma));
  }
  [[nodiscard]] constexpr std::uint64_t key() const noexcept { return key_; }

 private:
  std::uint64_t key_;
};

static_assert(random_source<fast_source>);

/// The draws of samples `first`, `first + 1`, ... of `inner` as samples 0, 1, ...: a chunk of
/// rows that starts at sample `first` assigned with it gets the buckets its rows get in the
/// whole table.
template <random_source Inner>
struct shifted_source {
  Inner inner;
  std::uint64_t first = 0;
  [[nodiscard]] constexpr auto stream(std::uint64_t sample, std::uint64_t sub) const
      noexcept(noexcept(inner.stream(sample, sub))) {
    return inner.stream(first + sample, sub);
  }
};

namespace detail {
/// True for a source whose streams are pure functions of (sample, sub-stream) that share no
/// state: a rule may then leave out a stream whose draws cannot change its answer. Not for
/// user sources, which may count or record draws.
template <class Source>
inline constexpr bool independent_streams = false;
template <>
inline constexpr bool independent_streams<fast_source> = true;
template <class Inner>
inline constexpr bool independent_streams<shifted_source<Inner>> = independent_streams<Inner>;

/// True for `fast_source` and a `fast_source` seen through `shifted_source`: the sources whose
/// draws the rules may take in their one-draw form (see `opensora_v2_rule::assign`).
template <class Source>
inline constexpr bool fast_draws = std::is_same_v<Source, fast_source>;
template <>
inline constexpr bool fast_draws<shifted_source<fast_source>> = true;
}  // namespace detail

}  // namespace vbucket
