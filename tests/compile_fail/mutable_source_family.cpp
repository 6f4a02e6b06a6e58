/// Mistake: a user family of random sources whose call operator is not const (a family with
/// state would give ranks different draws); the sampler must refuse it at compile time.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vbucket/sample/batch_sampler.hpp"

/// The family as it should be: the same draws from every copy, on every rank.
struct const_halves {
  vbucket::fast_source operator()(std::uint64_t seed, std::uint64_t epoch, std::size_t) const {
    return vbucket::fast_source(seed / 2, epoch);
  }
};
/// The mistake: callable only when not const.
struct mutable_halves {
  vbucket::fast_source operator()(std::uint64_t seed, std::uint64_t epoch, std::size_t) {
    return vbucket::fast_source(seed / 2, epoch);
  }
};

#ifdef VBUCKET_COMPILE_FAIL
using halves = mutable_halves;
#else
using halves = const_halves;
#endif

void make(const vbucket::bucket_config& config, const std::vector<vbucket::sample_meta>& clips) {
  vbucket::batch_sampler sampler(clips, config, vbucket::opensora_v2_rule{}, {}, halves{});
  (void)sampler.size();
}
