#pragma once
/// The loader: walks one rank's steps of an epoch schedule, decodes each batch's clips on a
/// pool of worker threads straight into a staging slot, and hands the trainer ready batches as
/// its own tensor type.
///
///   - A *decoder* (`clip_decoder`) turns one sample into a clip of the bucket's target shape,
///     written into the memory it is given; it is called from several threads at once. Its
///     temporal crop is seeded by the task's `seed` (`crop_seed(seed, epoch, sample)`), so a
///     resumed run decodes the same frames.
///   - The *output* is uint8 as decoded, or float32 / bfloat16 normalised with the CPU
///     reference of `normalize.hpp` (mean/std), in THWC or CTHW: the workers convert each clip
///     as soon as it is decoded (or run the trainer's own `loader_options::convert`), so the
///     trainer's thread only receives ready tensors.
///   - A *tensor adapter* (`tensor_traits<T>`, a customization point like {fmt}'s `formatter`)
///     wraps (pointer, shape, dtype, layout, device) as the framework's tensor without a copy.
///   - The batch's memory is a slot of a `staging_ring`: the trainer owns it while it holds the
///     `loaded_batch`, may `submit` it to the ring for a copy to the GPU (no extra host copy),
///     or drop it, which returns the buffer to the pool.
///
/// Batch shape is kept: a clip that fails to decode is replaced by another sample of the same
/// bucket, chosen deterministically by `substitution_stream(seed, epoch, position, clip)`;
/// substitutions are counted and listed. A batch never comes out short: if every attempt fails the
/// loader reports an error instead. A source that is down (the decoder throws
/// `source_unavailable`) is not the clip's failure: the workers wait on one shared health state
/// and decode the same sample once it answers (a stall, counted in `loader_stats::stalls`,
/// bounded by `loader_options::outage_deadline_seconds`).
///
/// The loader is an input range: `for (auto& b : loader)` yields each `loaded_batch` (movable
/// out of the loop, slot and all), as `next()` does. It follows a schedule and a rank, or any
/// `loader_source` (a `batch_sampler`) from that source's current state.
///
/// The batching is the loader's type, as the sampler's (`batch_plan.hpp`): `loader<Decoder,
/// Backend, Tensor, Batching = fixed_batching>`, deduced from the schedule or the sampler it is
/// given. `any_loader<Decoder, Backend, Tensor>` is the interface of both (the batch type is
/// the same); `make_any_loader` makes the one a source's run-time batching needs.
///
/// Held epochs (`held_schedule.hpp`): a loader of `held_batching` follows a held trainer
/// epoch of the drop-in sampler (`opensora_sampler::held_epoch_schedule()`) — the held length,
/// its carried tails and counted repeats, states in its slots — and decodes each batch as a
/// loader over the data epoch it comes from would (that epoch's crop seed, replacements from
/// that epoch's bucket). `make_any_loader` makes it for a source whose epochs are held.
///
/// Back-pressure: at most `prefetch` batches are decoded ahead of the trainer, and the ring's
/// slots bound the memory. `stop()` (and the destructor) cancels mid-epoch: workers finish the
/// clip they are decoding, nothing else starts. `state()` is the planner's resume state after
/// the batches handed out so far; a loader on `plan.deal(world, state)` continues exactly.
///
/// Packed batches (`packed_plan.hpp`): a loader over a `packed_schedule` (or a packed
/// `batch_sampler`) decodes each packed batch with the same workers into one slot, its clips
/// back to back, each at its own shape, in the loader's element type and layout; the batch's
/// `packed` part gives the byte offsets, `cu_seqlens`, `max_seqlen`, shapes and per-clip
/// tensors. Size the ring's slots with `max_packed_batch_bytes(plan, element_size(element))`.
/// A failed clip is replaced by a sample of its own bucket (same shape: the layout and token
/// counts do not change), by the same `substitution_stream` rule over the bucket's samples in
/// the plan's packing order.

#include <algorithm>           // std::max
#include <array>               // std::array
#include <atomic>              // std::atomic
#include <chrono>              // std::chrono::steady_clock
#include <condition_variable>  // std::condition_variable
#include <cstddef>             // std::size_t, std::byte
#include <cstdint>             // std::uint8_t, std::uint32_t, std::uint64_t
#include <deque>               // std::deque
#include <exception>           // std::exception
#include <iterator>            // std::default_sentinel_t
#include <memory>              // std::unique_ptr
#include <mutex>               // std::mutex
#include <optional>            // std::optional
#include <span>                // std::span
#include <stop_token>          // std::stop_source
#include <string>              // std::string
#include <thread>              // std::jthread
#include <unordered_set>       // std::unordered_set (files that failed this epoch)
#include <utility>             // std::move
#include <vector>              // std::vector

#include "clip_decoder.hpp"    // clip_task, clip_decoder, file_naming_decoder
#include "loader_options.hpp"  // loader_options, clip_converter
#include "loader_source.hpp"   // schedule_source, packed_schedule_source, loader_source
#include "loader_stats.hpp"    // substitution, loader_stats, format_loader_stats
#include "loader_streams.hpp"  // crop_stream, crop_seed, substitution_stream
#include "normalize.hpp"       // clip_normalizer
#include "staging.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/base/fields.hpp"
#include "vbucket/base/tensor.hpp"      // tensor_view, tensor_traits, plain_tensor
#include "vbucket/plan/batch_plan.hpp"  // batching_kind, plan_schedule
#include "vbucket/plan/epoch_plan.hpp"  // fixed_batching
#include "vbucket/plan/packed_layout.hpp"
#include "vbucket/plan/packed_plan.hpp"      // packed_batching
#include "vbucket/sample/held_schedule.hpp"  // held_schedule, held_batching, held_schedule_source

