/// Tests of vbucket/load/staging.hpp with the host backend: size classes, batch bytes, the ring's
/// bounds (slots, cap, growth), timeouts, cancellation, shutdown with copies in flight, copy
/// failures, and many producer threads (these also run under TSan: their names say "thread").
#include "vbucket/load/staging.hpp"

#include <doctest/doctest.h>

#include <algorithm>   // std::all_of
#include <atomic>      // std::atomic
#include <chrono>      // std::chrono::milliseconds
#include <cstddef>     // std::byte, std::size_t
#include <cstdint>     // std::uint8_t, std::uint64_t
#include <random>      // std::mt19937_64
#include <stop_token>  // std::stop_source
#include <string>      // std::string
#include <thread>      // std::thread, std::jthread
#include <vector>      // std::vector

#include "vbucket_test/errors.hpp"

namespace {

using namespace std::chrono_literals;
using ring_t = vbucket::staging_ring<vbucket::host_backend>;

using vbucket_test::error_message;
void fill(std::span<std::byte> s, std::size_t n, std::uint8_t seed) {
  for (std::size_t i = 0; i < n; ++i)
    s[i] = static_cast<std::byte>(static_cast<std::uint8_t>(seed + i * 7));
}
bool filled(const std::byte* p, std::size_t n, std::uint8_t seed) {
  for (std::size_t i = 0; i < n; ++i)
    if (p[i] != static_cast<std::byte>(static_cast<std::uint8_t>(seed + i * 7))) return false;
  return true;
}

vbucket::bucket_config small_config() {
  vbucket::user_tables t;
  t.add("lo", 200, vbucket::aspect_table({{"1:2", 2.0, 20, 10}, {"1:1", 1.0, 14, 14}}));
  t.add("hi", 800, vbucket::aspect_table({{"1:1", 1.0, 28, 28}}));
  std::vector<vbucket::bucket_spec> specs = {{"lo", 4, 1.0, std::nullopt, 2},
                                             {"lo", 1, 1.0, std::nullopt, 16},
                                             {"hi", 8, 1.0, std::nullopt, 3},
                                             {"hi", 2, 0.0, std::nullopt, std::nullopt}};
  return vbucket::bucket_config(specs, t);
}

}  // namespace

TEST_CASE("staging: size classes cover the request with at most 12.5 % slack") {
  CHECK(vbucket::staging_size_class(0) == 4096);
  CHECK(vbucket::staging_size_class(4096) == 4096);
  std::size_t previous = 0;
  for (std::size_t n = 4097; n < (std::size_t{1} << 22); n += n / 13 + 1) {
    const std::size_t c = vbucket::staging_size_class(n);
    CHECK(c >= n);
    CHECK(c * 8 <= n * 9 + 8 * 8);  // c <= 1.125 n (+ rounding)
    CHECK(c >= previous);
    previous = c;
  }
  for (std::size_t k = 13; k < 40; ++k) {  // powers of two and 1.5 × them are classes
    CHECK(vbucket::staging_size_class(std::size_t{1} << k) == std::size_t{1} << k);
    CHECK(vbucket::staging_size_class(std::size_t{3} << (k - 1)) == std::size_t{3} << (k - 1));
  }
  const std::size_t huge = std::numeric_limits<std::size_t>::max() - 5;
  CHECK(vbucket::staging_size_class(huge) >= huge);
}

TEST_CASE("staging: batch bytes per bucket and the largest over a config") {
  const auto c = small_config();
  // Buckets in id order: hi/8/1:1, hi/2/1:1 (disabled), lo/4/1:2, lo/4/1:1, lo/1/1:2, lo/1/1:1.
  REQUIRE(c.num_buckets() == 6);
  const std::size_t expected[] = {3 * 8 * 28 * 28 * 3, 0,
                                  2 * 4 * 20 * 10 * 3, 2 * 4 * 14 * 14 * 3,
                                  16 * 20 * 10 * 3,    16 * 14 * 14 * 3};
  for (int id = 0; id < 6; ++id) CHECK(vbucket::batch_bytes(c, id) == expected[id]);
  CHECK(vbucket::batch_bytes(c, 0, 1) == expected[0] / 3);
  CHECK(vbucket::max_batch_bytes(c) == 3 * 8 * 28 * 28 * 3);
}

