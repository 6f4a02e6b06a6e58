#pragma once
/// Staging: a bounded ring of host buffers that producers (decoder threads) fill with a batch
/// and submit for an asynchronous copy to its destination (a GPU buffer with the CUDA backend).
/// A slot goes back to the pool only when its copy has completed, so a producer never
/// overwrites memory that a copy engine is still reading.
///
/// The ring is generic over a `staging_backend`: how host memory is allocated (pinned with
/// `vbucket::cuda::pinned_backend`, plain here with `host_backend`), how a copy starts and
/// how its completion is observed. `host_backend` runs the same ring without a GPU: a plain
/// memcpy that is complete at once, or, for tests, a copy engine thread that completes copies
/// later and in order, as a CUDA stream does.
///
/// Memory is bounded twice: at most `slots` buffers are held by producers or in flight, and
/// the bytes allocated never exceed `max_bytes`. Buffers come in size classes (eight per
/// octave, at most 12.5 % above the request) and are reused; the pool grows only when
/// `grow` is set, and can be sized up front from a bucket config (`reserve_for`).

#include <algorithm>           // std::max, std::min
#include <atomic>              // std::atomic
#include <chrono>              // std::chrono::steady_clock
#include <condition_variable>  // std::condition_variable
#include <cstddef>             // std::byte, std::size_t
#include <cstdint>             // std::uint64_t
#include <cstring>             // std::memcpy
#include <deque>               // std::deque
#include <exception>           // std::exception_ptr
#include <limits>              // std::numeric_limits
#include <memory>              // std::shared_ptr
#include <mutex>               // std::mutex
#include <new>                 // std::align_val_t
#include <optional>            // std::optional
#include <span>                // std::span
#include <stop_token>          // std::stop_token, std::stop_callback
#include <string>              // std::to_string
#include <thread>              // std::jthread
#include <type_traits>         // std::is_nothrow_move_constructible_v
#include <utility>             // std::exchange, std::move
#include <vector>              // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/bucket/bucket_config.hpp"

namespace vbucket {

// ---------------------------------------------------------------------------------------------
// Batch sizes in bytes.
// ---------------------------------------------------------------------------------------------

/// Bytes of one uint8 THWC batch of bucket `id`: batch size × frames × H × W × channels.
/// 0 for a disabled bucket. Throws `vbucket::error` naming the bucket if it overflows.
inline std::size_t batch_bytes(const bucket_config& config, bucket_id id,
                               std::size_t channels = 3) {
  const auto& r = config.resolution_of(id);
  const auto& f = config.frames_of(id);
  const auto& a = config.ratio_of(id);
  const std::uint64_t factors[] = {
      static_cast<std::uint64_t>(f.batch_size), static_cast<std::uint64_t>(f.frames),
      static_cast<std::uint64_t>(a.height), static_cast<std::uint64_t>(a.width), channels};
  std::uint64_t bytes = 1;
  for (const auto x : factors) {
    if (x != 0 && bytes > std::numeric_limits<std::size_t>::max() / x)
      throw error("bucket \"" + r.info.name + "\" -> \"" + std::to_string(f.frames) + "\" -> \"" +
                  a.key + "\": batch bytes overflow size_t");
    bytes *= x;
  }
  return static_cast<std::size_t>(bytes);
}

/// The largest `batch_bytes` over the config's buckets (0 when every bucket is disabled).
inline std::size_t max_batch_bytes(const bucket_config& config, std::size_t channels = 3) {
  std::size_t most = 0;
  for (std::size_t id = 0; id < config.num_buckets(); ++id)
    most = std::max(most, batch_bytes(config, static_cast<bucket_id>(id), channels));
  return most;
}

/// The size class of a request: at least 4 KiB, rounded up to one of eight sizes per octave.
constexpr std::size_t staging_size_class(std::size_t bytes) noexcept {
  constexpr std::size_t min_class = 4096;
  if (bytes <= min_class) return min_class;
  int top = 0;  // index of the highest set bit of bytes - 1
  for (std::size_t v = bytes - 1; v > 1; v >>= 1) ++top;
  const std::size_t step = std::size_t{1} << (top - 3);  // an eighth of the octave above 2^top
  const std::size_t rounded = (bytes + step - 1) / step * step;
  return rounded < bytes ? bytes : rounded;  // wrap-around near SIZE_MAX: keep the request
}

// ---------------------------------------------------------------------------------------------
// Backends.
// ---------------------------------------------------------------------------------------------

/// What the ring needs of a backend. `allocate` returns host memory for `n` bytes (pinned for
/// a GPU backend) or throws `vbucket::error`; `deallocate` frees it. `copy_async(dst, src, n)`
/// starts a copy of `n` bytes from staging memory to `dst` and returns an event; `wait(e)`
/// blocks until that copy is complete and throws `vbucket::error` if it failed; `ready(e)`
/// asks without blocking. Copies submitted through one backend complete in submission order
/// (a CUDA stream's order), so the ring waits for them first-in, first-out.
template <class B>
concept staging_backend = requires(B& b, std::size_t n, std::byte* p, const std::byte* src,
                                   void* dst, typename B::event& e) {
  typename B::event;
  requires std::is_nothrow_move_constructible_v<typename B::event>;
  { b.allocate(n) } -> std::same_as<std::byte*>;
  { b.deallocate(p, n) }
  noexcept;
  { b.copy_async(dst, src, n) } -> std::same_as<typename B::event>;
  b.wait(e);
  { b.ready(e) } -> std::same_as<bool>;
};

/// Plain host memory; the "device" is any host buffer. In the default mode a copy is a memcpy
/// done inside `copy_async` and complete at once. With `async_copies`, a copy engine thread
/// performs copies in submission order, each taking at least `copy_delay` — what the ring
/// sees from a GPU — so every waiting path of the ring can be tested without one.
/// `fail_copy_after` makes copy number n (0-based) and later ones fail (error injection).
class host_backend {
 public:
  struct options {
    bool async_copies = false;
    std::chrono::microseconds copy_delay{0};
    std::uint64_t fail_copy_after = std::numeric_limits<std::uint64_t>::max();
  };