namespace vbucket {

namespace detail {
/// The schedule a loader of `Batching` follows: the batching's own (`held_batching`), else its
/// plan dealt (`plan_schedule`).
template <class Batching>
struct loader_schedule {
  using type = plan_schedule<typename Batching::plan_type>;
};
template <class Batching>
  requires requires { typename Batching::schedule_type; }
struct loader_schedule<Batching> {
  using type = typename Batching::schedule_type;
};
}  // namespace detail

/// What a loader of either batching offers (`loader` is its model): the batches, the resume
/// state, statistics and cancelling. A `loaded_batch` is the same type for both batchings.
template <class Decoder, staging_backend Backend, tensor_adapter Tensor = plain_tensor>
  requires clip_decoder<Decoder>
class any_loader {
 public:
  using slot_type = typename staging_ring<Backend>::slot;

  /// The layout of a packed batch in its slot.
  struct packed_clips {
    /// n + 1 byte offsets of the clips in the slot (of the loader's element type), from 0.
    std::vector<std::size_t> offsets;
    std::vector<std::int32_t> cu_seqlens;  ///< n + 1 cumulative token counts (`packed_layout`)
    std::int32_t max_seqlen = 0;           ///< the longest clip's tokens
    std::vector<sample_shape> shapes;      ///< per clip: target T, H, W
    std::vector<bucket_id> buckets;        ///< per clip
    /// Per clip: 1×T×H×W×3 (THWC) or 1×3×T×H×W (CTHW), aliasing the slot.
    std::vector<Tensor> clips;
    /// The whole buffer: `shape` = {elements, 1, 1, 1, 1}, `bytes()` = `offsets.back()`.
    tensor_view flat;
  };

  /// A ready batch: the tensor (aliasing `slot`), the plan's batch with the sample indices
  /// actually decoded, and the substitutions made in it. Holding it holds the slot. A packed
  /// batch's `tensor` wraps the flat buffer (`packed->flat`), its `info` has the indices, step,
  /// position and repeat flag (no single bucket or shape: bucket `no_bucket`, shape 0), and
  /// `packed` its layout.
  struct loaded_batch {
    Tensor tensor;
    batch info;  ///< bucket, target shape, step, position, repeat; `info.indices` as planned
    std::vector<std::uint32_t> samples;  ///< what was decoded, clip by clip
    std::vector<substitution> substitutions;
    slot_type slot;  ///< the memory; `ring.submit(std::move(slot), ...)` copies it to a GPU
    std::optional<packed_clips> packed;  ///< set for a batch of a packed schedule
    /// The columns of `loader_options::fields` for `samples` (after substitutions: a replaced
    /// clip's fields are its replacement's), tensor files stacked.
    batch_fields fields{};
  };

  any_loader() = default;
  any_loader(const any_loader&) = delete;
  any_loader& operator=(const any_loader&) = delete;
  virtual ~any_loader() = default;

  /// The next batch of this rank, or nullopt at the end of the epoch (or after `stop()`).
  /// Throws `vbucket::error` when a batch cannot be filled (every replacement failed) or the
  /// staging ring fails.
  virtual std::optional<loaded_batch> next() = 0;
  /// The resume state after the batches handed out so far (steps × world global batches on
  /// top of the schedule's starting point).
  [[nodiscard]] virtual plan_state state() const = 0;
  [[nodiscard]] virtual loader_stats stats() const = 0;
  /// Cancels: no new clip starts, waiting calls return, threads are joined. Batches already
  /// handed out stay valid. Idempotent.
  virtual void stop() = 0;
  /// Batches this loader hands out in all, from its first step to the end of the schedule.
  [[nodiscard]] virtual std::uint64_t steps() const noexcept = 0;
  [[nodiscard]] virtual std::uint32_t rank() const noexcept = 0;
  /// Whether it follows a packed schedule.
  [[nodiscard]] virtual bool packed() const noexcept = 0;

  /// The input iterator of `for (auto& b : loader)`: `*it` is the current batch, which the
  /// loop body may move from (the slot with it); `++it` drops what is left of it and waits for
  /// the next. Equal to `end()` (`std::default_sentinel`) after the last batch or `stop()`.
  class iterator {
   public:
    using value_type = loaded_batch;
    using difference_type = std::ptrdiff_t;

    iterator() = default;
    explicit iterator(any_loader* owner) noexcept : owner_(owner) {}

    loaded_batch& operator*() const noexcept { return *owner_->current_; }
    loaded_batch* operator->() const noexcept { return &*owner_->current_; }
    iterator& operator++() {
      owner_->advance();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept {
      return it.done();
    }

   private:
    [[nodiscard]] bool done() const noexcept { return owner_ == nullptr || !owner_->current_; }

    any_loader* owner_ = nullptr;
  };

  /// Waits for the next batch (unless one is current) and points at it. Throws as `next()`.
  /// One pass: a loop over the loader continues where `next()` or an earlier loop stopped.
  [[nodiscard]] iterator begin() {
    if (!current_) advance();
    return iterator(this);
  }
  [[nodiscard]] std::default_sentinel_t end() const noexcept { return {}; }

 protected:
  /// Drops the current batch (its slot goes back first, so the feeder can use it) and waits
  /// for the next.
  void advance() {
    current_.reset();
    current_ = next();
  }
  /// The range's current batch (trainer's thread only).
  std::optional<loaded_batch> current_;
};

/// The loader of one rank's batches of `Batching` (`fixed_batching`: `batch`es of one shape,
/// `packed_batching`: mixed shapes back to back; see the top of this header).
template <class Decoder, staging_backend Backend, tensor_adapter Tensor = plain_tensor,
          batching_kind Batching = fixed_batching>
  requires clip_decoder<Decoder>
class loader final : public any_loader<Decoder, Backend, Tensor> {
  using loader_interface = any_loader<Decoder, Backend, Tensor>;
  static constexpr bool packs = Batching::mode == batching_mode::packed;

