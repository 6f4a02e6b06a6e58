/// Tests of vbucket/loader.hpp with a synthetic decoder (a pattern per (sample, crop seed),
/// chosen samples failing): every batch of a rank arrives in order with its bucket's shape and
/// the right pixels; failed clips are replaced from the same bucket, deterministically and
/// counted; resume continues exactly; cancellation and back-pressure hold. The names say
/// "thread" so these also run under TSan.
#include "vbucket/loader.hpp"

#include <doctest/doctest.h>

#include <atomic>    // std::atomic
#include <chrono>    // std::chrono::milliseconds
#include <cstdint>   // std::uint8_t, std::uint32_t
#include <map>       // std::map
#include <optional>  // std::optional
#include <set>       // std::set
#include <string>    // std::string
#include <thread>    // std::this_thread::sleep_for
#include <vector>    // std::vector

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

  std::optional<std::string> decode(const vbucket::clip_task& t, std::span<std::uint8_t> out) {
    ++calls;
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
    vbucket::user_tables t;
    t.add("lo", 64, vbucket::aspect_table({{"1:2", 2.0, 8, 4}, {"1:1", 1.0, 6, 6}}));
    t.add("hi", 256, vbucket::aspect_table({{"1:1", 1.0, 12, 12}}));
    config = vbucket::bucket_config(
        std::vector<vbucket::bucket_spec>{
            {"lo", 3, 1.0, {}, 4}, {"lo", 1, 1.0, {}, 7}, {"hi", 2, 1.0, {}, 3}},
        t);
    for (std::size_t i = 0; i < samples; ++i)
      ids.push_back(static_cast<vbucket::bucket_id>((i * 7 + i / 5) % config.num_buckets()));
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
      CHECK(step == schedule.steps());
      const auto st = l.stats();
      CHECK(st.batches == schedule.steps());
      CHECK(st.substitutions == 0);
      CHECK(st.failed == 0);
      CHECK(l.state().consumed == schedule.steps() * world);
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
  CHECK(message.find("replacements of its bucket failed too; last: sample ") != std::string::npos);
  CHECK(message.rfind("loader: batch at position 0 (bucket ", 0) == 0);
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
  CHECK(saved.to_string() == "vbucket-plan seed=5 epoch=2 consumed=6");
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
