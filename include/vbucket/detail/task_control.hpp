#pragma once
/// `task_control`: what a long run of tasks (a scan of many files) takes besides the tasks, and
/// `parallel_tasks` with it.

#include <cstddef>     // std::size_t
#include <functional>  // std::function (progress)
#include <stop_token>  // std::stop_token

namespace vbucket::detail {

/// What a long run of tasks (a scan of many files) takes besides the tasks.
struct task_control {
  /// Once a stop is requested no task starts; the tasks running finish.
  std::stop_token stop{};
  /// Called as progress(done, tasks) after each task, serialised: done is 1, 2, … in order.
  std::function<void(std::size_t, std::size_t)> progress{};
};

}  // namespace vbucket::detail

// After the struct: parallel_tasks.hpp's definitions include this header and need it whole.
#include "parallel_tasks.hpp"

namespace vbucket::detail {

/// `parallel_tasks` with a stop token and a progress callback (`task_control`). The tasks that
/// never started are the caller's to account for.
template <class Fn>
void parallel_tasks(std::size_t tasks, unsigned threads, Fn fn, const task_control& control) {
  run_tasks(tasks, threads, erase_task(fn), &control);
}

}  // namespace vbucket::detail