 public:
  using loader_interface::begin;
  using loader_interface::end;
  using typename loader_interface::iterator;
  using typename loader_interface::loaded_batch;
  using typename loader_interface::packed_clips;
  using typename loader_interface::slot_type;
  using batching_type = Batching;
  using plan_type = typename Batching::plan_type;
  /// What it follows: `epoch_schedule`, `packed_schedule` or `held_schedule`.
  using schedule_type = typename detail::loader_schedule<Batching>::type;

  /// Starts the workers on steps [first_step, schedule.steps()) of `rank` (a packed
  /// schedule's step is one packed batch). The decoder and the ring must outlive the loader.
  /// Throws `vbucket::error` on a bad rank or option.
  loader(schedule_type schedule, std::uint32_t rank, Decoder& decoder, staging_ring<Backend>& ring,
         loader_options options = {}, std::uint64_t first_step = 0)
      : schedule_(std::move(schedule)),
        rank_(rank),
        decoder_(decoder),
        ring_(ring),
        options_(std::move(options)),
        normalizer_(options_.normalize),
        first_step_(first_step),
        next_step_(first_step),
        open_step_(first_step),
        start_(std::chrono::steady_clock::now()) {
    if (rank_ >= world_size())
      throw error("loader: rank " + std::to_string(rank_) + " is not below the world size " +
                  std::to_string(world_size()));
    if (options_.workers == 0) throw error("loader: workers must be at least 1");
    if (options_.prefetch == 0) throw error("loader: prefetch must be at least 1");
    if (!(options_.outage_deadline_seconds >= 0.0) || !(options_.outage_retry_seconds > 0.0))
      throw error("loader: outage_deadline_seconds must be ≥ 0 and outage_retry_seconds > 0, got " +
                  std::to_string(options_.outage_deadline_seconds) + " and " +
                  std::to_string(options_.outage_retry_seconds));
    if (ring_.options().slots < options_.prefetch + 1)
      throw error("loader: the staging ring's " + std::to_string(ring_.options().slots) +
                  " slots cannot hold " + std::to_string(options_.prefetch) +
                  " prefetched batches and the one the trainer holds (need at least " +
                  std::to_string(options_.prefetch + 1) + ")");
    if (options_.fields && options_.fields->has_tensors() && packs)
      throw error(
          "loader: tensor files need fixed batches (a packed batch's clips differ in "
          "shape, so their tensors cannot be stacked)");
    if (!options_.pixels && options_.convert)
      throw error("loader: pixels = false decodes nothing, so there is nothing to convert");
    if (first_step > total_steps())
      throw error("loader: first step " + std::to_string(first_step) + " is past the " +
                  std::to_string(total_steps()) + " steps of the schedule");
    feeder_ = std::jthread([this] { feed(); });
    for (unsigned w = 0; w < options_.workers; ++w) workers_.emplace_back([this] { work(); });
  }

  /// Follows `source` (a `batch_sampler`, say) from its current state: its schedule, its rank,
  /// and the step its state points at. Throws `vbucket::error` when the source's batching (a
  /// run-time `packed()`, or held epochs: `held()`) is not the loader's, when the state is not
  /// of the schedule's plan or not at a step boundary of it, and as the other constructor.
  template <loader_source Source>
  loader(const Source& source, Decoder& decoder, staging_ring<Backend>& ring,
         loader_options options = {})
      : loader(schedule_of(source), source.state(), static_cast<std::uint32_t>(source.rank()),
               decoder, ring, std::move(options)) {
    // The source's state names the plan (its fingerprint) and the world it was saved under:
    // the loader's states are positions in that same plan, whatever the source does next.
    const plan_state st = source.state();
    recorded_world_ = st.world.has_value();
    start_world_ = st.world.value_or(world_size());
    fingerprint_ = st.fingerprint;
  }

  loader(const loader&) = delete;
  loader& operator=(const loader&) = delete;
  ~loader() override { stop(); }

 private:
  /// The source constructor's: `schedule` from the step `from` points at.
  loader(const schedule_type& schedule, const plan_state& from, std::uint32_t rank,
         Decoder& decoder, staging_ring<Backend>& ring, loader_options options)
      : loader(schedule, rank, decoder, ring, std::move(options), first_step_of(schedule, from)) {}

 public:
  /// Batches this loader hands out in all, from its first step to the end of the schedule.
  [[nodiscard]] std::uint64_t steps() const noexcept override {
    return total_steps() - first_step_;
  }
  /// Whether it follows a packed schedule (its type's batching).
  [[nodiscard]] bool packed() const noexcept override { return packs; }
  /// The schedule it follows.
  [[nodiscard]] const schedule_type& schedule() const noexcept { return schedule_; }
  /// The packed schedule it follows (`schedule()` of a packed loader).
  template <class B = Batching>
    requires std::same_as<B, packed_batching>
  [[nodiscard]] const packed_schedule& packing_schedule() const noexcept { return schedule_; }
  [[nodiscard]] std::uint32_t rank() const noexcept override { return rank_; }

  /// The next batch of this rank, or nullopt at the end of the epoch (or after `stop()`).
  /// Throws `vbucket::error` when a batch cannot be filled (every replacement failed) or the
  /// staging ring fails.
  std::optional<loaded_batch> next() override {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_lock lock(mutex_);
    if (next_step_ >= total_steps()) return std::nullopt;
    std::size_t ready = 0;
    for (const auto& j : jobs_) {
      if (j->remaining != 0) break;
      ++ready;
    }
    ready_sum_ += ready;
    ++ready_samples_;
    stats_.max_ready = std::max(stats_.max_ready, ready);
    cv_.wait(lock, [&] {
      return stopped_ || failure_ || (!jobs_.empty() && jobs_.front()->remaining == 0);
    });
    stats_.trainer_wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (failure_) std::rethrow_exception(failure_);
    if (stopped_ && (jobs_.empty() || jobs_.front()->remaining != 0)) return std::nullopt;
    std::unique_ptr<job> j = std::move(jobs_.front());
    jobs_.pop_front();
    ++next_step_;
    ++stats_.batches;
    stats_.samples += j->samples.size();
    stats_.repeat_batches += j->info.repeat ? 1u : 0u;
    lock.unlock();
    cv_.notify_all();  // the feeder may open another batch

    tensor_view view;
    view.data = j->slot.data().data();
    view.type = options_.element;
    view.layout = options_.layout;
    if constexpr (!packs) {
      const auto b = static_cast<std::int64_t>(j->samples.size());
      view.shape = clip_shape(b, j->info.frames, j->info.height, j->info.width);
      if (!options_.pixels) view.shape = clip_shape(b, 0, 0, 0);
      return loaded_batch{tensor_traits<Tensor>::wrap(view),
                          j->info,
                          std::move(j->samples),
                          std::move(j->substitutions),
                          std::move(j->slot),
                          std::nullopt,
                          std::move(j->fields)};
    } else {
      return packed_batch_of(*j, view);
    }
  }

