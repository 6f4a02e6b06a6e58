#pragma once
/// The flat layout of a packed batch (`packed_plan.hpp`): where each clip lies in one buffer of
/// clips back to back, and `cu_seqlens`, the cumulative token counts that flash-attention's
/// varlen kernels take (sequence i is tokens [cu_seqlens[i], cu_seqlens[i+1])). Used by the
/// prefetching `loader` over packed batches (`loader.hpp`).

#include <algorithm>  // std::max
#include <cstddef>    // std::size_t
#include <cstdint>    // std::int32_t, std::int64_t
#include <limits>     // std::numeric_limits
#include <string>     // std::to_string
#include <vector>     // std::vector

#include "packed_plan.hpp"
#include "plan_options.hpp"  // token_formula
#include "vbucket/base/error.hpp"

namespace vbucket {

/// The token sequence length of one sample of shape (T, H, W) under `formula` (default: a VAE
/// that compresses time by 4, keeping the first frame, and space by 8, patchified 2×2):
/// `formula.frames(T)` · ⌈H / cell_h⌉ · ⌈W / cell_w⌉ — the integer counterpart of
/// `latent_tokens` (equal when H and W are multiples of the cells).
struct latent_sequence_length {
  token_formula formula{};
  constexpr std::int64_t operator()(std::int64_t frames, std::int64_t height,
                                    std::int64_t width) const noexcept {
    const std::int64_t ch = formula.cell_h();
    const std::int64_t cw = formula.cell_w();
    return formula.frames(frames) * ((height + ch - 1) / ch) * ((width + cw - 1) / cw);
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

/// The bytes of the largest batch of `plan` with `element_bytes` bytes per pixel channel
/// (uint8: 1, float32: 4, bfloat16: 2) and 3 channels: what a staging slot for a loader over
/// the plan must hold (`ring.reserve(max_packed_batch_bytes(plan, 4), slots)`). 0 for an empty
/// plan.
inline std::size_t max_packed_batch_bytes(const packed_plan& plan, std::size_t element_bytes = 1) {
  std::size_t most = 0;
  for (std::uint64_t id = 0; id < plan.num_batches(); ++id) {
    const packed_batch b = plan.make_batch(id);
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
      const sample_shape s = b.shape(i);
      bytes += static_cast<std::size_t>(s.frames * s.height * s.width * 3);
    }
    most = std::max(most, bytes);
  }
  return most * element_bytes;
}

}  // namespace vbucket