 private:
  struct job {
    void* dst = nullptr;
    const std::byte* src = nullptr;
    std::size_t n = 0;
    bool fail = false;
    bool done = false;  // guarded by the backend's mutex
  };

 public:
  /// Completion of one copy.
  class event {
   public:
    event() = default;
    event(event&&) noexcept = default;
    event& operator=(event&&) noexcept = default;

   private:
    friend class host_backend;
    explicit event(std::shared_ptr<job> j) : job_(std::move(j)) {}
    std::shared_ptr<job> job_;  // null: complete at construction (synchronous copy)
  };

  host_backend() : host_backend(options{}) {}
  VBUCKET_COMPILED_INLINE explicit host_backend(options o);

  host_backend(const host_backend&) = delete;
  host_backend& operator=(const host_backend&) = delete;
  VBUCKET_COMPILED_INLINE ~host_backend();

  VBUCKET_COMPILED_INLINE std::byte* allocate(std::size_t n);

  void deallocate(std::byte* p, std::size_t) noexcept {
    ::operator delete (p, std::align_val_t{alignment});
  }

  VBUCKET_COMPILED_INLINE event copy_async(void* dst, const std::byte* src, std::size_t n);

  VBUCKET_COMPILED_INLINE void wait(event& e);

  VBUCKET_COMPILED_INLINE bool ready(event& e);

  /// Copies started so far.
  [[nodiscard]] std::uint64_t copies() const noexcept { return copies_; }

  static constexpr std::size_t alignment = 256;

 private:
  VBUCKET_COMPILED_INLINE void run_engine(std::stop_token stop);

  options options_;
  std::atomic<std::uint64_t> copies_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<job>> queue_;
  std::jthread engine_;  // last: joined before the members above are destroyed
};

#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE host_backend::host_backend(options o) : options_(o) {
  if (options_.async_copies)
    engine_ = std::jthread([this](std::stop_token stop) { run_engine(stop); });
}

VBUCKET_COMPILED_INLINE host_backend::~host_backend() {
  if (engine_.joinable()) {
    engine_.request_stop();
    {
      std::lock_guard lock(mutex_);  // the engine checks the stop flag under the lock
    }
    cv_.notify_all();
    engine_.join();
  }
}