  /// The resume state after the batches handed out so far (steps × world global batches on
  /// top of the schedule's starting point).
  [[nodiscard]] plan_state state() const override {
    std::lock_guard lock(mutex_);
    plan_state s = schedule_.state_after(next_step_);
    // After the last step the position may lie past the epoch's N batches (alignment repeats,
    // wherever a resume under another world size put the step boundaries): the sampler accepts
    // up to N + world - 1 (the kill test found a refused end at world 3 after world 2).
    if (recorded_world_)
      s.world = plan_state::position_world(s.consumed, epoch_batches(), world_size(), start_world_);
    s.fingerprint = fingerprint_;
    return s;
  }

  [[nodiscard]] loader_stats stats() const override {
    std::lock_guard lock(mutex_);
    loader_stats s = stats_;
    s.decode_seconds = static_cast<double>(decode_ns_.load()) * 1e-9;
    s.convert_seconds = static_cast<double>(convert_ns_.load()) * 1e-9;
    s.elapsed_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    s.mean_ready =
        ready_samples_ ? static_cast<double>(ready_sum_) / static_cast<double>(ready_samples_) : 0;
    return s;
  }

  /// Cancels: no new clip starts, waiting calls return, threads are joined. Batches already
  /// handed out stay valid. Idempotent.
  void stop() override {
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    stop_source_.request_stop();
    cv_.notify_all();
    if (feeder_.joinable()) feeder_.join();
    for (auto& w : workers_)
      if (w.joinable()) w.join();
    std::lock_guard lock(mutex_);
    jobs_.clear();  // unfinished batches give their slots back
    tasks_.clear();
  }

 private:
  /// A packed job's `loaded_batch`: the flat buffer `view` and the clips' layout.
  template <class Job>
  loaded_batch packed_batch_of(Job& jr, tensor_view view) {
    Job* const j = &jr;
    packed_clips p;
    const std::size_t es = element_size(options_.element);
    view.shape = {static_cast<std::int64_t>(j->offsets.back() / es), 1, 1, 1, 1};
    p.flat = view;
    p.clips.reserve(j->shapes.size());
    for (std::size_t c = 0; c < j->shapes.size(); ++c) {
      tensor_view clip = view;
      clip.data = static_cast<std::uint8_t*>(view.data) + j->offsets[c];
      const sample_shape& s = j->shapes[c];
      clip.shape = clip_shape(1, s.frames, s.height, s.width);
      p.clips.push_back(tensor_traits<Tensor>::wrap(clip));
    }
    p.offsets = std::move(j->offsets);
    p.cu_seqlens = std::move(j->layout.cu_seqlens);
    p.max_seqlen = j->layout.max_seqlen;
    p.shapes = std::move(j->shapes);
    p.buckets = std::move(j->buckets);
    return loaded_batch{tensor_traits<Tensor>::wrap(view),
                        j->info,
                        std::move(j->samples),
                        std::move(j->substitutions),
                        std::move(j->slot),
                        std::move(p),
                        std::move(j->fields)};
  }

  struct job {
    batch info;
    const plan_type* plan = nullptr;  // the plan its batch comes from (`plan_of`)
    slot_type slot;
    std::vector<std::uint32_t> samples;
    std::vector<substitution> substitutions;
    std::vector<sample_shape> shapes;  // per clip (all one shape in a fixed batch)
    std::vector<bucket_id> buckets;    // per clip
    std::vector<std::size_t> offsets;  // n + 1 byte offsets in the slot (output element type)
    packed_layout layout;              // a packed batch's cu_seqlens and max_seqlen
    std::vector<std::vector<field_tensor>> tensors;  // per clip: its tensor files
    batch_fields fields;
    // Clips not yet decoded, plus one for the fields' gathering when there are fields
    // (guarded by mutex_): 0 = ready.
    std::size_t remaining = 0;
  };
  struct task {
    job* j = nullptr;
    std::size_t clip = 0;
  };

  template <class Schedule>
  static std::uint64_t first_step_of(const Schedule& schedule, const plan_state& state) {
    const auto& p = schedule.plan();
    if (state.seed != p.seed() || state.epoch != p.epoch())
      throw error("loader: the source's state " + state.to_string() +
                  " is not of its schedule's plan (seed " + std::to_string(p.seed()) + ", epoch " +
                  std::to_string(p.epoch()) + ")");
    const std::uint64_t world = schedule.world_size();
    if (state.consumed < schedule.consumed() || (state.consumed - schedule.consumed()) % world != 0)
      throw error("loader: the source's state " + state.to_string() +
                  " is not at a step of its schedule (from " + std::to_string(schedule.consumed()) +
                  " consumed, world size " + std::to_string(world) + ")");
    return (state.consumed - schedule.consumed()) / world;
  }

