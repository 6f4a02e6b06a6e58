#pragma once
/// The library's one task pool: `parallel_tasks` runs numbered tasks on a few threads that take
/// them in order from a shared counter. Every parallel loop of the library and its adapters (the
/// planner, the packed loader, the FFmpeg adapter's scans) runs on it.

#include <algorithm>   // std::min, std::max
#include <atomic>      // std::atomic (the task counter)
#include <cstddef>     // std::size_t
#include <functional>  // std::function (progress)
#include <mutex>       // std::mutex, std::lock_guard (progress)
#include <stop_token>  // std::stop_token
#include <thread>      // std::thread
#include <vector>      // std::vector

namespace vbucket::detail {

/// Threads for `tasks` tasks when `threads` are asked for (0: one per core): never more than
/// the tasks.
inline std::size_t task_workers(std::size_t tasks, unsigned threads) noexcept {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  return std::min<std::size_t>(threads, tasks);
}

/// Runs `work` on `workers` threads, the calling thread being one of them, and waits for all.
template <class Work>
void run_workers(std::size_t workers, Work& work) {
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

/// Runs fn(task) for every task in [0, tasks) on up to `threads` threads (0: one per core),
/// taking tasks in order from a shared counter. Callers make each task's result independent
/// of which thread runs it, so the outcome does not depend on the thread count.
template <class Fn>
void parallel_tasks(std::size_t tasks, unsigned threads, Fn fn) {
  const std::size_t workers = task_workers(tasks, threads);
  if (workers <= 1) {
    for (std::size_t t = 0; t < tasks; ++t) fn(t);
    return;
  }
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t t; (t = next.fetch_add(1, std::memory_order_relaxed)) < tasks;) fn(t);
  };
  run_workers(workers, work);
}

/// What a long run of tasks (a scan of many files) takes besides the tasks.
struct task_control {
  /// Once a stop is requested no task starts; the tasks running finish.
  std::stop_token stop{};
  /// Called as progress(done, tasks) after each task, serialised: done is 1, 2, … in order.
  std::function<void(std::size_t, std::size_t)> progress{};
};

/// `parallel_tasks` with a stop token and a progress callback (`task_control`). The tasks that
/// never started are the caller's to account for.
template <class Fn>
void parallel_tasks(std::size_t tasks, unsigned threads, Fn fn, const task_control& control) {
  std::atomic<std::size_t> next{0};
  std::size_t done = 0;  // guarded by progress_mutex
  std::mutex progress_mutex;
  auto work = [&] {
    for (;;) {
      if (control.stop.stop_requested()) return;
      const std::size_t t = next.fetch_add(1, std::memory_order_relaxed);
      if (t >= tasks) return;
      fn(t);
      // Count and report under one lock, so the callback sees 1, 2, ..., n in order (counting
      // outside the lock lets two threads report their counts out of order).
      const std::lock_guard<std::mutex> lock(progress_mutex);
      ++done;
      if (control.progress) control.progress(done, tasks);
    }
  };
  run_workers(task_workers(tasks, threads), work);
}

}  // namespace vbucket::detail