VBUCKET_COMPILED_INLINE std::byte* host_backend::allocate(std::size_t n) {
  try {
    return static_cast<std::byte*>(::operator new (n, std::align_val_t{alignment}));
  } catch (const std::bad_alloc&) {
    throw error("host staging: cannot allocate " + std::to_string(n) + " bytes");
  }
}

VBUCKET_COMPILED_INLINE host_backend::event host_backend::copy_async(void* dst,
                                                                     const std::byte* src,
                                                                     std::size_t n) {
  const bool fail = copies_++ >= options_.fail_copy_after;
  if (!options_.async_copies) {
    if (fail) return event(std::make_shared<job>(job{dst, src, n, true, true}));
    if (n > 0) std::memcpy(dst, src, n);
    return event();
  }
  auto j = std::make_shared<job>(job{dst, src, n, fail, false});
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(j);
  }
  cv_.notify_all();
  return event(std::move(j));
}

VBUCKET_COMPILED_INLINE void host_backend::wait(event& e) {
  if (!e.job_) return;
  {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return e.job_->done; });
  }
  if (e.job_->fail) throw error("host staging: copy failed (injected failure)");
}

VBUCKET_COMPILED_INLINE bool host_backend::ready(event& e) {
  if (!e.job_) return true;
  std::lock_guard lock(mutex_);
  return e.job_->done;
}

VBUCKET_COMPILED_INLINE void host_backend::run_engine(std::stop_token stop) {
  std::unique_lock lock(mutex_);
  while (true) {
    cv_.wait(lock, [&] { return stop.stop_requested() || !queue_.empty(); });
    if (queue_.empty()) return;  // stop requested and nothing left: a stream drains first
    auto j = queue_.front();
    queue_.pop_front();
    lock.unlock();
    if (options_.copy_delay.count() > 0) std::this_thread::sleep_for(options_.copy_delay);
    if (!j->fail && j->n > 0) std::memcpy(j->dst, j->src, j->n);
    lock.lock();
    j->done = true;
    cv_.notify_all();
  }
}
#endif  // VBUCKET_HEADER_DEFINITIONS

static_assert(staging_backend<host_backend>);

// ---------------------------------------------------------------------------------------------
// The ring.
// ---------------------------------------------------------------------------------------------

struct staging_options {
  /// Buffers held by producers or in flight at once (the ring's depth).
  std::size_t slots = 4;
  /// Hard cap on the bytes the pool ever holds.
  std::size_t max_bytes = std::numeric_limits<std::size_t>::max();
  /// Whether `acquire` may allocate when no free buffer is large enough. With `false`, only
  /// what `reserve`/`reserve_for` allocated is used.
  bool grow = true;
};

/// Counters, for logs and tests.
struct staging_stats {
  std::size_t bytes_allocated = 0;  // held by the pool now
  std::size_t peak_bytes = 0;
  std::size_t buffers = 0;  // held by the pool now
  std::uint64_t allocations = 0;
  std::uint64_t frees = 0;  // buffers released to make room under the cap
  std::uint64_t submitted = 0;
  std::uint64_t completed = 0;
  std::uint64_t abandoned = 0;     // slots released without a copy
  std::uint64_t waits = 0;         // acquires that had to block
  std::size_t peak_in_flight = 0;  // copies submitted and not yet complete
  std::uint64_t bytes_copied = 0;
};

/// Why `try_acquire_for` returned no slot.
enum class acquire_status { ok, timeout, cancelled, closed };

template <staging_backend Backend>
class staging_ring {
  struct buffer {
    std::byte* data = nullptr;
    std::size_t size = 0;
  };

 public:
  /// A producer's hold on one buffer: write the batch into `data()`, then `submit` it. A slot
  /// destroyed without being submitted goes back to the pool (counted as abandoned).
  class slot {
   public:
    slot() = default;
    slot(slot&& o) noexcept : ring_(std::exchange(o.ring_, nullptr)), buf_(o.buf_) {}
    slot& operator=(slot&& o) noexcept {
      if (this != &o) {
        reset();
        ring_ = std::exchange(o.ring_, nullptr);
        buf_ = o.buf_;
      }
      return *this;
    }
    ~slot() { reset(); }

