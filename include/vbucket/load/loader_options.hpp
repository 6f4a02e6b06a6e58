#pragma once
/// A loader's options: workers, prefetch, the batch's layout and element type, the
/// normalisation or a converter of the trainer's own, per-sample fields, pixels or none.

#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint8_t
#include <functional>  // std::function
#include <memory>      // std::shared_ptr
#include <span>        // std::span

#include "clip_decoder.hpp"         // clip_task, defaults::outage_deadline_seconds
#include "normalize.hpp"            // normalization
#include "vbucket/base/fields.hpp"  // field_table
#include "vbucket/base/tensor.hpp"  // tensor_view, element_type, clip_layout

namespace vbucket {

/// The customization point for what a worker writes: called once per clip, on the worker that
/// decoded it, with the task, the decoded clip (uint8 THWC) and the clip's part of the batch
/// (`out.shape` = 1 × the clip's shape in `out.layout`, `out.type` = the loader's `element`).
/// It must write all of `out` and may be called concurrently. A throw is the loader's error.
using clip_converter =
    std::function<void(const clip_task&, std::span<const std::uint8_t> thwc, const tensor_view&)>;

struct loader_options {
  unsigned workers = 2;                    ///< decoding threads
  std::size_t prefetch = 2;                ///< batches decoded ahead of the trainer (≥ 1)
  clip_layout layout = clip_layout::thwc;  ///< of the batch the trainer receives
  unsigned max_attempts = 8;  ///< replacements tried for one failed clip before giving up
  /// A source that cannot be reached (the decoder throws `source_unavailable`) stalls the
  /// loader: every worker waits on one shared health state, one tries again after a backoff
  /// (doubling from 0.25 s up to `outage_retry_seconds`), and the same sample is decoded once
  /// the source answers (counted in `loader_stats::stalls`). An outage longer than this fails
  /// the loader (`next()` throws, naming the source's last error).
  double outage_deadline_seconds = defaults::outage_deadline_seconds;
  double outage_retry_seconds = 2.0;  ///< the longest wait between tries during an outage
  /// The batch's element type. f32 and bf16 are normalised with `normalize` on the workers;
  /// the staging slot is sized for it (`ring.reserve_for(config, 3 * element_size(element))`).
  element_type element = element_type::u8;
  normalization normalize{};  ///< mean/std on the [0, 1] scale, for f32 and bf16
  /// Replaces the built-in conversion (`clip_normalizer`) when set; runs for u8 too.
  clip_converter convert{};
  /// Per-sample columns gathered with each batch (`loaded_batch::fields`); tensor files are
  /// read per clip, and a file that cannot be read fails the clip like a failed decode.
  std::shared_ptr<const field_table> fields{};
  /// The row of `fields` that holds sample i's fields and tensor files (unset: row i). A
  /// loader over a run (`run_loader`) maps its segment's samples to the rows of the sources'
  /// tables stacked in the run's order (the run ledger's global ids).
  std::function<std::uint32_t(std::uint32_t)> field_row{};
  /// false: no clip is decoded (the decoder is never called, the batch tensor is empty, shape
  /// B × 0 × 0 × 0 × 3): a batch is its fields alone, e.g. precomputed latents and text
  /// embeddings read from tensor files instead of video.
  bool pixels = true;
};

}  // namespace vbucket