  /// The schedule `source` deals from, which is this loader's batching.
  template <class Source>
  static schedule_type schedule_of(const Source& source) {
    if constexpr (requires { Batching::schedule_of(source); }) {
      return Batching::schedule_of(source);  // held_batching
    } else {
      return dealt_schedule_of(source);
    }
  }
  template <class Source>
  static schedule_type dealt_schedule_of(const Source& source) {
    if constexpr (held_schedule_source<Source>) {
      // Its wrapped plan is one data epoch, not the held epoch a trainer runs: refused.
      if (source.held())
        throw error(
            "loader: the source holds its epochs (the drop-in sampler's held epochs): a loader of "
            "its plan would run the data epoch's length, not the held one; make it with "
            "make_any_loader, or as loader<..., held_batching>");
    }
    if constexpr (requires { static_cast<bool>(source.packed()); }) {
      if (static_cast<bool>(source.packed()) != packs)
        throw error(std::string("loader: the source's batches are ") +
                    (packs ? "fixed" : "packed") + ", this loader's are " +
                    std::string(batching_name(Batching::mode)) +
                    " (a loader of the source's batching: CTAD from the sampler, "
                    "loader<..., packed_batching>, or make_any_loader)");
    }
    if constexpr (packs && packed_schedule_source<Source>) {
      return source.packing_schedule();
    } else if constexpr (requires {
                           { source.schedule() } -> std::convertible_to<schedule_type>;
                         }) {
      return source.schedule();
    } else {
      throw error(std::string("loader: the source has no ") +
                  std::string(batching_name(Batching::mode)) + " schedule");
    }
  }

  [[nodiscard]] std::uint64_t total_steps() const noexcept { return schedule_.steps(); }
  [[nodiscard]] std::uint32_t world_size() const noexcept { return schedule_.world_size(); }
  [[nodiscard]] std::uint64_t seed() const noexcept { return schedule_.plan().seed(); }
  /// The global batches of the epoch the states' positions count (a held epoch: its quota).
  [[nodiscard]] std::uint64_t epoch_batches() const noexcept {
    if constexpr (requires { schedule_.quota(); })
      return schedule_.quota();
    else
      return schedule_.plan().num_batches();
  }
  /// The plan the batch of `step` comes from (a held epoch's carried batches: an earlier
  /// data epoch's): its epoch seeds the crops and replacements, its buckets the replacements.
  [[nodiscard]] const plan_type& plan_of(std::uint64_t step) const {
    if constexpr (requires { schedule_.plan_at(step, rank_); })
      return schedule_.plan_at(step, rank_);
    else
      return schedule_.plan();
  }
  [[nodiscard]] std::array<std::int64_t, 5> clip_shape(std::int64_t n, std::int64_t t,
                                                       std::int64_t h,
                                                       std::int64_t w) const noexcept {
    if (options_.layout == clip_layout::thwc) return {n, t, h, w, 3};
    return {n, 3, t, h, w};
  }

  /// The job of `step`: its batch, and every clip's shape, bucket and place in the slot.
  std::unique_ptr<job> make_job(std::uint64_t step) const {
    auto j = std::make_unique<job>();
    j->plan = &plan_of(step);
    if constexpr (packs) {
      const packed_batch pb = schedule_.at(step, rank_);
      j->info.indices = pb.indices;
      j->info.step = pb.step;
      j->info.position = pb.position;
      j->info.repeat = pb.repeat;
      j->layout = make_packed_layout(pb);
      for (std::size_t c = 0; c < pb.size(); ++c) {
        j->shapes.push_back(pb.shape(c));
        j->buckets.push_back(pb.buckets[c]);
      }
    } else {
      j->info = schedule_.at(step, rank_);
      j->shapes.assign(j->info.indices.size(),
                       sample_shape{j->info.frames, j->info.height, j->info.width});
      j->buckets.assign(j->info.indices.size(), j->info.bucket);
    }
    const std::size_t es = element_size(options_.element);
    j->offsets.reserve(j->shapes.size() + 1);
    j->offsets.push_back(0);
    for (const sample_shape& s : j->shapes)
      j->offsets.push_back(
          j->offsets.back() +
          (options_.pixels ? static_cast<std::size_t>(s.frames * s.height * s.width * 3) * es : 0));
    j->samples.assign(j->info.indices.begin(), j->info.indices.end());
    j->tensors.resize(fields() && fields()->has_tensors() ? j->samples.size() : 0);
    j->remaining = j->samples.size() + (fields() && !j->samples.empty() ? 1 : 0);
    if (fields() && j->samples.empty()) j->fields = fields()->gather({});
    return j;
  }

  /// The samples a failed clip of bucket `b` of `plan` (its batch's) may be replaced by: the
  /// bucket's planned slots (fixed), or its samples in the packed plan's packing order (packed).
  std::span<const std::uint32_t> candidates(const plan_type& plan, bucket_id b) {
    if constexpr (!packs) {
      const plan_bucket& pb = plan.bucket(b);
      return plan.slots().subspan(static_cast<std::size_t>(pb.slot_begin),
                                  static_cast<std::size_t>(pb.batches * pb.batch_size));
    } else {
      std::call_once(bucket_samples_once_, [&] {
        bucket_samples_.resize(plan.num_buckets());
        for (std::uint64_t id = 0; id < plan.num_batches(); ++id) {
          const packed_batch pb = plan.make_batch(id);
          for (std::size_t c = 0; c < pb.size(); ++c)
            bucket_samples_[static_cast<std::size_t>(pb.buckets[c])].push_back(pb.indices[c]);
        }
      });
      return bucket_samples_[static_cast<std::size_t>(b)];
    }
  }