TEST_CASE("staging: a submitted batch arrives, and its buffer is reused") {
  vbucket::host_backend backend;
  ring_t ring(backend, {.slots = 2});
  std::vector<std::byte> dst(10000);
  for (int round = 0; round < 3; ++round) {
    auto s = ring.acquire(10000);
    REQUIRE(s.data().size() >= 10000);
    fill(s.data(), 10000, static_cast<std::uint8_t>(round));
    const auto t = ring.submit(std::move(s), dst.data(), 10000);
    CHECK_FALSE(s);
    ring.wait(t);
    CHECK(filled(dst.data(), dst.size(), static_cast<std::uint8_t>(round)));
  }
  ring.drain();
  const auto st = ring.stats();
  CHECK(st.allocations == 1);  // one buffer, reused
  CHECK(st.submitted == 3);
  CHECK(st.completed == 3);
  CHECK(st.bytes_copied == 30000);
  CHECK(st.buffers == 1);
}

TEST_CASE("staging: an unsubmitted slot goes back to the pool") {
  vbucket::host_backend backend;
  ring_t ring(backend, {.slots = 1});
  { auto s = ring.acquire(5000); }
  auto s = ring.acquire(5000);  // would block forever if the first were not returned
  CHECK(s);
  CHECK(ring.stats().abandoned == 1);
  CHECK(ring.stats().allocations == 1);
}

TEST_CASE("staging: the byte cap is never exceeded, and impossible requests are errors") {
  vbucket::host_backend backend;
  ring_t ring(backend, {.slots = 4, .max_bytes = 64 * 1024});
  CHECK(error_message([&] { (void)ring.acquire(65 * 1024); }) ==
        "staging: a batch of 66560 bytes is larger than the cap of 65536 bytes");
  CHECK(error_message([&] { ring.reserve(16 * 1024, 5); }) ==
        "staging: reserving 5 buffers of 16384 bytes exceeds the cap of 65536 bytes");
  // The failed reserve kept what fitted (4 × 16 KiB).
  CHECK(ring.stats().bytes_allocated == 64 * 1024);
  // A 48 KiB batch: three of the four free 16 KiB buffers are released to make room.
  auto big = ring.acquire(48 * 1024);
  CHECK(big.data().size() == 48 * 1024);
  auto st = ring.stats();
  CHECK(st.frees == 3);
  CHECK(st.bytes_allocated == 64 * 1024);
  CHECK(st.peak_bytes <= 64 * 1024);
  // While the 48 KiB buffer is held, another 48 KiB batch cannot fit: it waits, then times out.
  auto [status, none] = ring.try_acquire_for(48 * 1024, 20ms);
  CHECK(status == vbucket::acquire_status::timeout);
  CHECK_FALSE(none);
  CHECK(ring.stats().waits == 1);
}

TEST_CASE("staging: without growth only reserved buffers are used") {
  vbucket::host_backend backend;
  const auto c = small_config();
  ring_t ring(backend, {.slots = 2, .grow = false});
  ring.reserve_for(c);
  auto st = ring.stats();
  CHECK(st.buffers == 2);
  CHECK(st.bytes_allocated == 2 * vbucket::staging_size_class(vbucket::max_batch_bytes(c)));
  {
    auto a = ring.acquire(vbucket::max_batch_bytes(c));
    auto b = ring.acquire(100);
    CHECK(a.data().size() >= vbucket::max_batch_bytes(c));
    CHECK(b);
  }
  CHECK(ring.stats().allocations == 2);
  CHECK(error_message([&] {
          (void)ring.acquire(vbucket::max_batch_bytes(c) * 2);
        }).find("growth is disabled") != std::string::npos);

  vbucket::bucket_config disabled(std::vector<vbucket::bucket_spec>{{"lo", 4, 0.0, {}, {}}}, [] {
    vbucket::user_tables t;
    t.add("lo", 200, vbucket::aspect_table({{"1:1", 1.0, 14, 14}}));
    return t;
  }());
  CHECK(error_message([&] { ring.reserve_for(disabled); }) ==
        "staging: the bucket config has no enabled bucket");
}

