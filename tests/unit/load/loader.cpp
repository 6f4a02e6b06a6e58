/// Tests of vbucket/load/loader.hpp with a synthetic decoder (a pattern per (sample, crop seed),
/// chosen samples failing): every batch of a rank arrives in order with its bucket's shape and
/// the right pixels; failed clips are replaced from the same bucket, deterministically and
/// counted; resume continues exactly; cancellation and back-pressure hold; the loop over the
/// loader as a range, a batch_sampler driving it, float32/bfloat16 batches made on the workers
/// against normalize.hpp's reference. The names say "thread" so these also run under TSan.
#include "vbucket/load/loader.hpp"
#include "vbucket_test/loader_data.hpp"

#include "vbucket/sample/batch_sampler.hpp"
#include "vbucket/sample/opensora_sampler.hpp"
#include "vbucket_test/configs.hpp"

#include <doctest/doctest.h>

#include <algorithm>  // std::equal, std::all_of
#include <atomic>     // std::atomic
#include <chrono>     // std::chrono::milliseconds
#include <cstdint>    // std::uint8_t, std::uint32_t
#include <cstdio>     // std::sscanf
#include <cstring>    // std::memcmp
#include <map>        // std::map
#include <memory>     // std::make_shared, std::unique_ptr
#include <mutex>      // std::mutex
#include <optional>   // std::optional
#include <set>        // std::set
#include <string>     // std::string
#include <thread>     // std::this_thread::sleep_for
#include <utility>    // std::pair
#include <vector>     // std::vector

namespace {

using namespace std::chrono_literals;

std::uint8_t pixel(std::uint32_t sample, std::uint64_t seed, std::size_t i) {
  return static_cast<std::uint8_t>(sample * 37u + static_cast<std::uint32_t>(seed % 251) +
                                   static_cast<std::uint32_t>(i % 241));
}

/// Writes pixel(sample, seed, i); fails for the samples in `bad`; optionally slow.
struct fake_decoder {
  std::set<std::uint32_t> bad;
  std::chrono::microseconds delay{0};
  std::atomic<int> calls{0};
  std::atomic<int> cthw_tasks{0};

  std::optional<std::string> decode(const vbucket::clip_task& t, std::span<std::uint8_t> out) {
    ++calls;
    if (t.layout == vbucket::clip_layout::cthw) ++cthw_tasks;
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    if (out.size() != t.bytes()) return "wrong buffer size";
    if (bad.count(t.sample)) return "sample " + std::to_string(t.sample) + ": corrupt file";
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = pixel(t.sample, t.seed, i);
    return std::nullopt;
  }
};
static_assert(vbucket::clip_decoder<fake_decoder>);

struct fixture {
  vbucket::bucket_config config;
  std::vector<vbucket::bucket_id> ids;
  vbucket::epoch_plan plan;

  explicit fixture(std::size_t samples = 150) {
    config = vbucket_test::loader_config();
    ids = vbucket_test::loader_ids(samples, config.num_buckets());
    plan = vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), config,
                                    {.seed = 5, .epoch = 2});
  }
};

using host_ring = vbucket::staging_ring<vbucket::host_backend>;
using host_loader = vbucket::loader<fake_decoder, vbucket::host_backend>;

/// The crop seed the loader gives a sample (as documented: keyed by seed, epoch, sample).
std::uint64_t crop_seed(const vbucket::epoch_plan& p, std::uint32_t sample) {
  return vbucket::fast_source(p.seed(), p.epoch()).stream(sample, 0x63726f70ULL).next_u64();
}