  /// Whether the workers convert each decoded clip (else the decoder writes the output).
  [[nodiscard]] bool converts() const noexcept {
    return options_.pixels &&
           (options_.element != element_type::u8 || static_cast<bool>(options_.convert));
  }
  [[nodiscard]] const field_table* fields() const noexcept {
    return options_.fields && !options_.fields->empty() ? options_.fields.get() : nullptr;
  }
  /// The row of the fields that holds `sample`'s (`loader_options::field_row`).
  [[nodiscard]] std::uint32_t field_row(std::uint32_t sample) const {
    return options_.field_row ? options_.field_row(sample) : sample;
  }
  /// The fields of the samples `j` holds, its tensor files stacked.
  [[nodiscard]] batch_fields gather_fields(job& j) const {
    if (!options_.field_row) return fields()->gather(j.samples, j.tensors);
    std::vector<std::uint32_t> rows;
    rows.reserve(j.samples.size());
    for (const std::uint32_t s : j.samples) rows.push_back(options_.field_row(s));
    return fields()->gather(rows, j.tensors);
  }

  /// What identifies `sample`'s source in the set of failures of this epoch: its file when the
  /// decoder names files (and decodes), else the sample.
  /// (Appended to a one-letter string rather than `"f" + std::string(...)`: GCC 12 reports a
  /// false -Wrestrict on that form once inlined.)
  [[nodiscard]] std::string failure_key(std::uint32_t sample) const {
    std::string key(1, 's');
    if constexpr (file_naming_decoder<Decoder>)
      if (options_.pixels) {
        key[0] = 'f';
        return key.append(decoder_.path(sample));
      }
    return key.append(std::to_string(sample));
  }

  /// Thrown to a worker waiting out an outage when the loader stops.
  struct stopped_while_stalled {};

  /// Waits while the source is down (`health_`); true when this worker is the one that tries
  /// the source again now.
  bool wait_for_source() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (stopped_ || failure_) throw stopped_while_stalled{};
      if (!health_.down) return false;
      if (!health_.probing && std::chrono::steady_clock::now() >= health_.next_try) {
        health_.probing = true;
        return true;
      }
      if (health_.probing)
        cv_.wait(lock);
      else
        cv_.wait_until(lock, health_.next_try);
    }
  }

