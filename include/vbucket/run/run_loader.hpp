#pragma once
/// A loader over a run: one rank's batches of a `run_loop` (several weighted sources, stages,
/// out-of-memory steps, world changes), decoded by the loader's workers into staging slots,
/// each source's samples by that source's decoder.
///
///  - It follows the run's current schedule (`run_plan::schedule()`) with a `loader` over it,
///    from the run's step, `prefetch` batches ahead; when the run deals another schedule (a new
///    segment or stage, an out-of-memory step, a world change, a new epoch, a loaded state) it
///    follows the new one from there (nothing is prefetched across that change).
///  - Each batch comes from the loop (`run_loop::take`), so the loop's semantics hold: a state
///    taken after batch k resumes at k + 1, an out-of-memory call after batch k makes the next
///    batch step k planned again, `load` restores the saved world. Call those on the loop
///    (the loader follows); `stats()` and the substitutions carry over.
///  - A clip's temporal crop is seeded by (run seed, source name, epoch, row): `run_crop_seed`,
///    so a sample's frames do not depend on the segment or world that delivers it.
///  - Per-sample fields and tensor files (`loader_options::fields`) are one table over the
///    sources' rows stacked in the run's order (the ledger's global ids); each batch's
///    `data.fields` are its clips' (after substitutions).
///  - A clip that fails to decode is replaced by another sample of its bucket in the same plan
///    (`loader`'s rule): `substitutions_by_source()` counts them per source of the failed
///    sample. The ledger record of each batch (with its substitutions, global ids) is written
///    by the loop before the batch is handed out.
///
///     vbucket::run_loop loop(run, rank, "ledger");
///     vbucket::run_loader loader(loop, decoders, ring, {.workers = 8});
///     while (auto b = loader.next()) {
///       if (!train(b->data.tensor)) { loop.out_of_memory(); continue; }
///       save(loop.state());
///     }

#include <algorithm>    // std::max
#include <chrono>       // std::chrono::steady_clock
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint32_t, std::uint64_t
#include <memory>       // std::unique_ptr
#include <optional>     // std::optional
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include "run_ledger.hpp"  // run_id_bases
#include "run_loop.hpp"
#include "run_plan.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/load/loader.hpp"
#include "vbucket/load/loader_streams.hpp"  // crop_seed

namespace vbucket {

/// The crop seed a run loader gives row `row` of the source named `source` in epoch `epoch`
/// of a run of seed `seed` (`clip_task::seed`): `crop_seed` keyed by the source's name, so a
/// sample's frames depend on neither the segment nor the world that delivers it.
[[nodiscard]] inline std::uint64_t run_crop_seed(std::uint64_t seed, std::string_view source,
                                                 std::uint64_t epoch, std::uint32_t row) {
  return crop_seed(detail::stream_key(seed, detail::run_domain_crop, detail::hash_bytes(source)),
                   epoch, row);
}

namespace detail {
/// What a run loader's inner loader decodes with: sample i of the current segment's plan is
/// row `rows[i]` of source `sources[i]`, decoded by that source's decoder; the crop is seeded
/// by the sample's global id.
template <class Decoder>
class run_segment_decoder {
 public:
  run_segment_decoder(std::span<Decoder* const> decoders, const run_plan& run)
      : decoders_(decoders.begin(), decoders.end()),
        bases_(run_id_bases(run)),
        epoch_(run.epoch()) {
    for (const run_source& s : run.sources())
      crop_keys_.push_back(stream_key(run.seed(), run_domain_crop, hash_bytes(s.name)));
    const std::size_t n = run.segment_size();
    sources_.resize(n);
    rows_.resize(n);
    const drawn_epoch& d = run.drawn();
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t p = run.segment_draw(static_cast<std::uint32_t>(i));
      sources_[i] = d.source_of(p);
      rows_[i] = d.row(p);
    }
  }

  std::optional<std::string> decode(const clip_task& t, std::span<std::uint8_t> out) {
    clip_task u = t;
    u.sample = rows_[t.sample];
    u.seed = crop_seed(crop_keys_[sources_[t.sample]], epoch_, u.sample);  // run_crop_seed
    return decoders_[sources_[t.sample]]->decode(u, out);
  }
  [[nodiscard]] std::string path(std::size_t i) const requires file_naming_decoder<Decoder> {
    return decoders_[sources_[i]]->path(rows_[i]);
  }
  [[nodiscard]] std::uint32_t source(std::uint32_t i) const noexcept { return sources_[i]; }
  [[nodiscard]] std::uint32_t row(std::uint32_t i) const noexcept { return rows_[i]; }
  /// The global id (the run ledger's) of sample i.
  [[nodiscard]] std::uint64_t id(std::uint32_t i) const noexcept {
    return bases_[sources_[i]] + rows_[i];
  }

