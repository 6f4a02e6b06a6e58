#pragma once
/// Loading a packed batch (`packed_plan.hpp`) for variable-length attention: its clips, each at
/// its own target shape, decoded back to back into one flat buffer, with the byte offset of
/// every clip (per-sample tensors alias it) and `cu_seqlens`, the cumulative token counts that
/// flash-attention's varlen kernels take (sequence i is tokens [cu_seqlens[i], cu_seqlens[i+1])).
///
///     const vbucket::packed_batch b = schedule.at(step, rank);
///     const vbucket::packed_layout layout = vbucket::make_packed_layout(b);
///     std::vector<std::uint8_t> pixels(layout.bytes());
///     vbucket::load_packed_batch(b, decoder, seed, epoch, layout, pixels);
///     attention(tokens_of(pixels, layout), layout.cu_seqlens, layout.max_seqlen);
///
/// The decoder is the loader's (`clip_decoder`), with the loader's crop seeds (`crop_seed`), so a
/// sample decodes to the same frames packed or not.
///
/// For training, `vbucket::loader` over a `packed_schedule` (or a packed `batch_sampler`) does
/// this ahead of the trainer on its worker threads, into staging slots, with substitution of
/// failed clips, float32/bfloat16 conversion and resume (`loader.hpp`).

#include <cstddef>    // std::size_t
#include <cstdint>    // std::int32_t, std::int64_t, std::uint8_t, std::uint64_t
#include <exception>  // std::exception
#include <limits>     // std::numeric_limits
#include <mutex>      // std::mutex (the first error)
#include <optional>   // std::optional
#include <span>       // std::span
#include <string>     // std::string, std::to_string
#include <vector>     // std::vector

#include "detail/parallel_tasks.hpp"
#include "error.hpp"
#include "loader.hpp"  // clip_task, clip_decoder, crop_seed, tensor_view
#include "packed_layout.hpp"
#include "packed_plan.hpp"

namespace vbucket {

/// Per-sample tensors aliasing `buffer`: entry i is 1×T×H×W×3 uint8 THWC at its offset.
inline std::vector<tensor_view> packed_clip_views(const packed_batch& b,
                                                  const packed_layout& layout,
                                                  std::span<std::uint8_t> buffer) {
  if (buffer.size() < layout.bytes())
    throw error("packed clip views: the buffer has " + std::to_string(buffer.size()) +
                " bytes, the layout needs " + std::to_string(layout.bytes()));
  std::vector<tensor_view> out(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) {
    const sample_shape s = b.shape(i);
    out[i].data = buffer.data() + layout.clip_offsets[i];
    out[i].shape = {1, s.frames, s.height, s.width, 3};
  }
  return out;
}

/// Decodes every clip of `b` into its part of `buffer` (uint8 THWC, `layout.bytes()` bytes at
/// least) on up to `threads` threads (0: one per core), with the loader's task for each
/// sample (crop seed `crop_seed(seed, epoch, sample)`). A clip that fails is an error naming
/// the sample, the batch's position and the decoder's message (no substitution here: the
/// prefetching `vbucket::loader` over a packed schedule replaces a failed clip by a sample of
/// its own bucket, and this function is its reference for the bytes of a batch).
template <class Decoder>
  requires clip_decoder<Decoder>
void load_packed_batch(const packed_batch& b, Decoder& decoder, std::uint64_t seed,
                       std::uint64_t epoch, const packed_layout& layout,
                       std::span<std::uint8_t> buffer, unsigned threads = 1) {
  if (layout.size() != b.size())
    throw error("load packed batch: the layout has " + std::to_string(layout.size()) +
                " clips, the batch " + std::to_string(b.size()));
  if (buffer.size() < layout.bytes())
    throw error("load packed batch: the buffer has " + std::to_string(buffer.size()) +
                " bytes, the batch needs " + std::to_string(layout.bytes()));
  std::mutex m;
  std::optional<std::string> first;
  std::size_t first_clip = b.size();
  detail::parallel_tasks(b.size(), threads, [&](std::size_t i) {
    const sample_shape s = b.shape(i);
    clip_task t;
    t.sample = b.indices[i];
    t.frames = s.frames;
    t.height = s.height;
    t.width = s.width;
    t.layout = clip_layout::thwc;
    t.seed = crop_seed(seed, epoch, t.sample);
    std::optional<std::string> err;
    try {
      err = decoder.decode(t, buffer.subspan(layout.clip_offsets[i], t.bytes()));
    } catch (const std::exception& e) {
      err = std::string(e.what());
    }
    if (err) {
      std::lock_guard lock(m);
      if (i < first_clip) {  // the first failing clip, whatever the thread order
        first_clip = i;
        first = std::move(err);
      }
    }
  });
  if (first)
    throw error("load packed batch: sample " + std::to_string(b.indices[first_clip]) + " (clip " +
                std::to_string(first_clip) + " of the batch at position " +
                std::to_string(b.position) + ") failed to decode: " + *first);
}

}  // namespace vbucket