  /// Records how an attempt went for the shared health state: true when the source answered
  /// (`unavailable` empty: success or a permanent failure), false when it is down (the caller
  /// waits and tries the same sample again). Throws past the outage deadline.
  bool source_answered(bool probe, const std::string& unavailable) {
    {
      std::lock_guard lock(mutex_);
      const auto now = std::chrono::steady_clock::now();
      if (probe) health_.probing = false;
      if (unavailable.empty()) {
        if (health_.down)
          stats_.stall_seconds += std::chrono::duration<double>(now - health_.since).count();
        health_.down = false;
      } else {
        ++stats_.unavailable;
        if (!health_.down) {
          health_.down = true;
          health_.since = now;
          health_.backoff = std::min(0.25, options_.outage_retry_seconds);
          ++stats_.stalls;
        } else if (probe) {
          health_.backoff = std::min(2 * health_.backoff, options_.outage_retry_seconds);
        }
        if (probe || health_.next_try < now)
          health_.next_try = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::duration<double>(health_.backoff));
        const double down = std::chrono::duration<double>(now - health_.since).count();
        if (down > options_.outage_deadline_seconds)
          throw error("loader: the source has been unreachable for " + std::to_string(down) +
                      " s, past the outage deadline (" +
                      std::to_string(options_.outage_deadline_seconds) + " s): " + unavailable);
      }
    }
    cv_.notify_all();
    return unavailable.empty();
  }

  /// `attempt_once` through outages: a `source_unavailable` failure is not the clip's; the
  /// worker waits for the source (one shared health state) and tries the same sample again.
  std::optional<std::string> attempt(job& j, std::size_t clip, const sample_shape& shape,
                                     std::uint32_t sample, std::span<std::uint8_t> out) {
    for (;;) {
      const bool probe = wait_for_source();
      std::optional<std::string> err;
      std::string unavailable;
      try {
        err = attempt_once(j, clip, shape, sample, out);
      } catch (const source_unavailable& e) {
        unavailable = e.what();
        if (unavailable.empty()) unavailable = "source unavailable";
      }
      if (source_answered(probe, unavailable)) return err;
    }
  }

  /// One attempt at clip `clip` of `j` with `sample`: the decode (into `out`) and its tensor
  /// files; nullopt on success, else the message. Throws `source_unavailable` as the decoder.
  std::optional<std::string> attempt_once(job& j, std::size_t clip, const sample_shape& shape,
                                          std::uint32_t sample, std::span<std::uint8_t> out) {
    std::optional<std::string> err;
    if (options_.pixels) err = try_decode(task_of(j, shape, sample), out);
    if (!err && !j.tensors.empty()) {
      try {
        err = fields()->read_tensors(field_row(sample), j.tensors[clip]);
      } catch (const std::exception& e) {
        err = std::string(e.what());
      }
    }
    if (err) {
      std::lock_guard lock(mutex_);
      failed_keys_.insert(failure_key(sample));
    }
    return err;
  }
  [[nodiscard]] bool failed_before(std::uint32_t sample) const {
    const std::string key = failure_key(sample);
    std::lock_guard lock(mutex_);
    return failed_keys_.contains(key);
  }

  void fail(std::exception_ptr e) {
    {
      std::lock_guard lock(mutex_);
      if (!failure_) failure_ = e;
    }
    cv_.notify_all();
  }

  /// Opens batches in step order, at most `prefetch` ahead of the trainer.
  void feed() {
    try {
      while (true) {
        std::uint64_t step = 0;
        {
          std::unique_lock lock(mutex_);
          cv_.wait(lock, [&] { return stopped_ || open_step_ < next_step_ + options_.prefetch; });
          if (stopped_ || failure_ || open_step_ >= total_steps()) return;
          step = open_step_;
        }
        std::unique_ptr<job> j = make_job(step);
        const auto t0 = std::chrono::steady_clock::now();
        auto [status, s] = ring_.try_acquire_for(std::max<std::size_t>(1, j->offsets.back()),
                                                 std::chrono::hours(24), stop_source_.get_token());
        const double waited =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (status != acquire_status::ok) {
          if (status == acquire_status::closed)
            throw error("loader: the staging ring was closed under the loader");
          return;  // cancelled (or a day without a free slot: the trainer is gone)
        }
        j->slot = std::move(s);
        std::lock_guard lock(mutex_);
        stats_.slot_wait_seconds += waited;
        if (stopped_) return;
        for (std::size_t c = 0; c < j->samples.size(); ++c) tasks_.push_back({j.get(), c});
        if (j->samples.empty()) j->remaining = 0;
        jobs_.push_back(std::move(j));
        ++open_step_;
        cv_.notify_all();
      }
    } catch (...) {
      fail(std::current_exception());
    }
  }

  clip_task task_of(const job& j, const sample_shape& s, std::uint32_t sample) const {
    clip_task t;
    t.sample = sample;
    t.frames = s.frames;
    t.height = s.height;
    t.width = s.width;
    t.layout = converts() ? clip_layout::thwc : options_.layout;
    t.seed = crop_seed(seed(), j.plan->epoch(), sample);
    return t;
  }

  /// Decodes one clip; nullopt on success, else the error message.
  std::optional<std::string> try_decode(const clip_task& t, std::span<std::uint8_t> out) {
    const auto t0 = std::chrono::steady_clock::now();
    std::optional<std::string> err;
    try {
      err = decoder_.decode(t, out);
    } catch (const source_unavailable&) {
      decode_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
      throw;  // not the clip's failure: attempt() waits for the source
    } catch (const std::exception& e) {
      err = std::string(e.what());
    } catch (...) {
      err = std::string("unknown exception from the decoder");
    }
    decode_ns_ +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    return err;
  }

  /// Writes a decoded clip into its part of the slot, in the output type and layout.
  void convert(const clip_task& t, std::span<const std::uint8_t> decoded, std::uint8_t* out) {
    tensor_view clip;
    clip.data = out;
    clip.type = options_.element;
    clip.layout = options_.layout;
    if (options_.layout == clip_layout::thwc)
      clip.shape = {1, t.frames, t.height, t.width, 3};
    else
      clip.shape = {1, 3, t.frames, t.height, t.width};
    const auto t0 = std::chrono::steady_clock::now();
    if (options_.convert)
      options_.convert(t, decoded, clip);
    else
      normalizer_(decoded, clip);
    convert_ns_ +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count();
  }

  void work() {
    std::vector<std::uint8_t> scratch;  // a decoded clip waiting for conversion
    try {
      while (true) {
        task tk;
        {
          std::unique_lock lock(mutex_);
          cv_.wait(lock, [&] { return stopped_ || failure_ || !tasks_.empty(); });
          if (stopped_ || failure_) return;
          tk = tasks_.front();
          tasks_.pop_front();
        }
        job& j = *tk.j;
        auto* base = reinterpret_cast<std::uint8_t*>(j.slot.data().data());
        std::uint8_t* const clip_out = base + j.offsets[tk.clip];
        const sample_shape& shape = j.shapes[tk.clip];
        const bucket_id bucket = j.buckets[tk.clip];
        const auto decoded_bytes =
            static_cast<std::size_t>(shape.frames * shape.height * shape.width * 3);
        if (converts() && scratch.size() < decoded_bytes) scratch.resize(decoded_bytes);
        const std::span<std::uint8_t> out(converts() ? scratch.data() : clip_out, decoded_bytes);
        const std::uint32_t planned = j.samples[tk.clip];
        std::uint32_t sample = planned;
        std::optional<std::string> err = attempt(j, tk.clip, shape, sample, out);
        std::uint64_t decoded = options_.pixels ? 1 : 0, failed = err ? 1 : 0;
        std::optional<substitution> sub;
        if (err) {
          sub = substitution{j.info.position, tk.clip, planned, planned, *err};
          const std::string planned_key = failure_key(planned);
          // Replacement candidates: deterministic draws over the bucket's planned slots. A
          // candidate of the failed file (the sample itself, or another row naming its file)
          // is passed over without counting as an attempt (at most 16 · max_attempts draws);
          // one whose file failed elsewhere this epoch counts as a failed attempt without being
          // tried, so the choice does not depend on which worker saw that failure first (a
          // file that fails, fails every time).
          const std::span<const std::uint32_t> slots = candidates(*j.plan, bucket);
          auto draws = substitution_stream(seed(), j.plan->epoch(), j.info.position, tk.clip);
          const std::uint64_t max_draws = 16ULL * options_.max_attempts;
          std::uint64_t drawn = 0;
          unsigned tried = 0, failed_earlier = 0;  // attempts decoded; files known to fail
          for (unsigned a = 0;
               a < options_.max_attempts && err && !slots.empty() && drawn < max_draws;
               ++a, ++drawn) {
            std::uint32_t candidate = slots[draws.next_u64() % slots.size()];
            while ((candidate == planned || failure_key(candidate) == planned_key) &&
                   ++drawn < max_draws)
              candidate = slots[draws.next_u64() % slots.size()];
            if (candidate == planned || failure_key(candidate) == planned_key) break;
            if (failed_before(candidate)) {
              ++failed_earlier;
              continue;
            }
            sample = candidate;
            ++tried;
            err = attempt(j, tk.clip, shape, sample, out);
            decoded += options_.pixels ? 1u : 0u;
            failed += err ? 1u : 0u;
          }
          if (err) {
            const std::string where = "loader: batch at position " +
                                      std::to_string(j.info.position) + " (bucket " +
                                      std::to_string(bucket) + "): sample " +
                                      std::to_string(planned) + " failed (" + sub->error + ")";
            if (tried + failed_earlier == 0)
              throw error(where +
                          " and its bucket has no other sample (of another file) to replace it");
            throw error(where + " and " + std::to_string(tried + failed_earlier) +
                        " replacements of its bucket failed too (" + std::to_string(tried) +
                        " decoded, " + std::to_string(failed_earlier) +
                        " of files that failed earlier this epoch)" +
                        (tried > 0 ? "; last: " + *err : std::string()));
          }
          sub->replacement = sample;
        }
        if (converts()) convert(task_of(j, shape, sample), out, clip_out);
        bool gather = false;
        {
          std::lock_guard lock(mutex_);
          stats_.decoded += decoded;
          stats_.failed += failed;
          if (sub) {
            ++stats_.substitutions;
            j.samples[tk.clip] = sample;
            j.substitutions.push_back(std::move(*sub));
          }
          --j.remaining;
          gather = fields() != nullptr && j.remaining == 1;
        }
        if (gather) {  // the batch's last clip: its fields, by the samples it holds
          batch_fields f = gather_fields(j);
          j.tensors.clear();
          std::lock_guard lock(mutex_);
          j.fields = std::move(f);
          --j.remaining;
        }
        cv_.notify_all();
      }
    } catch (const stopped_while_stalled&) {
      return;
    } catch (...) {
      fail(std::current_exception());
    }
  }

  schedule_type schedule_;
  std::once_flag bucket_samples_once_;  // candidates() of a packed loader
  std::vector<std::vector<std::uint32_t>> bucket_samples_;
  std::uint32_t rank_;
  Decoder& decoder_;
  staging_ring<Backend>& ring_;
  loader_options options_;
  clip_normalizer normalizer_;
  std::uint64_t first_step_;
  bool recorded_world_ = false;               // state() records the world size
  std::uint32_t start_world_ = 1;             // the world the source's state was reached under
  std::optional<std::uint64_t> fingerprint_;  // of the plan, as the source's state gave it

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<job>> jobs_;  // open batches, in step order
  std::deque<task> tasks_;                 // clips not yet started
  std::uint64_t next_step_;                // the step `next()` hands out next
  std::uint64_t open_step_;                // the step the feeder opens next
  bool stopped_ = false;
  std::exception_ptr failure_;
  loader_stats stats_;
  std::uint64_t ready_sum_ = 0, ready_samples_ = 0;
  std::unordered_set<std::string> failed_keys_;  // failure_key of every failure this epoch
  struct source_health {  // shared by the workers: the source down, and when to try again
    bool down = false;
    bool probing = false;  // a worker is trying it now
    std::chrono::steady_clock::time_point since{}, next_try{};
    double backoff = 0;
  } health_;
  std::atomic<std::int64_t> decode_ns_{0};
  std::atomic<std::int64_t> convert_ns_{0};
  std::chrono::steady_clock::time_point start_;
  std::stop_source stop_source_;
  std::jthread feeder_;
  std::vector<std::jthread> workers_;  // last: joined by stop() before the members above go
};

