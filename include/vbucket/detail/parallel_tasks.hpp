#pragma once
/// The library's one task pool: `parallel_tasks` runs numbered tasks on a few threads that take
/// them in order from a shared counter. Every parallel loop of the library and its adapters (the
/// planner, the packed loader, the FFmpeg adapter's scans) runs on it.
///
/// The pool itself (`run_tasks`) is one function that does not depend on the task's type: the
/// template `parallel_tasks` only passes it a pointer to the task, so a translation unit that
/// runs tasks compiles no thread code of its own (and with `vbucket::compiled`, includes no
/// thread header).

#include <cstddef>  // std::size_t

#include "compiled.hpp"

namespace vbucket::detail {

struct task_control;  // a stop token and a progress callback: detail/task_control.hpp

/// A task without its type: call(context, task).
struct task_ref {
  void* context;
  void (*call)(void* context, std::size_t task);
};

/// The task `fn` (which outlives the call) as a `task_ref`.
template <class Fn>
task_ref erase_task(Fn& fn) noexcept {
  return {static_cast<void*>(&fn),
          [](void* context, std::size_t task) { (*static_cast<Fn*>(context))(task); }};
}

/// The number of hardware threads, at least 1.
VBUCKET_COMPILED_INLINE unsigned hardware_threads() noexcept;

/// Threads for `tasks` tasks when `threads` are asked for (0: one per core): never more than
/// the tasks.
VBUCKET_COMPILED_INLINE std::size_t task_workers(std::size_t tasks, unsigned threads) noexcept;

/// Runs fn(task) for every task in [0, tasks) on up to `threads` threads (0: one per core), the
/// calling thread being one of them, taking tasks in order from a shared counter, and waits for
/// all. With one worker, the tasks run in order on the calling thread. With a `control` (may be
/// null): once its stop is requested no task starts, and its progress is called after each task,
/// serialised.
VBUCKET_COMPILED_INLINE void run_tasks(std::size_t tasks, unsigned threads, task_ref fn,
                                       const task_control* control);

/// Runs fn(task) for every task in [0, tasks) on up to `threads` threads (0: one per core),
/// taking tasks in order from a shared counter. Callers make each task's result independent
/// of which thread runs it, so the outcome does not depend on the thread count.
template <class Fn>
void parallel_tasks(std::size_t tasks, unsigned threads, Fn fn) {
  run_tasks(tasks, threads, erase_task(fn), nullptr);
}

/// `parallel_tasks` with a stop token and a progress callback (`task_control`, from
/// detail/task_control.hpp: the caller that has one includes it). The tasks that never started
/// are the caller's to account for.
template <class Fn>
void parallel_tasks(std::size_t tasks, unsigned threads, Fn fn, const task_control& control) {
  run_tasks(tasks, threads, erase_task(fn), &control);
}

}  // namespace vbucket::detail

#if VBUCKET_HEADER_DEFINITIONS
#include <algorithm>  // std::min, std::max
#include <atomic>     // std::atomic (the task counter)
#include <mutex>      // std::mutex, std::lock_guard (progress)
#include <thread>     // std::thread
#include <vector>     // std::vector

#include "task_control.hpp"

namespace vbucket::detail {

VBUCKET_COMPILED_INLINE unsigned hardware_threads() noexcept {
  return std::max(1u, std::thread::hardware_concurrency());
}

VBUCKET_COMPILED_INLINE std::size_t task_workers(std::size_t tasks, unsigned threads) noexcept {
  return std::min<std::size_t>(threads == 0 ? hardware_threads() : threads, tasks);
}

VBUCKET_COMPILED_INLINE void run_tasks(std::size_t tasks, unsigned threads, task_ref fn,
                                       const task_control* control) {
  std::atomic<std::size_t> next{0};
  std::size_t done = 0;  // guarded by progress_mutex
  std::mutex progress_mutex;
  auto work = [&] {
    for (;;) {
      if (control != nullptr && control->stop.stop_requested()) return;
      const std::size_t t = next.fetch_add(1, std::memory_order_relaxed);
      if (t >= tasks) return;
      fn.call(fn.context, t);
      if (control == nullptr) continue;
      // Count and report under one lock, so the callback sees 1, 2, ..., n in order (counting
      // outside the lock lets two threads report their counts out of order).
      const std::lock_guard<std::mutex> lock(progress_mutex);
      ++done;
      if (control->progress) control->progress(done, tasks);
    }
  };
  const std::size_t workers = task_workers(tasks, threads);
  if (workers <= 1) {
    work();
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
}

}  // namespace vbucket::detail
#endif  // VBUCKET_HEADER_DEFINITIONS