bool pixels_match(const host_loader::loaded_batch& b, const vbucket::epoch_plan& p) {
  const auto bytes = b.tensor.bytes();
  const std::size_t clip = bytes.size() / b.samples.size();
  for (std::size_t c = 0; c < b.samples.size(); ++c) {
    const std::uint64_t seed = crop_seed(p, b.samples[c]);
    for (std::size_t i = 0; i < clip; ++i)
      if (bytes[c * clip + i] != pixel(b.samples[c], seed, i)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("loader: every batch of each rank, in order, with its shape and pixels (threads)") {
  fixture f;
  fake_decoder decoder;
  vbucket::host_backend backend;
  for (std::uint32_t world : {1u, 2u, 3u}) {
    const auto schedule = f.plan.deal(world);
    std::multiset<std::uint32_t> seen;
    for (std::uint32_t rank = 0; rank < world; ++rank) {
      host_ring ring(backend, {.slots = 4});
      host_loader l(schedule, rank, decoder, ring, {.workers = 3, .prefetch = 2});
      std::uint64_t step = 0;
      while (auto b = l.next()) {
        const vbucket::batch want = schedule.at(step, rank);
        CHECK(b->info.position == want.position);
        CHECK(b->info.bucket == want.bucket);
        CHECK(b->samples == std::vector<std::uint32_t>(want.indices.begin(), want.indices.end()));
        const auto& v = b->tensor.view;
        CHECK(v.shape == std::array<std::int64_t, 5>{f.config.batch_size(want.bucket), want.frames,
                                                     want.height, want.width, 3});
        CHECK(v.layout == vbucket::clip_layout::thwc);
        CHECK(pixels_match(*b, f.plan));
        for (auto s : b->samples) seen.insert(s);
        ++step;
      }
      vbucket_test::check_whole_epoch(l, step, schedule.steps(), world);
    }
    // Together the ranks delivered every assigned sample (repeats and pads only add copies).
    std::set<std::uint32_t> distinct(seen.begin(), seen.end());
    CHECK(distinct.size() == f.ids.size());
  }
}

TEST_CASE("loader: failed clips are replaced from the same bucket, deterministically (threads)") {
  fixture f;
  fake_decoder decoder;
  decoder.bad = {3, 10, 11, 42, 77};
  vbucket::host_backend backend;
  const auto schedule = f.plan.deal(2);
  std::vector<std::vector<std::uint32_t>> first_run;
  for (int run = 0; run < 2; ++run) {
    std::uint64_t subs = 0, failing_slots = 0;
    std::vector<std::vector<std::uint32_t>> delivered;
    for (std::uint32_t rank = 0; rank < 2; ++rank) {
      host_ring ring(backend, {.slots = 3});
      host_loader l(schedule, rank, decoder, ring, {.workers = 2, .prefetch = 2});
      std::uint64_t step = 0;
      while (auto b = l.next()) {
        const vbucket::batch want = schedule.at(step++, rank);
        REQUIRE(b->samples.size() == want.indices.size());  // never short
        for (std::size_t c = 0; c < want.indices.size(); ++c) {
          if (decoder.bad.count(want.indices[c])) {
            ++failing_slots;
            CHECK_FALSE(decoder.bad.count(b->samples[c]));
            CHECK(f.ids[b->samples[c]] == want.bucket);  // same bucket
          } else {
            CHECK(b->samples[c] == want.indices[c]);
          }
        }
        for (const auto& s : b->substitutions) {
          CHECK(s.position == want.position);
          CHECK(s.failed == want.indices[s.clip]);
          CHECK(s.replacement == b->samples[s.clip]);
          CHECK(s.error == "sample " + std::to_string(s.failed) + ": corrupt file");
        }
        subs += b->substitutions.size();
        CHECK(pixels_match(*b, f.plan));
        delivered.push_back(b->samples);
      }
      CHECK(l.stats().substitutions == l.stats().failed);  // the replacements here never fail
    }
    CHECK(failing_slots > 0);
    CHECK(subs == failing_slots);
    if (run == 0)
      first_run = delivered;
    else
      CHECK(delivered == first_run);
  }
}

namespace {
/// fake_decoder whose source goes away: from its `start`-th call on, every call for `outage`
/// throws `source_unavailable` (as file_decoder does for a refused connection).
struct flaky_source_decoder : fake_decoder {
  int start = 10;
  std::chrono::milliseconds outage{300};
  std::mutex m;
  std::optional<std::chrono::steady_clock::time_point> down_until;
  std::atomic<int> refused{0};

  std::optional<std::string> decode(const vbucket::clip_task& t, std::span<std::uint8_t> out) {
    {
      std::lock_guard lock(m);
      if (!down_until && calls.load() >= start)
        down_until = std::chrono::steady_clock::now() + outage;
      if (down_until && std::chrono::steady_clock::now() < *down_until) {
        ++refused;
        throw vbucket::source_unavailable("http://host/s.tar: cannot open: Connection refused");
      }
    }
    return fake_decoder::decode(t, out);
  }
};
}  // namespace

TEST_CASE("loader: an outage stalls the workers on one health state, nothing replaced (threads)") {
  fixture f;
  flaky_source_decoder decoder;
  vbucket::host_backend backend;
  const auto schedule = f.plan.deal(1);
  host_ring ring(backend, {.slots = 3});
  vbucket::loader<flaky_source_decoder, vbucket::host_backend> l(
      schedule, 0, decoder, ring, {.workers = 3, .prefetch = 1, .outage_retry_seconds = 0.1});
  std::uint64_t step = 0;
  while (auto b = l.next()) {
    const vbucket::batch want = schedule.at(step++, 0);
    CHECK(b->samples == std::vector<std::uint32_t>(want.indices.begin(), want.indices.end()));
    CHECK(b->substitutions.empty());
    CHECK(std::all_of(b->samples.begin(), b->samples.end(),
                      [&](std::uint32_t s) { return s < f.ids.size(); }));
  }
  CHECK(step == schedule.steps());
  const auto st = l.stats();
  CHECK(st.substitutions == 0);
  CHECK(st.failed == 0);  // an outage is not the clips' failure
  CHECK(st.stalls == 1);
  CHECK(st.unavailable == static_cast<std::uint64_t>(decoder.refused.load()));
  CHECK(st.stall_seconds >= 0.2);
  // The workers waited instead of each burning attempts: the clips in flight when it began,
  // then one probe per backoff (0.1 s, capped) over the 0.3 s outage.
  CHECK(decoder.refused.load() <= 3 + 8);
  CHECK(format_loader_stats(st).find("stalls") != std::string::npos);
}

TEST_CASE("loader: an outage past its deadline is an error naming the source (threads)") {
  fixture f;
  flaky_source_decoder decoder;
  decoder.start = 0;
  decoder.outage = std::chrono::hours(1);
  vbucket::host_backend backend;
  host_ring ring(backend, {.slots = 3});
  vbucket::loader<flaky_source_decoder, vbucket::host_backend> l(
      f.plan.deal(1), 0, decoder, ring,
      {.workers = 2, .prefetch = 1, .outage_deadline_seconds = 0.3, .outage_retry_seconds = 0.05});
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS((void)l.next(),
                       doctest::Contains("past the outage deadline (0.300000 s): "
                                         "http://host/s.tar: cannot open: Connection refused"),
                       vbucket::error);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  CHECK(l.stats().substitutions == 0);
}

TEST_CASE("loader: a clip whose bucket has nothing decodable is an error, not a short batch") {
  fixture f(20);
  fake_decoder decoder;
  for (std::uint32_t i = 0; i < 20; ++i) decoder.bad.insert(i);
  vbucket::host_backend backend;
  host_ring ring(backend, {.slots = 3});
  host_loader l(f.plan.deal(1), 0, decoder, ring, {.workers = 1, .max_attempts = 3});
  std::string message;
  try {
    (void)l.next();
  } catch (const vbucket::error& e) {
    message = e.what();
  }
  INFO(message);
  // Every one of the 3 attempts failed: decoded and failed, or passed over as a file that had
  // failed earlier this epoch (the batch's earlier clips); the counts add up to 3.
  const std::string head = "3 replacements of its bucket failed too (";
  const std::size_t at = message.find(head);
  REQUIRE(at != std::string::npos);
  unsigned decoded = 0, earlier = 0;
  REQUIRE(std::sscanf(message.c_str() + at + head.size(),
                      "%u decoded, %u of files that failed earlier this epoch)", &decoded,
                      &earlier) == 2);
  CHECK(decoded + earlier == 3);
  CHECK(decoded >= 1);
  CHECK(message.find("this epoch); last: sample ") != std::string::npos);
  CHECK(message.rfind("loader: batch at position 0 (bucket ", 0) == 0);
}

TEST_CASE("loader: a failed clip alone in its bucket is named so, not as failed replacements") {
  fixture f(20);
  // Sample 0 alone in its bucket (the others of that bucket moved to the next one), its batch
  // padded with itself: there is nothing to replace it with.
  const vbucket::bucket_id alone = f.ids[0];
  const auto other = static_cast<vbucket::bucket_id>((static_cast<std::size_t>(alone) + 1) %
                                                     f.config.num_buckets());
  for (std::size_t i = 1; i < f.ids.size(); ++i)
    if (f.ids[i] == alone) f.ids[i] = other;
  f.plan =
      vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(f.ids), f.config,
                               {.seed = 5, .epoch = 2, .policy = vbucket::incomplete_policy::pad});
  fake_decoder decoder;
  decoder.bad.insert(0);
  vbucket::host_backend backend;
  host_ring ring(backend, {.slots = 3});
  host_loader l(f.plan.deal(1), 0, decoder, ring, {.workers = 1, .max_attempts = 3});
  std::string message;
  try {
    for (std::size_t b = 0; b < f.plan.num_batches(); ++b) (void)l.next();
  } catch (const vbucket::error& e) {
    message = e.what();
  }
  CHECK(message.find("sample 0 failed (") != std::string::npos);
  CHECK(message.find("its bucket has no other sample (of another file) to replace it") !=
        std::string::npos);
  CHECK(message.find("replacements") == std::string::npos);
}

TEST_CASE("loader: resume from a saved state continues exactly, also with another world size") {
  fixture f;
  fake_decoder decoder;
  vbucket::host_backend backend;
  const std::uint32_t world = 2;
  // The uninterrupted global sequence of positions and samples.
  std::map<std::uint64_t, std::vector<std::uint32_t>> all;
  const auto full = f.plan.deal(world);
  for (std::uint64_t s = 0; s < full.steps(); ++s)
    for (std::uint32_t r = 0; r < world; ++r) {
      const auto b = full.at(s, r);
      if (!b.repeat) all[b.position].assign(b.indices.begin(), b.indices.end());
    }
  // Both ranks train 3 steps, then save.
  vbucket::plan_state saved;
  for (std::uint32_t r = 0; r < world; ++r) {
    host_ring ring(backend, {.slots = 3});
    host_loader l(full, r, decoder, ring);
    for (int k = 0; k < 3; ++k) REQUIRE(l.next());
    saved = l.state();
  }
  CHECK(saved.consumed == 3 * world);
  CHECK(saved.to_string() == "vbucket-plan seed=5 epoch=2 consumed=6 balance=0");
  // Resume with world 3: the positions not yet consumed, each exactly once.
  const auto rest = f.plan.deal(3, saved);
  std::map<std::uint64_t, std::vector<std::uint32_t>> got;
  for (std::uint32_t r = 0; r < 3; ++r) {
    host_ring ring(backend, {.slots = 3});
    host_loader l(rest, r, decoder, ring);
    while (auto b = l.next())
      if (!b->info.repeat) {
        CHECK(got.count(b->info.position) == 0);
        got[b->info.position] = b->samples;
      }
  }
  std::map<std::uint64_t, std::vector<std::uint32_t>> expected;
  for (const auto& [pos, samples] : all)
    if (pos >= saved.consumed) expected[pos] = samples;
  CHECK(got == expected);
}

TEST_CASE("loader: stop mid-epoch returns promptly and hands out nothing more (threads)") {
  fixture f;
  fake_decoder decoder;
  decoder.delay = 2ms;
  vbucket::host_backend backend;
  host_ring ring(backend, {.slots = 3});
  host_loader l(f.plan.deal(1), 0, decoder, ring, {.workers = 2, .prefetch = 2});
  REQUIRE(l.next());
  REQUIRE(l.next());
  const auto t0 = std::chrono::steady_clock::now();
  l.stop();
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  CHECK_FALSE(l.next());
  CHECK(l.state().consumed == 2);
  CHECK(decoder.calls.load() < static_cast<int>(f.ids.size()));  // the epoch was not decoded
  // The ring got every slot back.
  auto s = ring.try_acquire_for(1, 1s);
  CHECK(s.first == vbucket::acquire_status::ok);
}

TEST_CASE("loader: prefetch and the ring bound the work ahead of a slow trainer (threads)") {
  fixture f;
  fake_decoder decoder;
  vbucket::host_backend backend;
  host_ring ring(backend, {.slots = 3});
  host_loader l(f.plan.deal(1), 0, decoder, ring, {.workers = 2, .prefetch = 2});
  std::vector<host_loader::loaded_batch> held;
  for (int k = 0; k < 6; ++k) {
    std::this_thread::sleep_for(5ms);  // a slow training step
    auto b = l.next();
    REQUIRE(b);
    held.push_back(std::move(*b));
    if (held.size() > 1) held.erase(held.begin());  // the trainer keeps one batch
  }
  const auto st = l.stats();
  CHECK(st.max_ready <= 2);
  CHECK(ring.stats().peak_bytes <= ring.stats().bytes_allocated);
  CHECK(ring.stats().buffers <= 3);
  CHECK(vbucket::format_loader_stats(st).find("substitutions") != std::string::npos);
}

TEST_CASE("loader: a batch's slot can be submitted to the ring for the device copy (threads)") {
  fixture f;
  fake_decoder decoder;
  vbucket::host_backend backend({.async_copies = true});
  host_ring ring(backend, {.slots = 3});
  host_loader l(f.plan.deal(1), 0, decoder, ring);
  auto b = l.next();
  REQUIRE(b);
  const auto bytes = b->tensor.bytes();
  std::vector<std::uint8_t> expected(bytes.begin(), bytes.end());
  std::vector<std::uint8_t> device(bytes.size());
  ring.wait(ring.submit(std::move(b->slot), device.data(), device.size()));
  CHECK(device == expected);
}

TEST_CASE("loader: bad arguments are errors") {
  fixture f;
  fake_decoder decoder;
  vbucket::host_backend backend;
  host_ring ring(backend);
  const auto schedule = f.plan.deal(2);
  const auto message = [&](vbucket::loader_options o, std::uint32_t rank, std::uint64_t first) {
    try {
      host_loader l(schedule, rank, decoder, ring, o, first);
    } catch (const vbucket::error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(message({}, 2, 0) == "loader: rank 2 is not below the world size 2");
  CHECK(message({.workers = 0}, 0, 0) == "loader: workers must be at least 1");
  CHECK(message({.prefetch = 0}, 0, 0) == "loader: prefetch must be at least 1");
  CHECK(message({}, 0, schedule.steps() + 1).find("is past the") != std::string::npos);
  host_ring small(backend, {.slots = 2});
  CHECK_THROWS_WITH_AS(host_loader(schedule, 0, decoder, small, {.prefetch = 2}),
                       "loader: the staging ring's 2 slots cannot hold 2 prefetched batches and "
                       "the one the trainer holds (need at least 3)",
                       vbucket::error);
}

namespace {

/// A stand-in for `batch_sampler`: a schedule, a rank and the state its next batch starts at.
struct fake_sampler {
  vbucket::epoch_schedule sched;
  std::uint32_t r = 0;
  vbucket::plan_state st;

  [[nodiscard]] vbucket::epoch_schedule schedule() const { return sched; }
  [[nodiscard]] std::uint32_t rank() const { return r; }
  [[nodiscard]] vbucket::plan_state state() const { return st; }
};
static_assert(vbucket::schedule_source<fake_sampler>);
static_assert(!vbucket::schedule_source<vbucket::epoch_schedule>);

static_assert(std::ranges::input_range<host_loader>);
static_assert(
    std::same_as<std::ranges::range_reference_t<host_loader>, host_loader::loaded_batch&>);

struct seen_batch {
  std::uint64_t position;
  std::vector<std::uint32_t> samples;
  std::vector<std::uint8_t> bytes;
  bool operator==(const seen_batch&) const = default;
};

seen_batch seen(const host_loader::loaded_batch& b) {
  const auto bytes = b.tensor.bytes();
  return {b.info.position, b.samples, {bytes.begin(), bytes.end()}};
}

}  // namespace

TEST_CASE("loader: a range over its batches, the same as next() (threads)") {
  fixture f;
  fake_decoder decoder;
  vbucket::host_backend backend;
  const auto schedule = f.plan.deal(2);
  std::vector<seen_batch> by_next;
  {
    host_ring ring(backend, {.slots = 3});
    host_loader l(schedule, 1, decoder, ring);
    while (auto b = l.next()) by_next.push_back(seen(*b));
  }
  REQUIRE(by_next.size() == schedule.steps());

  host_ring ring(backend, {.slots = 4});
  vbucket::loader l(schedule, 1, decoder, ring, {.workers = 2, .prefetch = 2});
  static_assert(std::same_as<decltype(l), host_loader>);
  CHECK(l.steps() == schedule.steps());
  std::vector<seen_batch> by_range;
  std::optional<host_loader::loaded_batch> kept;  // moved out of the loop, slot and all
  for (auto& b : l) {
    if (kept) CHECK(seen(*kept) == by_next[by_range.size() - 1]);  // still valid a step later
    by_range.push_back(seen(b));
    CHECK(pixels_match(b, f.plan));
    kept = std::move(b);
  }
  CHECK(by_range == by_next);
  CHECK(l.begin() == l.end());  // one pass
  CHECK(l.state().consumed == schedule.steps() * 2);

  // next() and the loop share one position: the loop continues where next() stopped.
  host_ring ring2(backend, {.slots = 3});
  host_loader mixed(schedule, 1, decoder, ring2);
  REQUIRE(mixed.next());
  std::vector<seen_batch> rest;
  for (auto& b : mixed) rest.push_back(seen(b));
  CHECK(rest == std::vector<seen_batch>(by_next.begin() + 1, by_next.end()));
}

TEST_CASE("loader: follows a schedule source from its state, e.g. a resumed sampler (threads)") {
  fixture f;
  fake_decoder decoder;
  vbucket::host_backend backend;
  const auto schedule = f.plan.deal(3);
  REQUIRE(schedule.steps() > 3);
  const std::uint32_t rank = 2;
  std::vector<std::uint64_t> want;  // positions of rank 2 from step 2 on
  for (std::uint64_t s = 2; s < schedule.steps(); ++s)
    want.push_back(schedule.at(s, rank).position);

  // A source whose schedule starts at the epoch's beginning and whose state is 2 steps in, and
  // one whose schedule is dealt from that state: the loader continues at the same batch.
  const vbucket::plan_state state = schedule.state_after(2);
  for (const auto& source :
       {fake_sampler{schedule, rank, state}, fake_sampler{f.plan.deal(3, state), rank, state}}) {
    host_ring ring(backend, {.slots = 3});
    vbucket::loader l(source, decoder, ring, {.workers = 2});
    static_assert(std::same_as<decltype(l), host_loader>);
    CHECK(l.steps() == want.size());
    std::vector<std::uint64_t> got;
    for (auto& b : l) {
      got.push_back(b.info.position);
      CHECK(pixels_match(b, f.plan));
    }
    CHECK(got == want);
    CHECK(l.state().consumed == schedule.steps() * 3);
  }

  host_ring ring(backend, {.slots = 3});
  CHECK_THROWS_WITH_AS(host_loader(fake_sampler{schedule, rank, {5, 3, 0}}, decoder, ring),
                       "loader: the source's state vbucket-plan seed=5 epoch=3 consumed=0 is not "
                       "of its schedule's plan (seed 5, epoch 2)",
                       vbucket::error);
  CHECK_THROWS_WITH_AS(host_loader(fake_sampler{schedule, rank, {5, 2, 4}}, decoder, ring),
                       "loader: the source's state vbucket-plan seed=5 epoch=2 consumed=4 is not "
                       "at a step of its schedule (from 0 consumed, world size 3)",
                       vbucket::error);
  CHECK_THROWS_WITH_AS(host_loader(fake_sampler{schedule, 3, state}, decoder, ring),
                       "loader: rank 3 is not below the world size 3", vbucket::error);
}

TEST_CASE("loader: float32 and bfloat16 batches are normalised on the worker threads") {
  fixture f;
  vbucket::host_backend backend;
  const vbucket::normalization norm{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
  using vbucket::clip_layout;
  using vbucket::element_type;
  for (const auto element : {element_type::f32, element_type::bf16})
    for (const auto layout : {clip_layout::thwc, clip_layout::cthw}) {
      CAPTURE(static_cast<int>(element));
      CAPTURE(static_cast<int>(layout));
      fake_decoder decoder;
      host_ring ring(backend, {.slots = 3});
      host_loader l(f.plan.deal(1), 0, decoder, ring,
                    {.layout = layout, .element = element, .normalize = norm});
      std::uint64_t batches = 0;
      for (auto& b : l) {
        const auto& v = b.tensor.view;
        const auto n = static_cast<std::int64_t>(b.samples.size());
        CHECK(v.type == element);
        CHECK(v.layout == layout);
        CHECK(
            v.shape ==
            (layout == clip_layout::thwc
                 ? std::array<std::int64_t, 5>{n, b.info.frames, b.info.height, b.info.width, 3}
                 : std::array<std::int64_t, 5>{n, 3, b.info.frames, b.info.height, b.info.width}));
        CHECK(b.slot.data().size() >= v.bytes());  // the slot is sized for the element type
        // The uint8 THWC batch the decoder wrote, then the CPU reference of normalize.hpp.
        const vbucket::batch_shape shape{b.samples.size(), static_cast<std::size_t>(b.info.frames),
                                         static_cast<std::size_t>(b.info.height),
                                         static_cast<std::size_t>(b.info.width)};
        std::vector<std::uint8_t> u8(shape.elements());
        const std::size_t clip = u8.size() / b.samples.size();
        for (std::size_t c = 0; c < b.samples.size(); ++c)
          for (std::size_t i = 0; i < clip; ++i)
            u8[c * clip + i] = pixel(b.samples[c], crop_seed(f.plan, b.samples[c]), i);
        const auto expect = [&]<class Out>(Out) {
          std::vector<Out> want(u8.size());
          if (layout == clip_layout::cthw) {
            vbucket::normalize_thwc_to_cthw<Out>(u8, want, shape, norm);
          } else {
            for (std::size_t i = 0; i < u8.size(); ++i) {
              const float y = vbucket::normalize_value(u8[i], norm.mean[i % 3], norm.std[i % 3]);
              if constexpr (std::is_same_v<Out, float>)
                want[i] = y;
              else
                want[i] = vbucket::to_bfloat16_bits(y);
            }
          }
          const auto got = b.tensor.values<Out>();
          return std::equal(got.begin(), got.end(), want.begin(), want.end(),
                            [](Out x, Out y) { return std::memcmp(&x, &y, sizeof x) == 0; });
        };
        if (element == element_type::f32)
          CHECK(expect(float{}));
        else
          CHECK(expect(std::uint16_t{}));
        ++batches;
      }
      CHECK(batches == f.plan.num_batches());
      CHECK(decoder.cthw_tasks.load() == 0);  // decoders write THWC uint8; the workers convert
    }
}

TEST_CASE("loader: a custom converter runs on the worker threads, once per clip") {
  fixture f;
  fake_decoder decoder;
  vbucket::host_backend backend;
  host_ring ring(backend, {.slots = 3});
  std::mutex m;
  std::set<std::thread::id> threads;
  std::atomic<std::uint64_t> clips{0}, wrong_sizes{0};
  // Every value of a clip becomes its sample index plus the clip's first decoded byte.
  const vbucket::clip_converter convert = [&](const vbucket::clip_task& t,
                                              std::span<const std::uint8_t> thwc,
                                              const vbucket::tensor_view& out) {
    {
      std::lock_guard lock(m);
      threads.insert(std::this_thread::get_id());
    }
    ++clips;
    // Checked on the trainer's thread below (assertions stay off the workers).
    if (thwc.size() != t.bytes() || out.elements() != t.bytes()) ++wrong_sizes;
    auto* values = static_cast<float*>(out.data);
    for (std::size_t i = 0; i < out.elements(); ++i)
      values[i] = static_cast<float>(t.sample) + static_cast<float>(thwc[0]);
  };
  host_loader l(f.plan.deal(1), 0, decoder, ring,
                {.layout = vbucket::clip_layout::cthw,
                 .element = vbucket::element_type::f32,
                 .convert = convert});
  std::uint64_t samples = 0;
  for (auto& b : l) {
    const auto values = b.tensor.values<float>();
    const std::size_t clip = values.size() / b.samples.size();
    for (std::size_t c = 0; c < b.samples.size(); ++c) {
      const float want =
          static_cast<float>(b.samples[c]) +
          static_cast<float>(pixel(b.samples[c], crop_seed(f.plan, b.samples[c]), 0));
      CHECK(std::all_of(values.begin() + static_cast<std::ptrdiff_t>(c * clip),
                        values.begin() + static_cast<std::ptrdiff_t>((c + 1) * clip),
                        [&](float x) { return x == want; }));
    }
    samples += b.samples.size();
  }
  CHECK(clips.load() == samples);
  CHECK(wrong_sizes.load() == 0);
  CHECK(threads.count(std::this_thread::get_id()) == 0);  // never on the trainer's thread
  CHECK(l.stats().convert_seconds > 0.0);

  // A converter that throws stops the loader with its error.
  host_ring ring2(backend, {.slots = 3});
  host_loader failing(f.plan.deal(1), 0, decoder, ring2,
                      {.convert = [](const vbucket::clip_task&, std::span<const std::uint8_t>,
                                     const vbucket::tensor_view&) {
                        throw vbucket::error("my conversion failed");
                      }});
  CHECK_THROWS_WITH_AS((void)failing.next(), "my conversion failed", vbucket::error);
  // An invalid normalization is refused up front.
  vbucket::loader_options bad;
  bad.element = vbucket::element_type::bf16;
  bad.normalize.std[1] = 0.0f;
  CHECK_THROWS_WITH_AS(host_loader(f.plan.deal(1), 0, decoder, ring2, bad),
                       "normalization: std[1] must be finite and > 0", vbucket::error);
}

TEST_CASE("loader: the crop and substitution streams are the public functions (threads)") {
  fixture f;
  fake_decoder decoder;
  decoder.bad = {3, 10, 11, 42, 77};
  vbucket::host_backend backend;
  const auto schedule = f.plan.deal(2);
  // The documented definitions: the crop seed is the first draw of crop_stream.
  auto stream = vbucket::crop_stream(5, 2, 17);
  CHECK(vbucket::crop_seed(5, 2, 17) == stream.next_u64());
  CHECK(vbucket::crop_seed(5, 2, 17) != vbucket::crop_seed(5, 3, 17));
  CHECK(vbucket::crop_seed(5, 2, 17) == crop_seed(f.plan, 17));
  std::uint64_t checked = 0;
  for (std::uint32_t rank = 0; rank < 2; ++rank) {
    host_ring ring(backend, {.slots = 3});
    host_loader l(schedule, rank, decoder, ring);
    for (auto& b : l) {
      CHECK(pixels_match(b, f.plan));  // decoded with crop_seed(seed, epoch, sample)
      const vbucket::plan_bucket& pb = f.plan.bucket(b.info.bucket);
      const auto slots =
          f.plan.slots().subspan(static_cast<std::size_t>(pb.slot_begin),
                                 static_cast<std::size_t>(pb.batches * pb.batch_size));
      for (const auto& s : b.substitutions) {
        // Replay: draw candidates from the bucket's slots, skip the failed sample, take the
        // first that decodes.
        auto draws = vbucket::substitution_stream(5, 2, b.info.position, s.clip);
        std::uint32_t want = s.failed;
        while (true) {
          const std::uint32_t candidate = slots[draws.next_u64() % slots.size()];
          if (candidate == s.failed) continue;
          if (!decoder.bad.count(candidate)) {
            want = candidate;
            break;
          }
        }
        CHECK(s.replacement == want);
        ++checked;
      }
    }
  }
  CHECK(checked > 0);
}

TEST_CASE("loader: driven by a batch_sampler, and resumed through it (threads)") {
  fixture f;
  const std::vector<vbucket::sample_meta> samples = vbucket_test::loader_samples();
  fake_decoder decoder;
  decoder.bad = {4, 9};
  vbucket::host_backend backend;
  const std::uint32_t world = 2, rank = 1;
  vbucket::batch_sampler sampler(samples, f.config, vbucket::opensora_v2_rule{},
                                 {.seed = 5, .world = world, .rank = rank});
  sampler.set_epoch(2);
  REQUIRE(sampler.size() > 3);
  std::vector<vbucket::batch> want(sampler.begin(), sampler.end());

  host_ring ring(backend, {.slots = 3});
  vbucket::loader l(sampler, decoder, ring, {.workers = 2});
  static_assert(std::same_as<decltype(l), host_loader>);
  CHECK(l.steps() == sampler.size());
  std::size_t k = 0;
  for (auto& b : l) {
    REQUIRE(k < want.size());
    CHECK(b.info.position == want[k].position);
    CHECK(b.info.bucket == want[k].bucket);
    CHECK(b.samples.size() == want[k].indices.size());
    for (std::size_t c = 0; c < b.samples.size(); ++c)
      if (!decoder.bad.count(want[k].indices[c])) CHECK(b.samples[c] == want[k].indices[c]);
    CHECK(pixels_match(b, sampler.plan()));  // crops keyed by the sampler's seed and epoch
    ++k;
  }
  CHECK(k == want.size());
  CHECK(l.state().consumed == sampler.size() * world);

  // Resume: a checkpoint taken after 2 steps, loaded into the sampler; a new loader on it
  // continues with the sampler's batch 2.
  vbucket::plan_state saved = sampler.state();
  saved.consumed += 2 * world;
  sampler.load_state(saved);
  host_ring ring2(backend, {.slots = 3});
  vbucket::loader resumed(sampler, decoder, ring2);
  std::vector<std::uint64_t> positions;
  for (auto& b : resumed) positions.push_back(b.info.position);
  std::vector<std::uint64_t> expected;
  for (std::size_t i = 2; i < want.size(); ++i) expected.push_back(want[i].position);
  CHECK(positions == expected);
}

TEST_CASE("loader: clip_normalizer matches the CPU reference for any pixel count") {
  const vbucket::normalization norm{{0.1f, 0.5f, 0.9f}, {0.3f, 0.25f, 2.0f}};
  const vbucket::clip_normalizer convert(norm);
  for (const std::size_t pixels : {1u, 3u, 4u, 5u, 7u, 15u, 64u, 101u}) {
    CAPTURE(pixels);
    std::vector<std::uint8_t> src(pixels * 3);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 97 + 13);
    const vbucket::batch_shape shape{1, 1, 1, pixels};
    std::vector<float> f32(src.size()), want_f32(src.size());
    std::vector<std::uint16_t> bf16(src.size()), want_bf16(src.size());
    std::vector<std::uint8_t> u8(src.size());
    vbucket::tensor_view v;
    v.shape = {1, 3, 1, 1, static_cast<std::int64_t>(pixels)};
    v.layout = vbucket::clip_layout::cthw;
    // CTHW against normalize_thwc_to_cthw, bit for bit.
    v.type = vbucket::element_type::f32;
    v.data = f32.data();
    convert(src, v);
    vbucket::normalize_thwc_to_cthw<float>(src, want_f32, shape, norm);
    CHECK(std::memcmp(f32.data(), want_f32.data(), f32.size() * sizeof(float)) == 0);
    v.type = vbucket::element_type::bf16;
    v.data = bf16.data();
    convert(src, v);
    vbucket::normalize_thwc_to_cthw<std::uint16_t>(src, want_bf16, shape, norm);
    CHECK(bf16 == want_bf16);
    // uint8 CTHW: the planes of the THWC bytes.
    v.type = vbucket::element_type::u8;
    v.data = u8.data();
    convert(src, v);
    bool planes = true;
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t p = 0; p < pixels; ++p) planes &= u8[c * pixels + p] == src[p * 3 + c];
    CHECK(planes);
    // THWC: element by element.
    v.layout = vbucket::clip_layout::thwc;
    v.type = vbucket::element_type::f32;
    v.data = f32.data();
    convert(src, v);
    bool same = true;
    for (std::size_t i = 0; i < src.size(); ++i) {
      const float y = vbucket::normalize_value(src[i], norm.mean[i % 3], norm.std[i % 3]);
      same &= std::memcmp(&f32[i], &y, sizeof y) == 0;
    }
    CHECK(same);
  }
}

namespace {
/// A held drop-in sampler (rank `rank` of `world`) over 900 clips whose data epochs' lengths
/// differ: its epochs are held to epoch 0's length (carried tails, counted repeats).
std::unique_ptr<vbucket::opensora_sampler> held_sampler(std::uint32_t world, std::uint32_t rank) {
  auto clips = std::make_shared<std::vector<vbucket::sample_meta>>();
  for (int i = 0; i < 900; ++i)
    clips->push_back({1 + (i * 37) % 200, 240 + (i % 5) * 120, 320 + (i % 7) * 160, 24.0});
  auto os = std::make_unique<vbucket::opensora_sampler>(vbucket::make_any_sampler(
      std::shared_ptr<const std::vector<vbucket::sample_meta>>(clips),
      std::make_shared<const vbucket::bucket_config>(vbucket_test::draw_v2_config()),
      vbucket::opensora_v2_rule{}, {.world = world, .rank = rank}, 7));
  os->hold_epochs();
  return os;
}

using batch_key = std::pair<std::uint64_t, std::vector<std::uint32_t>>;  // position, indices
}  // namespace

TEST_CASE("loader: over held epochs, the held length and batches; its state resumes (threads)") {
  fake_decoder decoder;
  vbucket::host_backend backend;
  const std::uint32_t world = 2, rank = 1;
  auto reference = held_sampler(world, rank);
  auto os = held_sampler(world, rank);
  const std::uint64_t len = os->epoch_steps();  // train.py's len(dataloader), taken once
  std::vector<std::uint64_t> data_lengths;
  for (std::uint64_t e = 0; e < 4; ++e) {
    reference->set_epoch(e);
    reference->started();
    std::vector<batch_key> want;
    std::uint64_t repeats = 0;
    while (const auto b = reference->next_batch()) {
      want.emplace_back(b->position,
                        std::vector<std::uint32_t>(b->indices.begin(), b->indices.end()));
      repeats += b->repeat ? 1u : 0u;
    }
    reference->finish();
    data_lengths.push_back(reference->sampler().num_global_batches());

    os->set_epoch(e);
    os->begin_iteration();
    host_ring ring(backend, {.slots = 3});
    auto l = vbucket::make_any_loader(*os, decoder, ring, {.workers = 2, .pixels = false});
    CHECK(l->steps() == len);
    std::vector<batch_key> got;
    for (auto& b : *l) {
      CHECK(b.info.step == got.size());
      got.emplace_back(b.info.position, b.samples);
      if (e == 2 && got.size() == 3) break;  // stopped: resumed below from its state
    }
    if (e == 2) {
      const vbucket::plan_state saved = l->state();
      CHECK(saved.consumed == 3 * world);
      l.reset();
      auto again = held_sampler(world, rank);  // a new process: the state alone
      again->load(saved);
      again->set_step(3);
      again->set_epoch(e);
      again->begin_iteration();
      host_ring ring2(backend, {.slots = 3});
      auto resumed = vbucket::make_any_loader(*again, decoder, ring2, {.pixels = false});
      CHECK(resumed->steps() == len - 3);
      for (auto& b : *resumed) got.emplace_back(b.info.position, b.samples);
      // the end of the held epoch is a state the held sampler loads
      CHECK_NOTHROW(again->load_state(resumed->state()));
    } else {
      CHECK(l->stats().repeat_batches == repeats);
      CHECK_NOTHROW(os->load_state(l->state()));
      CHECK(os->consumed() == len * world);
    }
    CHECK(got == want);
  }
  MESSAGE("data epochs' global batches: " << data_lengths[0] << ", " << data_lengths[1] << ", "
                                          << data_lengths[2] << ", " << data_lengths[3]);
  CHECK((data_lengths[1] != data_lengths[0] || data_lengths[2] != data_lengths[0] ||
         data_lengths[3] != data_lengths[0]));

  // A loader of the wrapped plan would run the data epoch's length: refused.
  os->set_epoch(1);
  os->begin_iteration();
  host_ring ring(backend, {.slots = 3});
  CHECK_THROWS_WITH_AS(host_loader(*os, decoder, ring), doctest::Contains("holds its epochs"),
                       vbucket::error);
}