    /// The whole buffer (at least the bytes asked for).
    [[nodiscard]] std::span<std::byte> data() const noexcept { return {buf_.data, buf_.size}; }
    [[nodiscard]] explicit operator bool() const noexcept { return ring_ != nullptr; }

   private:
    friend class staging_ring;
    slot(staging_ring* r, buffer b) : ring_(r), buf_(b) {}
    void reset() noexcept {
      if (ring_) std::exchange(ring_, nullptr)->abandon(buf_);
    }
    staging_ring* ring_ = nullptr;
    buffer buf_;
  };

  /// Identifies a submitted copy; `wait(ticket)` blocks until it is complete.
  struct ticket {
    std::uint64_t sequence = 0;
  };

  /// Starts the completion thread. The backend must outlive the ring.
  explicit staging_ring(Backend& backend, staging_options options = {})
      : backend_(backend), options_(options) {
    if (options_.slots == 0) throw error("staging: slots must be at least 1");
    reaper_ = std::jthread([this] { reap(); });
  }
  staging_ring(const staging_ring&) = delete;
  staging_ring& operator=(const staging_ring&) = delete;

  /// `close()`, then frees every buffer. Slots still held by producers must be gone first.
  ~staging_ring() {
    close_quietly();
    std::lock_guard lock(mutex_);
    for (const auto& b : free_) backend_.deallocate(b.data, b.size);
  }

  /// Allocates `count` buffers for `bytes` each up front (in addition to what is held), so
  /// that `acquire` does not allocate during training. Throws past `max_bytes`.
  void reserve(std::size_t bytes, std::size_t count) {
    const std::size_t size = staging_size_class(bytes);
    for (std::size_t i = 0; i < count; ++i) {
      {
        std::lock_guard lock(mutex_);
        check_usable();
        if (size > options_.max_bytes - std::min(options_.max_bytes, allocated_))
          throw error("staging: reserving " + std::to_string(count) + " buffers of " +
                      std::to_string(size) + " bytes exceeds the cap of " +
                      std::to_string(options_.max_bytes) + " bytes");
        allocated_ += size;  // claimed before the (slow) allocation outside the lock
      }
      std::byte* p = nullptr;
      try {
        p = backend_.allocate(size);
      } catch (...) {
        std::lock_guard lock(mutex_);
        allocated_ -= size;
        throw;
      }
      std::lock_guard lock(mutex_);
      free_.push_back({p, size});
      note_allocation(size);
    }
  }

  /// `slots` buffers for the largest batch of `config` (uint8 THWC with `channels`).
  void reserve_for(const bucket_config& config, std::size_t channels = 3) {
    const std::size_t bytes = max_batch_bytes(config, channels);
    if (bytes == 0) throw error("staging: the bucket config has no enabled bucket");
    reserve(bytes, options_.slots);
  }

  /// Blocks until a buffer of at least `bytes` is available and returns it. Throws
  /// `vbucket::error` when the ring is closed, `stop` is requested, the request can never be
  /// met (larger than the cap, or no such buffer and no growth), or a copy failed.
  slot acquire(std::size_t bytes, std::stop_token stop = {}) {
    slot s;
    const auto status = acquire_until(bytes, std::nullopt, stop, s);
    if (status == acquire_status::cancelled) throw error("staging: acquire cancelled");
    if (status == acquire_status::closed) throw error("staging: the ring is closed");
    return s;
  }

  /// As `acquire`, but gives up after `timeout`, on `stop` or when the ring closes, and says
  /// which in the status (the slot is empty unless the status is `ok`).
  std::pair<acquire_status, slot> try_acquire_for(std::size_t bytes,
                                                  std::chrono::nanoseconds timeout,
                                                  std::stop_token stop = {}) {
    slot s;
    const auto status = acquire_until(bytes, std::chrono::steady_clock::now() + timeout, stop, s);
    return {status, std::move(s)};
  }

