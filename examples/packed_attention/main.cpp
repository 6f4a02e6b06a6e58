/// Packed batches for variable-length attention, end to end on the CPU:
///  1. plan an epoch packed to a token budget (samples of mixed shapes per batch),
///  2. decode one rank's batches, each into one flat buffer, with the prefetching loader
///     (`vbucket::loader` over the packed schedule: worker threads, staging slots),
///  3. cut it into token sequences and run a softmax attention that reads `cu_seqlens`, as
///     flash-attention's varlen kernels do: every token attends only to its own sample.
/// The decoder fills clip s with the constant value v(s), so each output token must equal its
/// own sample's v: a token that attended across samples would come out mixed. Exits 1 if so.

#include <algorithm>  // std::min
#include <cmath>      // std::exp, std::abs
#include <cstdint>    // std::uint8_t, std::uint32_t, std::int32_t
#include <cstdio>     // std::printf
#include <cstring>    // std::memset
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vbucket/bucket/rules.hpp"
#include "vbucket/load/loader.hpp"
#include "vbucket/load/staging.hpp"
#include "vbucket/plan/packed_layout.hpp"
#include "vbucket/plan/packed_plan.hpp"

namespace {

/// The value every byte of sample s's clip holds.
std::uint8_t value_of(std::uint32_t s) { return static_cast<std::uint8_t>(1 + (s * 37u) % 250u); }

/// A stand-in for a video decoder: writes v(sample) everywhere.
struct constant_decoder {
  std::optional<std::string> decode(const vbucket::clip_task& t, std::span<std::uint8_t> out) {
    std::memset(out.data(), value_of(t.sample), out.size());
    return std::nullopt;
  }
};

/// Softmax attention over scalar tokens, one sequence per [cu_seqlens[i], cu_seqlens[i+1]),
/// for the first, middle and last query of each sequence (where a wrong boundary shows; all
/// queries would cost the square of a sequence's length). Other outputs stay NaN.
std::vector<float> varlen_attention(const std::vector<float>& x, std::span<const std::int32_t> cu) {
  std::vector<float> out(x.size(), std::nanf(""));
  for (std::size_t s = 0; s + 1 < cu.size(); ++s) {
    const auto b = static_cast<std::size_t>(cu[s]), e = static_cast<std::size_t>(cu[s + 1]);
    for (const std::size_t q : {b, b + (e - b) / 2, e - 1}) {
      double norm = 0.0, acc = 0.0;
      for (std::size_t k = b; k < e; ++k) {
        const double w = std::exp(0.01 * x[q] * x[k] / 255.0);
        norm += w;
        acc += w * x[k];
      }
      out[q] = static_cast<float>(acc / norm);
    }
  }
  return out;
}

}  // namespace

int main() {
  // A config of one resolution and three frame counts (ids: every aspect ratio of each).
  const std::vector<vbucket::bucket_spec> specs = {{"256px", 1, 1.0, std::nullopt, 32},
                                                   {"256px", 33, 1.0, std::nullopt, 8},
                                                   {"256px", 65, 1.0, std::nullopt, 4}};
  const vbucket::bucket_config config(specs, vbucket::opensora_v2_tables{});
  std::vector<vbucket::bucket_id> ids;
  const std::int64_t frames[] = {1, 33, 65};
  const char* const ratios[] = {"1:1", "16:9", "9:16", "4:3"};
  for (std::uint32_t i = 0; i < 400; ++i)
    ids.push_back(config.find("256px", frames[i % 3], ratios[(i / 3) % 4]));

  const std::uint32_t world = 2, rank = 1;
  // The memory the config's largest fixed batch needs.
  const double budget = vbucket::largest_batch_cost(config);
  const vbucket::packed_plan plan = vbucket::make_packed_plan(
      std::span<const vbucket::bucket_id>(ids), config, {.seed = 1, .token_budget = budget});
  const vbucket::packed_schedule schedule = plan.deal(world);
  std::printf("%llu samples packed into %llu batches of at most %.0f latent tokens, %llu steps\n",
              static_cast<unsigned long long>(plan.samples()),
              static_cast<unsigned long long>(plan.num_batches()), budget,
              static_cast<unsigned long long>(schedule.steps()));

  int bad = 0;
  std::size_t mixed = 0;
  constant_decoder decoder;
  vbucket::host_backend backend;
  vbucket::staging_ring<vbucket::host_backend> ring(backend, {.slots = 3});
  ring.reserve(vbucket::max_packed_batch_bytes(plan), 3);  // the plan's largest batch
  vbucket::loader loader(schedule, rank, decoder, ring, {.workers = 2, .prefetch = 2});
  for (auto& b : loader) {
    const auto& p = *b.packed;  // offsets, cu_seqlens, max_seqlen, shapes, per-clip tensors
    const std::span<const std::uint8_t> pixels = b.tensor.bytes();
    // One scalar token per patch: sample i's clip cut into its sequence length of equal runs.
    std::vector<float> tokens(static_cast<std::size_t>(p.cu_seqlens.back()));
    for (std::size_t i = 0; i < b.samples.size(); ++i) {
      const auto n = static_cast<std::size_t>(p.cu_seqlens[i + 1] - p.cu_seqlens[i]);
      const std::size_t clip = p.offsets[i + 1] - p.offsets[i];
      for (std::size_t t = 0; t < n; ++t)
        tokens[static_cast<std::size_t>(p.cu_seqlens[i]) + t] =
            pixels[p.offsets[i] + t * (clip / n)];
    }
    const std::vector<float> out = varlen_attention(tokens, p.cu_seqlens);
    for (std::size_t i = 0; i < b.samples.size(); ++i)
      for (auto t = p.cu_seqlens[i]; t < p.cu_seqlens[i + 1]; ++t) {
        const float y = out[static_cast<std::size_t>(t)];
        if (!std::isnan(y) && std::abs(y - value_of(b.samples[i])) > 1e-3f) ++bad;
      }
    std::size_t shapes = b.samples.empty() ? 0 : 1;
    for (std::size_t i = 1; i < p.buckets.size(); ++i)
      shapes += p.buckets[i] != p.buckets[i - 1] ? 1u : 0u;
    mixed += shapes > 1 ? 1u : 0u;
    if (b.info.step == 0)
      std::printf("step 0 of rank %u: %zu samples of %zu shapes, %d tokens, longest %d\n", rank,
                  b.samples.size(), shapes, p.cu_seqlens.back(), p.max_seqlen);
  }
  if (bad != 0) {
    std::printf("FAIL: %d tokens attended across samples\n", bad);
    return 1;
  }
  std::printf("%zu of rank %u's batches mix shapes; every token attended only to its own sample\n",
              mixed, rank);
  return 0;
}
