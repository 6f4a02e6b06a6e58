#pragma once
/// `task_control`: what a long run of tasks (a scan of many files) takes besides the tasks. The
/// pool that honours it is `parallel_tasks` (detail/parallel_tasks.hpp).

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