 private:
  std::vector<Decoder*> decoders_;
  std::vector<std::uint64_t> bases_, crop_keys_;
  std::vector<std::uint32_t> sources_, rows_;
  std::uint64_t epoch_ = 0;
};

/// `into` += `s` (counts and seconds summed, the most ready batches the larger, the mean ready
/// weighted by batches); elapsed is the run loader's own.
inline void add_loader_stats(loader_stats& into, const loader_stats& s) {
  const double before = static_cast<double>(into.batches);
  into.mean_ready =
      into.batches + s.batches == 0
          ? 0.0
          : (into.mean_ready * before + s.mean_ready * static_cast<double>(s.batches)) /
                (before + static_cast<double>(s.batches));
  into.batches += s.batches;
  into.samples += s.samples;
  into.repeat_batches += s.repeat_batches;
  into.decoded += s.decoded;
  into.failed += s.failed;
  into.substitutions += s.substitutions;
  into.stalls += s.stalls;
  into.unavailable += s.unavailable;
  into.stall_seconds += s.stall_seconds;
  into.decode_seconds += s.decode_seconds;
  into.convert_seconds += s.convert_seconds;
  into.slot_wait_seconds += s.slot_wait_seconds;
  into.trainer_wait_seconds += s.trainer_wait_seconds;
  into.max_ready = std::max(into.max_ready, s.max_ready);
}
}  // namespace detail

/// One rank's loader over a run (see the header comment). The loop (and its run), the
/// decoders (one per source of the run, in its order) and the ring must outlive it.
template <class Decoder, staging_backend Backend, tensor_adapter Tensor = plain_tensor>
  requires clip_decoder<Decoder>
class run_loader {
 public:
  using segment_decoder = detail::run_segment_decoder<Decoder>;
  using inner_loader = any_loader<segment_decoder, Backend, Tensor>;

  /// A ready batch: the run's batch as planned (`run`: step, epoch, stage, bucket, shape,
  /// sources and rows, pads, repeat), the decoded data (`data`: tensor, slot, packed layout;
  /// its sample indices are the segment plan's), and what was decoded: each clip's source and
  /// row after substitutions, and the substitutions with global ids (the ledger's).
  struct loaded_batch {
    run_batch run;
    typename inner_loader::loaded_batch data;
    std::vector<std::uint32_t> sources, rows;
    std::vector<ledger_substitution> substitutions;
  };

  /// `options.fields`: a table whose rows are the sources' rows stacked in the run's order (the
  /// run ledger's global ids: `run_id_bases`); each batch's `data.fields` are its clips'. Throws
  /// `vbucket::error` when the number of decoders is not the run's number of sources, a decoder
  /// is null, or the fields' rows are not the sources' rows.
  run_loader(run_loop& loop, std::vector<Decoder*> decoders, staging_ring<Backend>& ring,
             loader_options options = {})
      : loop_(loop),
        decoders_(std::move(decoders)),
        ring_(ring),
        options_(std::move(options)),
        start_(std::chrono::steady_clock::now()),
        by_source_(loop.run().sources().size(), 0) {
    if (decoders_.size() != loop.run().sources().size())
      throw error("run loader: " + std::to_string(decoders_.size()) + " decoders for the run's " +
                  std::to_string(loop.run().sources().size()) + " sources");
    for (std::size_t s = 0; s < decoders_.size(); ++s)
      if (decoders_[s] == nullptr)
        throw error("run loader: no decoder for source \"" + loop.run().sources()[s].name + "\"");
    if (options_.fields) {
      const std::uint64_t rows = run_id_bases(loop.run()).back();
      if (options_.fields->rows() != rows)
        throw error("run loader: the fields have " + std::to_string(options_.fields->rows()) +
                    " rows, the run's sources " + std::to_string(rows) +
                    " (their rows stacked in the run's order)");
      if (rows > std::uint64_t{0xffffffffU})
        throw error("run loader: per-sample fields over more than 2^32 - 1 rows in all");
      for (const run_stage& st : loop.run().stages())
        if (options_.fields->has_tensors() && st.batches.batching == batching_mode::packed)
          throw error("run loader: tensor files need fixed batches, and stage \"" + st.name +
                      "\" packs (a packed batch's clips differ in shape)");
      if (options_.field_row)
        throw error("run loader: field_row is the run loader's own (the sources' rows stacked)");
    }
  }
  run_loader(const run_loader&) = delete;
  run_loader& operator=(const run_loader&) = delete;
  ~run_loader() { stop(); }