  /// Starts the copy of the first `n` bytes of `s` to `dst`; the buffer returns to the pool
  /// when the copy completes. `dst` must stay valid until then. Throws on `n` larger than
  /// the slot, on a closed ring and on a backend error (the slot is then released).
  ticket submit(slot&& s, void* dst, std::size_t n) {
    if (!s) throw error("staging: submit of an empty slot");
    if (s.ring_ != this) throw error("staging: submit of a slot from another ring");
    const buffer b = s.buf_;
    s.ring_ = nullptr;  // from here on the ring owns the buffer
    if (n > b.size) {
      abandon(b);
      throw error("staging: submit of " + std::to_string(n) + " bytes from a slot of " +
                  std::to_string(b.size));
    }
    std::unique_lock lock(mutex_);
    if (closed_ || failure_) {
      const auto failure = failure_;
      lock.unlock();
      abandon(b);
      if (failure) std::rethrow_exception(failure);
      throw error("staging: the ring is closed");
    }
    // Under the lock: copies reach the backend in sequence order, which the reaper relies on.
    typename Backend::event e;
    try {
      e = backend_.copy_async(dst, b.data, n);
    } catch (...) {
      lock.unlock();
      abandon(b);
      throw;
    }
    const std::uint64_t seq = ++submitted_;
    --held_;
    in_flight_.push_back({b, std::move(e), seq});
    stats_.submitted = submitted_;
    stats_.bytes_copied += n;
    stats_.peak_in_flight = std::max(stats_.peak_in_flight, in_flight_.size());
    lock.unlock();
    cv_.notify_all();
    return {seq};
  }

  /// Blocks until the copy of `t` is complete; throws if it or an earlier copy failed.
  void wait(ticket t) {
    std::unique_lock lock(mutex_);
    const auto failed = [&] { return failure_ && failed_sequence_ <= t.sequence; };
    cv_.wait(lock, [&] { return completed_ >= t.sequence || failed(); });
    if (failed()) std::rethrow_exception(failure_);
  }

  /// Blocks until every submitted copy is complete; throws if a copy failed.
  void drain() { wait({submitted()}); }

  /// Stops the ring: waiting and later acquires fail with `closed`, submits are refused, and
  /// the copies in flight are waited for (a clean shutdown with work in flight). Idempotent.
  /// Rethrows the first copy failure, if any, once.
  void close() {
    close_quietly();
    std::lock_guard lock(mutex_);
    if (failure_ && !failure_reported_) {
      failure_reported_ = true;
      std::rethrow_exception(failure_);
    }
  }

  [[nodiscard]] std::uint64_t submitted() const {
    std::lock_guard lock(mutex_);
    return submitted_;
  }
  [[nodiscard]] staging_stats stats() const {
    std::lock_guard lock(mutex_);
    staging_stats s = stats_;
    s.bytes_allocated = allocated_;
    s.buffers = free_.size() + held_ + in_flight_.size();
    return s;
  }
  [[nodiscard]] const staging_options& options() const noexcept { return options_; }

 private:
  struct flight {
    buffer buf;
    typename Backend::event event;
    std::uint64_t sequence = 0;
  };

  void check_usable() const {  // under the lock
    if (failure_) std::rethrow_exception(failure_);
  }

  void note_allocation(std::size_t size) {  // under the lock
    ++stats_.allocations;
    stats_.peak_bytes = std::max(stats_.peak_bytes, allocated_);
    largest_ = std::max(largest_, size);
  }

