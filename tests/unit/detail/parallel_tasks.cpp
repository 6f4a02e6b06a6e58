/// Tests of vbucket/detail/parallel_tasks.hpp, the library's one task pool: every task runs
/// once whatever the thread count; with a task_control, progress counts 1, 2, ..., n in order
/// and a stop lets no further task start.
#include "vbucket/detail/parallel_tasks.hpp"
#include "vbucket/detail/task_control.hpp"

#include <doctest/doctest.h>

#include <atomic>      // std::atomic
#include <cstddef>     // std::size_t
#include <mutex>       // std::mutex, std::lock_guard
#include <stop_token>  // std::stop_source
#include <thread>      // std::this_thread::get_id, std::thread::id
#include <vector>      // std::vector

using vbucket::detail::parallel_tasks;
using vbucket::detail::task_control;

TEST_CASE("parallel_tasks: every task once, whatever the threads (threads)") {
  for (unsigned threads : {0u, 1u, 2u, 3u, 8u}) {
    for (std::size_t tasks : {0u, 1u, 2u, 7u, 100u}) {
      CAPTURE(threads);
      CAPTURE(tasks);
      std::vector<std::atomic<int>> runs(tasks);
      parallel_tasks(tasks, threads, [&](std::size_t t) { ++runs[t]; });
      int wrong = 0;
      for (const auto& r : runs) wrong += r.load() != 1;
      CHECK(wrong == 0);
      std::vector<std::atomic<int>> controlled(tasks);
      parallel_tasks(
          tasks, threads, [&](std::size_t t) { ++controlled[t]; }, task_control{});
      for (const auto& r : controlled) wrong += r.load() != 1;
      CHECK(wrong == 0);
    }
  }
  // One thread runs the tasks in order on the calling thread.
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::size_t> order;
  int elsewhere = 0;
  parallel_tasks(5, 1, [&](std::size_t t) {
    elsewhere += std::this_thread::get_id() != caller;
    order.push_back(t);
  });
  CHECK(order == std::vector<std::size_t>{0, 1, 2, 3, 4});
  CHECK(elsewhere == 0);
}

TEST_CASE("parallel_tasks: progress counts 1 to n in order, serialised (threads)") {
  for (unsigned threads : {1u, 4u}) {
    CAPTURE(threads);
    std::vector<std::size_t> seen;
    std::mutex m;
    std::atomic<int> inside{0};
    int overlapped = 0;
    task_control control;
    control.progress = [&](std::size_t done, std::size_t total) {
      overlapped += inside.fetch_add(1) != 0;  // no two calls at once
      {
        const std::lock_guard<std::mutex> lock(m);
        seen.push_back(done);
      }
      CHECK(total == 50);
      inside.fetch_sub(1);
    };
    parallel_tasks(
        50, threads, [](std::size_t) {}, control);
    REQUIRE(seen.size() == 50);
    for (std::size_t i = 0; i < seen.size(); ++i) CHECK(seen[i] == i + 1);
    CHECK(overlapped == 0);
  }
}

TEST_CASE("parallel_tasks: once a stop is requested no task starts (threads)") {
  std::stop_source before;
  before.request_stop();
  std::atomic<int> ran{0};
  parallel_tasks(10, 3, [&](std::size_t) { ++ran; }, {.stop = before.get_token()});
  CHECK(ran == 0);
  // One thread: the stop requested by task 3 lets exactly tasks 0 to 3 run.
  std::stop_source during;
  std::vector<std::size_t> done;
  parallel_tasks(10, 1,
                 [&](std::size_t t) {
                   done.push_back(t);
                   if (t == 3) during.request_stop();
                 },
                 {.stop = during.get_token()});
  CHECK(done == std::vector<std::size_t>{0, 1, 2, 3});
  // Several threads: the tasks that started all finish; none starts after the stop.
  std::stop_source many;
  std::atomic<int> started{0}, after_stop{0};
  parallel_tasks(1000, 4,
                 [&](std::size_t t) {
                   after_stop += many.stop_requested() ? 1 : 0;
                   ++started;
                   if (t == 10) many.request_stop();
                 },
                 {.stop = many.get_token()});
  CHECK(started < 1000);
  CHECK(after_stop <= 3);  // only tasks that had passed the check before the stop (3 others)
}
