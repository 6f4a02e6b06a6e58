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

#include <cstddef>    // std::size_t
#include <cstdint>    // std::int32_t, std::int64_t, std::uint8_t, std::uint64_t
#include <exception>  // std::exception
#include <limits>     // std::numeric_limits
#include <mutex>      // std::mutex (the first error)
#include <optional>   // std::optional
#include <span>       // std::span
#include <string>     // std::string, std::to_string
#include <vector>     // std::vector

#include "detail/keyed_shuffle.hpp"  // parallel_tasks
#include "error.hpp"
#include "loader.hpp"  // clip_task, clip_decoder, crop_seed, tensor_view
#include "packed_plan.hpp"

namespace vbucket {

/// The token sequence length of one sample of shape (T, H, W) after a VAE that compresses time
/// by 4 (keeping the first frame) and space by 8, patchified 2×2: (1 + (T − 1) / 4) ·
/// ⌈H / 16⌉ · ⌈W / 16⌉ — the integer counterpart of `latent_tokens` (equal when H and W are
/// multiples of 16).
struct latent_sequence_length {
  constexpr std::int64_t operator()(std::int64_t frames, std::int64_t height,
                                    std::int64_t width) const noexcept {
    const std::int64_t t = frames < 1 ? 1 : 1 + (frames - 1) / 4;
    return t * ((height + 15) / 16) * ((width + 15) / 16);
  }
};

/// Where each clip of a packed batch lies in the flat buffer, and its token sequence.
struct packed_layout {
  std::vector<std::size_t> clip_offsets;  ///< n + 1 byte offsets (uint8 THWC clips)
  std::vector<std::int32_t> cu_seqlens;   ///< n + 1 cumulative sequence lengths, from 0
  std::int32_t max_seqlen = 0;            ///< the longest sequence

  [[nodiscard]] std::size_t size() const noexcept {
    return clip_offsets.empty() ? 0 : clip_offsets.size() - 1;
  }
  /// Bytes of the whole buffer.
  [[nodiscard]] std::size_t bytes() const noexcept {
    return clip_offsets.empty() ? 0 : clip_offsets.back();
  }
  /// Tokens of the whole batch.
  [[nodiscard]] std::int32_t tokens() const noexcept {
    return cu_seqlens.empty() ? 0 : cu_seqlens.back();
  }
};

/// The layout of `b`: clips back to back in entry order; sequence lengths from `seqlen(T, H,
/// W)` (default `latent_sequence_length`). Throws `vbucket::error` when a length is not
/// positive or the batch's tokens exceed 2^31 − 1 (cu_seqlens is int32, as flash-attention's).
template <class SeqLen = latent_sequence_length>
packed_layout make_packed_layout(const packed_batch& b, const SeqLen& seqlen = {}) {
  packed_layout out;
  out.clip_offsets.reserve(b.size() + 1);
  out.cu_seqlens.reserve(b.size() + 1);
  out.clip_offsets.push_back(0);
  out.cu_seqlens.push_back(0);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const sample_shape s = b.shape(i);
    out.clip_offsets.push_back(out.clip_offsets.back() +
                               static_cast<std::size_t>(s.frames * s.height * s.width * 3));
    const std::int64_t len = static_cast<std::int64_t>(seqlen(s.frames, s.height, s.width));
    if (len <= 0)
      throw error("packed layout: sample " + std::to_string(b.indices[i]) + " (" +
                  std::to_string(s.frames) + "x" + std::to_string(s.height) + "x" +
                  std::to_string(s.width) + ") has sequence length " + std::to_string(len));
    total += len;
    if (total > std::numeric_limits<std::int32_t>::max())
      throw error("packed layout: the batch at position " + std::to_string(b.position) +
                  " has more than 2^31 - 1 tokens, which int32 cu_seqlens cannot hold");
    out.cu_seqlens.push_back(static_cast<std::int32_t>(total));
    if (len > out.max_seqlen) out.max_seqlen = static_cast<std::int32_t>(len);
  }
  return out;
}

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
/// the sample, the batch's position and the decoder's message (packed batches have no
/// same-shape stand-in to substitute; drop such samples from the metadata).
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