  /// The next batch of this rank (the loop's `take`, decoded, its record written), or nullopt
  /// once at the end of each epoch (as `run_loop::next`). Throws `vbucket::error` when a batch
  /// cannot be filled (then the batch counts as not handed out: the loop's state is before it).
  std::optional<loaded_batch> next() {
    if (stopped_) return std::nullopt;
    std::optional<run_batch> b = loop_.take();
    if (!b) return std::nullopt;
    try {
      follow();
      std::optional<typename inner_loader::loaded_batch> got = inner_->next();
      if (!got || got->info.position != b->position)
        throw error("run loader: the segment's loader and the run disagree at step " +
                    std::to_string(b->step));
      ++next_step_;
      loaded_batch out{std::move(*b), std::move(*got), {}, {}, {}};
      for (const std::uint32_t i : out.data.samples) {
        out.sources.push_back(decoder_->source(i));
        out.rows.push_back(decoder_->row(i));
      }
      for (const substitution& s : out.data.substitutions) {
        out.substitutions.push_back({static_cast<std::uint32_t>(s.clip), decoder_->id(s.failed),
                                     decoder_->id(s.replacement), s.error});
        ++by_source_[decoder_->source(s.failed)];
      }
      loop_.record(out.run, out.substitutions);
      return out;
    } catch (...) {
      loop_.untake();
      retire();  // a failed loader is not followed further
      throw;
    }
  }

  /// Substitutions so far, per source (of the sample that failed).
  [[nodiscard]] const std::vector<std::uint64_t>& substitutions_by_source() const noexcept {
    return by_source_;
  }
  /// The figures of every schedule followed so far (elapsed: since construction).
  [[nodiscard]] loader_stats stats() const {
    loader_stats s = done_;
    if (inner_) detail::add_loader_stats(s, inner_->stats());
    s.elapsed_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    return s;
  }
  /// Cancels: the workers finish the clips they decode and are joined; `next()` returns
  /// nullopt from then on. Batches handed out stay valid. Idempotent.
  void stop() {
    stopped_ = true;
    retire();
  }
  [[nodiscard]] run_loop& loop() noexcept { return loop_; }

 private:
  /// Follows the run's current schedule from the run's step: the loader of the schedule
  /// followed goes on while the run has dealt no other and the steps agree.
  void follow() {
    const run_plan& run = loop_.run();
    if (inner_ && deals_ == run.deals() && next_step_ == run.step_in_schedule()) return;
    retire();
    decoder_ = std::make_unique<segment_decoder>(decoders_, run);
    next_step_ = run.step_in_schedule();
    deals_ = run.deals();
    const std::uint32_t rank = loop_.rank();
    loader_options o = options_;
    if (o.fields)  // the segment's sample i is row id(i) of the stacked tables (< 2^32: checked)
      o.field_row = [d = decoder_.get()](std::uint32_t i) {
        return static_cast<std::uint32_t>(d->id(i));
      };
    if (const auto* s = std::get_if<epoch_schedule>(&run.schedule()))
      inner_ = std::make_unique<loader<segment_decoder, Backend, Tensor, fixed_batching>>(
          *s, rank, *decoder_, ring_, std::move(o), next_step_);
    else
      inner_ = std::make_unique<loader<segment_decoder, Backend, Tensor, packed_batching>>(
          std::get<packed_schedule>(run.schedule()), rank, *decoder_, ring_, std::move(o),
          next_step_);
  }
  /// Stops the loader followed (its prefetched batches go back to the ring), keeping its
  /// figures.
  void retire() {
    if (!inner_) return;
    inner_->stop();
    detail::add_loader_stats(done_, inner_->stats());
    inner_.reset();
  }

  run_loop& loop_;
  std::vector<Decoder*> decoders_;
  staging_ring<Backend>& ring_;
  loader_options options_;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::uint64_t> by_source_;
  loader_stats done_{};
  std::unique_ptr<segment_decoder> decoder_;  // before inner_: outlives the loader using it
  std::unique_ptr<inner_loader> inner_;
  std::uint64_t deals_ = 0, next_step_ = 0;
  bool stopped_ = false;
};

}  // namespace vbucket