TEST_CASE("staging: bad submits are refused and the slot is released") {
  vbucket::host_backend backend;
  ring_t ring(backend, {.slots = 1});
  std::vector<std::byte> dst(1 << 14);
  auto s = ring.acquire(4096);
  CHECK(error_message([&] { ring.submit(std::move(s), dst.data(), 4097); }) ==
        "staging: submit of 4097 bytes from a slot of 4096");
  CHECK(ring.stats().abandoned == 1);
  CHECK(error_message([&] { ring.submit(ring_t::slot{}, dst.data(), 1); }) ==
        "staging: submit of an empty slot");
  ring_t other(backend, {.slots = 1});
  auto foreign = other.acquire(10);
  CHECK(error_message([&] { ring.submit(std::move(foreign), dst.data(), 1); }) ==
        "staging: submit of a slot from another ring");
  CHECK(error_message([] {
          vbucket::host_backend b;
          ring_t r(b, {.slots = 0});
        }) == "staging: slots must be at least 1");
}

TEST_CASE("staging: producers block while every slot is in flight (async copies, threads)") {
  vbucket::host_backend backend({.async_copies = true, .copy_delay = 20ms});
  ring_t ring(backend, {.slots = 2});
  constexpr std::size_t batches = 6, bytes = 3000;
  std::vector<std::byte> dst(batches * bytes);
  std::vector<ring_t::ticket> tickets;
  for (std::size_t i = 0; i < batches; ++i) {
    auto s = ring.acquire(bytes);
    fill(s.data(), bytes, static_cast<std::uint8_t>(i));
    tickets.push_back(ring.submit(std::move(s), dst.data() + i * bytes, bytes));
  }
  ring.drain();
  for (std::size_t i = 0; i < batches; ++i)
    CHECK(filled(dst.data() + i * bytes, bytes, static_cast<std::uint8_t>(i)));
  const auto st = ring.stats();
  CHECK(st.peak_in_flight == 2);
  CHECK(st.waits >= 1);  // 20 ms copies: later acquires find both slots busy
  CHECK(st.allocations == 2);
  CHECK(st.completed == batches);
}

TEST_CASE("staging: cancellation and close wake a blocked producer (threads)") {
  vbucket::host_backend backend;
  SUBCASE("stop token") {
    ring_t ring(backend, {.slots = 1});
    auto held = ring.acquire(100);
    std::stop_source stop;
    std::atomic<bool> started = false;
    std::string message;
    std::thread producer([&] {
      started = true;
      message = error_message([&] { (void)ring.acquire(100, stop.get_token()); });
    });
    while (!started) std::this_thread::yield();
    std::this_thread::sleep_for(5ms);
    stop.request_stop();
    producer.join();
    CHECK(message == "staging: acquire cancelled");
    auto [status, s] = ring.try_acquire_for(100, 1s, stop.get_token());
    CHECK(status == vbucket::acquire_status::cancelled);
  }
  SUBCASE("close") {
    ring_t ring(backend, {.slots = 1});
    auto held = ring.acquire(100);
    std::string message;
    std::thread producer([&] { message = error_message([&] { (void)ring.acquire(100); }); });
    std::this_thread::sleep_for(5ms);
    ring.close();
    producer.join();
    CHECK(message == "staging: the ring is closed");
    std::vector<std::byte> dst(100);
    CHECK(error_message([&] { ring.submit(std::move(held), dst.data(), 100); }) ==
          "staging: the ring is closed");
    CHECK(ring.try_acquire_for(1, 1s).first == vbucket::acquire_status::closed);
  }
}