  acquire_status acquire_until(std::size_t bytes,
                               std::optional<std::chrono::steady_clock::time_point> deadline,
                               std::stop_token stop, slot& out) {
    const std::size_t size = staging_size_class(bytes);
    if (size > options_.max_bytes)
      throw error("staging: a batch of " + std::to_string(bytes) +
                  " bytes is larger than the cap of " + std::to_string(options_.max_bytes) +
                  " bytes");
    // Before taking the lock: the callback runs at once if a stop was already requested.
    std::stop_callback wake(stop, [this] {
      std::lock_guard l(mutex_);
      cv_.notify_all();
    });
    std::unique_lock lock(mutex_);
    bool counted_wait = false;
    while (true) {
      check_usable();
      if (closed_) return acquire_status::closed;
      if (stop.stop_requested()) return acquire_status::cancelled;
      if (held_ + in_flight_.size() < options_.slots) {
        // The smallest free buffer that fits.
        std::size_t best = free_.size();
        for (std::size_t i = 0; i < free_.size(); ++i)
          if (free_[i].size >= size && (best == free_.size() || free_[i].size < free_[best].size))
            best = i;
        if (best != free_.size()) {
          const buffer b = free_[best];
          free_[best] = free_.back();
          free_.pop_back();
          ++held_;
          out = slot(this, b);
          return acquire_status::ok;
        }
        if (options_.grow) {
          // Make room under the cap by releasing free buffers (all too small, or we would
          // have taken one), if that is enough.
          std::size_t releasable = 0;
          for (const auto& b : free_) releasable += b.size;
          if (allocated_ - releasable + size <= options_.max_bytes) {
            std::vector<buffer> release;
            while (allocated_ + size > options_.max_bytes) {
              release.push_back(free_.back());
              allocated_ -= free_.back().size;
              free_.pop_back();
              ++stats_.frees;
            }
            allocated_ += size;  // claimed before the (slow) calls outside the lock
            ++held_;
            lock.unlock();
            for (const auto& b : release) backend_.deallocate(b.data, b.size);
            std::byte* p = nullptr;
            try {
              p = backend_.allocate(size);
            } catch (...) {
              lock.lock();
              allocated_ -= size;
              --held_;
              ++changes_;
              lock.unlock();
              cv_.notify_all();
              throw;
            }
            lock.lock();
            note_allocation(size);
            out = slot(this, buffer{p, size});
            return acquire_status::ok;
          }
        } else if (largest_ < size) {
          throw error("staging: no buffer of " + std::to_string(size) +
                      " bytes was reserved and growth is disabled");
        }
      }
      // Wait for a copy to complete (or a slot to be released).
      if (!counted_wait) {
        ++stats_.waits;
        counted_wait = true;
      }
      const std::uint64_t seen = changes_;
      const auto ready = [&] {
        return closed_ || failure_ || stop.stop_requested() || changes_ != seen;
      };
      if (deadline) {
        if (!cv_.wait_until(lock, *deadline, ready)) return acquire_status::timeout;
      } else {
        cv_.wait(lock, ready);
      }
    }
  }

  /// Returns a buffer without a copy (an unsubmitted slot, or a refused submit).
  void abandon(buffer b) noexcept {
    {
      std::lock_guard lock(mutex_);
      free_.push_back(b);
      --held_;
      ++stats_.abandoned;
      ++changes_;
    }
    cv_.notify_all();
  }

  /// The completion thread: waits for copies first-in, first-out, then frees their buffers.
  void reap() {
    std::unique_lock lock(mutex_);
    while (true) {
      cv_.wait(lock, [&] { return !in_flight_.empty() || stopping_; });
      if (in_flight_.empty()) return;  // stopping, and every copy has completed
      auto& f = in_flight_.front();
      lock.unlock();
      std::exception_ptr failed;
      try {
        backend_.wait(f.event);
      } catch (...) {
        failed = std::current_exception();
      }
      lock.lock();
      if (failed && !failure_) {
        failure_ = failed;
        failed_sequence_ = f.sequence;
      }
      free_.push_back(f.buf);
      completed_ = f.sequence;
      ++stats_.completed;
      in_flight_.pop_front();
      ++changes_;
      cv_.notify_all();
    }
  }

  void close_quietly() noexcept {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      closed_ = true;
      cv_.notify_all();
      // Copies already submitted complete; the reaper exits once none is left.
      stopping_ = true;
    }
    cv_.notify_all();
    if (reaper_.joinable()) reaper_.join();
  }

  Backend& backend_;
  staging_options options_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<buffer> free_;
  std::deque<flight> in_flight_;
  std::size_t held_ = 0;       // slots held by producers
  std::size_t allocated_ = 0;  // bytes the pool holds (free + held + in flight)
  std::uint64_t submitted_ = 0;
  std::uint64_t completed_ = 0;
  std::uint64_t changes_ = 0;   // bumped whenever a buffer or a slot is given back
  std::size_t largest_ = 0;     // the largest buffer ever allocated
  std::exception_ptr failure_;  // the first copy failure; the ring is unusable after it
  std::uint64_t failed_sequence_ = 0;
  bool failure_reported_ = false;
  bool closed_ = false;
  bool stopping_ = false;
  staging_stats stats_;
  std::jthread reaper_;  // last: joined (by close) before the members above are destroyed
};

}  // namespace vbucket