namespace detail {
/// The batching of a loader source: its `batching_type` (a `batch_sampler`), else fixed.
template <class Source>
struct source_batching {
  using type = fixed_batching;
};
template <class Source>
  requires requires { typename Source::batching_type; }
struct source_batching<Source> {
  using type = typename Source::batching_type;
};
}  // namespace detail

/// `vbucket::loader l(schedule, rank, decoder, ring)` and `vbucket::loader l(sampler, decoder,
/// ring)`: the decoder's type as given (const or not), the ring's backend, `plain_tensor`, the
/// schedule's or the sampler's batching.
template <class Decoder, class Backend>
loader(epoch_schedule, std::uint32_t, Decoder&, staging_ring<Backend>&, loader_options = {},
       std::uint64_t = 0) -> loader<Decoder, Backend>;
template <class Decoder, class Backend>
loader(packed_schedule, std::uint32_t, Decoder&, staging_ring<Backend>&, loader_options = {},
       std::uint64_t = 0) -> loader<Decoder, Backend, plain_tensor, packed_batching>;
template <class Decoder, class Backend>
loader(held_schedule, std::uint32_t, Decoder&, staging_ring<Backend>&, loader_options = {},
       std::uint64_t = 0) -> loader<Decoder, Backend, plain_tensor, held_batching>;
template <loader_source Source, class Decoder, class Backend>
loader(const Source&, Decoder&, staging_ring<Backend>&, loader_options = {})
    -> loader<Decoder, Backend, plain_tensor, typename detail::source_batching<Source>::type>;

/// The loader a source's batching needs, as its interface: a source that chooses at run time
/// (`packed()`, as `any_sampler`) gets a packed or a fixed `loader`, one whose epochs are held
/// (`held()`, as `opensora_sampler` by default in Python) a `held_batching` one. Throws as
/// `loader`'s constructor.
///
///     std::unique_ptr<vbucket::any_loader<my_decoder, vbucket::host_backend>> l =
///         vbucket::make_any_loader(*sampler, decoder, ring, {.workers = 8});
///     for (auto& b : *l) train(b);
template <tensor_adapter Tensor = plain_tensor, loader_source Source, class Decoder,
          staging_backend Backend>
  requires clip_decoder<Decoder> std::unique_ptr<any_loader<Decoder, Backend, Tensor>>
  make_any_loader(const Source& source, Decoder& decoder, staging_ring<Backend>& ring,
                  loader_options options = {}) {
    if constexpr (held_schedule_source<Source>) {
      if (source.held())
        return std::make_unique<loader<Decoder, Backend, Tensor, held_batching>>(
            source, decoder, ring, std::move(options));
    }
    if constexpr (packed_schedule_source<Source>) {
      if (source.packed())
        return std::make_unique<loader<Decoder, Backend, Tensor, packed_batching>>(
            source, decoder, ring, std::move(options));
    }
    if constexpr (schedule_source<Source>) {
      return std::make_unique<loader<Decoder, Backend, Tensor, fixed_batching>>(
          source, decoder, ring, std::move(options));
    } else {
      throw error("make_any_loader: the source is not packed and has no fixed schedule");
    }
  }

}  // namespace vbucket