TEST_CASE("staging: close waits for the copies in flight (async copies, threads)") {
  vbucket::host_backend backend({.async_copies = true, .copy_delay = 3ms});
  constexpr std::size_t batches = 4, bytes = 5000;
  std::vector<std::byte> dst(batches * bytes);
  ring_t ring(backend, {.slots = batches});
  for (std::size_t i = 0; i < batches; ++i) {
    auto s = ring.acquire(bytes);
    fill(s.data(), bytes, static_cast<std::uint8_t>(100 + i));
    ring.submit(std::move(s), dst.data() + i * bytes, bytes);
  }
  ring.close();  // copies take 12 ms in all; close returns only after they are done
  const auto st = ring.stats();
  CHECK(st.completed == batches);
  for (std::size_t i = 0; i < batches; ++i)
    CHECK(filled(dst.data() + i * bytes, bytes, static_cast<std::uint8_t>(100 + i)));
}

TEST_CASE("staging: a failed copy surfaces as an error at the API edge (threads)") {
  vbucket::host_backend backend({.async_copies = true, .fail_copy_after = 2});
  ring_t ring(backend, {.slots = 4});
  std::vector<std::byte> dst(3 * 4096);
  std::vector<ring_t::ticket> t;
  for (int i = 0; i < 3; ++i) {
    auto s = ring.acquire(4096);
    t.push_back(ring.submit(std::move(s), dst.data() + i * 4096, 4096));
  }
  ring.wait(t[0]);
  ring.wait(t[1]);
  CHECK(error_message([&] { ring.wait(t[2]); }) == "host staging: copy failed (injected failure)");
  CHECK(error_message([&] { (void)ring.acquire(10); }) ==
        "host staging: copy failed (injected failure)");
  CHECK(error_message([&] { ring.close(); }) == "host staging: copy failed (injected failure)");
  CHECK_NOTHROW(ring.close());  // reported once
}

TEST_CASE("staging: many producer threads, random sizes, a cap and async copies") {
  // 6 producers × 60 batches through 3 slots under a 96 KiB cap. Every batch must arrive
  // intact at its own destination, and the bounds must hold throughout.
  vbucket::host_backend backend({.async_copies = true, .copy_delay = 50us});
  constexpr std::size_t producers = 6, per_producer = 60, max_batch = 30000;
  const vbucket::staging_options options{.slots = 3, .max_bytes = 96 * 1024};
  ring_t ring(backend, options);
  std::vector<std::byte> dst(producers * per_producer * max_batch);
  std::vector<std::size_t> sizes(producers * per_producer);
  std::mt19937_64 rng(7);
  for (auto& n : sizes) n = 1 + rng() % max_batch;
  std::atomic<std::size_t> in_hand = 0, most_in_hand = 0;
  {
    std::vector<std::jthread> threads;
    for (std::size_t p = 0; p < producers; ++p) {
      threads.emplace_back([&, p] {
        for (std::size_t k = 0; k < per_producer; ++k) {
          const std::size_t i = p * per_producer + k;
          auto s = ring.acquire(sizes[i]);
          const std::size_t now = ++in_hand;
          std::size_t seen = most_in_hand.load();
          while (now > seen && !most_in_hand.compare_exchange_weak(seen, now)) {
          }
          fill(s.data(), sizes[i], static_cast<std::uint8_t>(i));
          --in_hand;
          ring.submit(std::move(s), dst.data() + i * max_batch, sizes[i]);
        }
      });
    }
  }
  ring.drain();
  std::size_t intact = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    intact += filled(dst.data() + i * max_batch, sizes[i], static_cast<std::uint8_t>(i));
  CHECK(intact == sizes.size());
  const auto st = ring.stats();
  CHECK(st.submitted == sizes.size());
  CHECK(st.completed == sizes.size());
  CHECK(st.peak_bytes <= options.max_bytes);
  CHECK(st.peak_in_flight <= options.slots);
  CHECK(most_in_hand.load() <= options.slots);
  CHECK(st.bytes_allocated <= options.max_bytes);
}
