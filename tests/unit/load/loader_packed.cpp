/// Tests of vbucket/load/loader.hpp over packed schedules (`packed_plan.hpp`), with a synthetic
/// decoder: every packed batch of a rank arrives in order, its clips back to back in one slot
/// with the offsets, cu_seqlens and shapes of `make_packed_layout` and the bytes of the decoder
/// called clip by clip; failed clips are replaced by samples of their own bucket by the
/// `substitution_stream` rule, counted and listed; resume continues exactly, also under another
/// world size; a packed batch_sampler drives it (the loader's type deduced from it), and an
/// any_sampler through make_any_loader; float32 CTHW clips are the normalised uint8 ones. The
/// names say "thread" so these also run under TSan.
#include <doctest/doctest.h>

#include <algorithm>  // std::ranges::equal, std::max
#include <cstdint>    // std::uint8_t, std::uint32_t
#include <cstring>    // std::memcmp
#include <map>        // std::map
#include <memory>     // std::make_shared
#include <optional>   // std::optional
#include <set>        // std::set
#include <string>     // std::string
#include <vector>     // std::vector

#include "vbucket/load/loader.hpp"
#include "vbucket/sample/any_sampler.hpp"
#include "vbucket/sample/batch_sampler.hpp"
#include "vbucket_test/loader_data.hpp"

namespace {

/// Writes a pattern of (sample, crop seed, byte index); fails for the samples in `bad`.
struct pattern_decoder {
  std::set<std::uint32_t> bad;
  std::optional<std::string> decode(const vbucket::clip_task& t, std::span<std::uint8_t> out) {
    if (out.size() != t.bytes()) return "wrong buffer size";
    if (bad.count(t.sample)) return "sample " + std::to_string(t.sample) + ": corrupt file";
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = static_cast<std::uint8_t>(t.sample * 37u + static_cast<std::uint32_t>(t.seed % 251) +
                                         static_cast<std::uint32_t>(i % 241));
    return std::nullopt;
  }
};

using host_ring = vbucket::staging_ring<vbucket::host_backend>;
using host_loader = vbucket::loader<pattern_decoder, vbucket::host_backend, vbucket::plain_tensor,
                                    vbucket::packed_batching>;

/// Small clips of three shapes (8×4 and 6×6 at 3 and 1 frames, 12×12 at 2 frames), packed to
/// a budget of a few samples.
struct fixture {
  vbucket::bucket_config config;
  std::vector<vbucket::bucket_id> ids;
  vbucket::packed_plan plan;
  double budget = 0;

  explicit fixture(std::size_t samples = 160) {
    config = vbucket_test::loader_config();
    ids = vbucket_test::loader_ids(samples, config.num_buckets());
    const vbucket::packed_plan probe = vbucket::make_packed_plan(
        std::span<const vbucket::bucket_id>(ids), config, {.seed = 5, .token_budget = 1e9});
    double largest = 0;
    for (const auto& b : probe.buckets()) largest = std::max(largest, b.cost);
    budget = 4.5 * largest;
    plan = vbucket::make_packed_plan(std::span<const vbucket::bucket_id>(ids), config,
                                     {.seed = 5, .epoch = 2, .token_budget = budget});
  }
};

/// The bytes of batch `b` (uint8 THWC): the decoder called for each clip in turn, with its
/// shape and the loader's crop seed, the clips back to back.
std::vector<std::uint8_t> reference_bytes(const vbucket::packed_batch& b,
                                          const vbucket::packed_plan& plan) {
  pattern_decoder d;
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const vbucket::sample_shape s = b.shape(i);
    vbucket::clip_task t;
    t.sample = b.indices[i];
    t.frames = s.frames;
    t.height = s.height;
    t.width = s.width;
    t.layout = vbucket::clip_layout::thwc;
    t.seed = vbucket::crop_seed(plan.seed(), plan.epoch(), t.sample);
    std::vector<std::uint8_t> clip(t.bytes());
    REQUIRE_FALSE(d.decode(t, clip).has_value());
    out.insert(out.end(), clip.begin(), clip.end());
  }
  return out;
}

/// Checks one loaded batch against the plan's batch `want` (no failures): indices, shapes,
/// offsets, cu_seqlens, per-clip views, bytes.
void check_batch(const host_loader::loaded_batch& b, const vbucket::packed_batch& want,
                 const vbucket::packed_plan& plan) {
  REQUIRE(b.packed);
  const auto& p = *b.packed;
  CHECK(b.info.position == want.position);
  CHECK(b.info.repeat == want.repeat);
  CHECK(std::ranges::equal(b.info.indices, want.indices));
  CHECK(std::ranges::equal(b.samples, want.indices));
  const vbucket::packed_layout layout = vbucket::make_packed_layout(want);
  CHECK(p.offsets == layout.clip_offsets);  // uint8: the same byte offsets
  CHECK(p.cu_seqlens == layout.cu_seqlens);
  CHECK(p.max_seqlen == layout.max_seqlen);
  REQUIRE(p.shapes.size() == want.size());
  REQUIRE(p.clips.size() == want.size());
  CHECK(std::ranges::equal(p.buckets, want.buckets));
  for (std::size_t c = 0; c < want.size(); ++c) {
    const vbucket::sample_shape s = want.shape(c);
    CHECK(p.shapes[c] == s);
    const auto& v = p.clips[c].view;
    CHECK(v.data == static_cast<std::uint8_t*>(p.flat.data) + p.offsets[c]);
    CHECK(v.shape == std::array<std::int64_t, 5>{1, s.frames, s.height, s.width, 3});
  }
  CHECK(p.flat.bytes() == layout.bytes());
  CHECK(b.tensor.view.data == p.flat.data);
  const std::vector<std::uint8_t> ref = reference_bytes(want, plan);
  REQUIRE(b.tensor.bytes().size() == ref.size());
  CHECK(std::memcmp(b.tensor.bytes().data(), ref.data(), ref.size()) == 0);
}

}  // namespace

TEST_CASE("loader packed: every packed batch of each rank, its layout and bytes (threads)") {
  fixture f;
  REQUIRE(f.plan.num_batches() > 6);
  std::size_t mixed = 0;
  pattern_decoder decoder;
  vbucket::host_backend backend;
  for (std::uint32_t world : {1u, 2u, 3u}) {
    const vbucket::packed_schedule schedule = f.plan.deal(world);
    std::multiset<std::uint32_t> seen;
    for (std::uint32_t rank = 0; rank < world; ++rank) {
      host_ring ring(backend, {.slots = 3, .grow = false});
      ring.reserve(vbucket::max_packed_batch_bytes(f.plan), 3);  // the largest batch fits
      host_loader l(schedule, rank, decoder, ring, {.workers = 3, .prefetch = 2});
      CHECK(l.packed());
      CHECK(l.steps() == schedule.steps());
      std::uint64_t step = 0;
      while (auto b = l.next()) {
        const vbucket::packed_batch want = schedule.at(step, rank);
        check_batch(*b, want, f.plan);
        mixed += want.buckets.front() != want.buckets.back() ? 1u : 0u;
        if (!want.repeat)
          for (auto s : b->samples) seen.insert(s);
        ++step;
      }
      vbucket_test::check_whole_epoch(l, step, schedule.steps(), world);
    }
    // Every sample of the plan once per epoch (repeats for rank alignment aside).
    CHECK(seen.size() == f.plan.samples());
    CHECK(std::set<std::uint32_t>(seen.begin(), seen.end()).size() == f.plan.samples());
  }
  CHECK(mixed > 0);  // the test saw batches of mixed shapes
}

TEST_CASE("loader packed: failed clips are replaced from their own bucket, counted (threads)") {
  fixture f;
  pattern_decoder decoder;
  decoder.bad = {3, 10, 11, 42, 77, 100};
  vbucket::host_backend backend;
  const vbucket::packed_schedule schedule = f.plan.deal(2);
  // The bucket's candidates as documented: its samples in packing order.
  std::map<vbucket::bucket_id, std::vector<std::uint32_t>> by_bucket;
  for (std::uint64_t id = 0; id < f.plan.num_batches(); ++id) {
    const vbucket::packed_batch b = f.plan.make_batch(id);
    for (std::size_t c = 0; c < b.size(); ++c) by_bucket[b.buckets[c]].push_back(b.indices[c]);
  }
  std::vector<std::uint32_t> first_run;
  for (int run = 0; run < 2; ++run) {
    std::uint64_t failing = 0, listed = 0, subs = 0;
    std::vector<std::uint32_t> delivered;
    for (std::uint32_t rank = 0; rank < 2; ++rank) {
      host_ring ring(backend, {.slots = 3});
      host_loader l(schedule, rank, decoder, ring, {.workers = 2, .prefetch = 2});
      std::uint64_t step = 0;
      while (auto b = l.next()) {
        const vbucket::packed_batch want = schedule.at(step++, rank);
        REQUIRE(b->samples.size() == want.size());  // never short
        const vbucket::packed_layout layout = vbucket::make_packed_layout(want);
        CHECK(b->packed->offsets == layout.clip_offsets);  // layout unchanged
        CHECK(b->packed->cu_seqlens == layout.cu_seqlens);
        for (std::size_t c = 0; c < want.size(); ++c) {
          if (!decoder.bad.count(want.indices[c])) {
            CHECK(b->samples[c] == want.indices[c]);
            continue;
          }
          ++failing;
          const std::uint32_t r = b->samples[c];
          CHECK_FALSE(decoder.bad.count(r));
          CHECK(f.ids[r] == want.buckets[c]);  // same bucket, same shape
          // The first draw of substitution_stream that lands on a decodable other sample.
          const auto& cand = by_bucket[want.buckets[c]];
          auto draws = vbucket::substitution_stream(5, 2, want.position, c);
          std::uint32_t expect = want.indices[c];
          for (int a = 0; a < 8; ++a) {
            const std::uint32_t x = cand[draws.next_u64() % cand.size()];
            if (x == want.indices[c]) continue;
            expect = x;
            if (!decoder.bad.count(x)) break;
          }
          CHECK(r == expect);
          // Its bytes are the replacement's, at the clip's offset.
          pattern_decoder clean;
          vbucket::clip_task t{r,
                               want.shape(c).frames,
                               want.shape(c).height,
                               want.shape(c).width,
                               vbucket::clip_layout::thwc,
                               vbucket::crop_seed(5, 2, r)};
          std::vector<std::uint8_t> px(t.bytes());
          REQUIRE_FALSE(clean.decode(t, px));
          CHECK(std::memcmp(b->tensor.bytes().data() + b->packed->offsets[c], px.data(),
                            px.size()) == 0);
        }
        for (const auto& s : b->substitutions) {
          CHECK(s.position == want.position);
          CHECK(s.failed == want.indices[s.clip]);
          CHECK(s.replacement == b->samples[s.clip]);
          CHECK(s.error.find("corrupt file") != std::string::npos);
          ++listed;
        }
        delivered.insert(delivered.end(), b->samples.begin(), b->samples.end());
      }
      subs += l.stats().substitutions;
    }
    CHECK(failing > 0);
    CHECK(listed == failing);
    CHECK(subs == failing);
    if (run == 0)
      first_run = delivered;
    else
      CHECK(delivered == first_run);  // deterministic
  }
}

TEST_CASE("loader packed: a bucket with nothing decodable is an error, not a short batch") {
  fixture f;
  pattern_decoder decoder;
  for (std::uint32_t i = 0; i < f.ids.size(); ++i)
    if (f.ids[i] == f.plan.global_batch(0).buckets[0]) decoder.bad.insert(i);
  vbucket::host_backend backend;
  host_ring ring(backend, {.slots = 3});
  host_loader l(f.plan.deal(1), 0, decoder, ring, {.workers = 1, .prefetch = 1});
  CHECK_THROWS_WITH_AS((void)l.next(), doctest::Contains("replacements of its bucket failed"),
                       vbucket::error);
}

TEST_CASE("loader packed: resume from state() continues exactly, also in another world (threads)") {
  fixture f;
  pattern_decoder decoder;
  vbucket::host_backend backend;
  const std::uint32_t world = 2;
  const vbucket::packed_schedule schedule = f.plan.deal(world);
  REQUIRE(schedule.steps() > 4);
  const std::uint64_t k = 3;
  vbucket::plan_state saved;
  {
    host_ring ring(backend, {.slots = 4});
    host_loader l(schedule, 0, decoder, ring, {.workers = 2, .prefetch = 2});
    for (std::uint64_t i = 0; i < k; ++i) REQUIRE(l.next());
    saved = l.state();
  }
  CHECK(saved.consumed == k * world);
  CHECK(saved == schedule.state_after(k));
  // The same world: each rank continues at step k.
  const vbucket::plan_state parsed = vbucket::plan_state::parse(saved.to_string());
  for (std::uint32_t rank = 0; rank < world; ++rank) {
    host_ring ring(backend, {.slots = 3});
    host_loader l(f.plan.deal(world, parsed), rank, decoder, ring, {.workers = 2});
    std::uint64_t step = k;
    while (auto b = l.next()) check_batch(*b, schedule.at(step++, rank), f.plan);
    CHECK(step == schedule.steps());
  }
  // World 3 from the same state: together the ranks deliver global positions [k·2, n) once.
  std::set<std::uint64_t> positions;
  std::uint64_t real = 0;
  for (std::uint32_t rank = 0; rank < 3; ++rank) {
    host_ring ring(backend, {.slots = 3});
    const vbucket::packed_schedule s3 = f.plan.deal(3, parsed);
    host_loader l(s3, rank, decoder, ring, {.workers = 2});
    while (auto b = l.next()) {
      if (b->info.repeat) continue;
      check_batch(*b, f.plan.global_batch(b->info.position), f.plan);
      positions.insert(b->info.position);
      ++real;
    }
  }
  CHECK(real == f.plan.num_batches() - k * world);
  CHECK(positions.size() == real);
  CHECK(*positions.begin() == k * world);
  CHECK(*positions.rbegin() == f.plan.num_batches() - 1);
}

TEST_CASE("loader packed: driven by a packed batch_sampler, and resumed through it (threads)") {
  fixture f;
  const std::vector<vbucket::sample_meta> samples = vbucket_test::loader_samples();
  pattern_decoder decoder;
  vbucket::host_backend backend;
  const std::uint32_t world = 2, rank = 1;
  vbucket::sampler_options o{.seed = 5, .world = world, .rank = rank};
  o.token_budget = f.budget;
  vbucket::batch_sampler sampler(samples, f.config, vbucket::opensora_v2_rule{}, o,
                                 vbucket::packed_batching{});
  sampler.set_epoch(2);
  const auto steps = sampler.packed_batches();
  REQUIRE(steps.size() > 3);
  host_ring ring(backend, {.slots = 3});
  vbucket::loader l(sampler, decoder, ring, {.workers = 2});
  static_assert(std::same_as<decltype(l), host_loader>);
  CHECK(l.packed());
  CHECK(l.steps() == steps.size());
  CHECK(l.schedule().steps() == steps.size());
  std::size_t k = 0;
  for (auto& b : l) {
    REQUIRE(k < steps.size());
    check_batch(b, steps[k], sampler.packing());
    ++k;
  }
  CHECK(k == steps.size());
  CHECK(l.state() == sampler.state().advanced(steps.size(), world));

  // Resume: a state 2 steps on, loaded into the sampler; a new loader continues at step 2.
  sampler.load_state(sampler.state().advanced(2, world));
  host_ring ring2(backend, {.slots = 3});
  vbucket::loader resumed(sampler, decoder, ring2);
  std::size_t i = 2;
  for (auto& b : resumed) check_batch(b, steps[i++], sampler.packing());
  CHECK(i == steps.size());
}

TEST_CASE("loader packed: make_any_loader follows an any_sampler's run-time batching (threads)") {
  fixture f;
  const auto samples =
      std::make_shared<const std::vector<vbucket::sample_meta>>(vbucket_test::loader_samples());
  const auto config = std::make_shared<const vbucket::bucket_config>(f.config);
  pattern_decoder decoder;
  vbucket::host_backend backend;
  for (const bool pack : {false, true}) {
    CAPTURE(pack);
    vbucket::sampler_options o{.seed = 5, .world = 2, .rank = 1};
    if (pack) {
      o.batching = vbucket::batching_mode::packed;
      o.token_budget = f.budget;
    }
    const auto s = vbucket::make_any_sampler(samples, config, vbucket::opensora_v2_rule{}, o);
    s->set_epoch(1);
    REQUIRE(s->size() > 2);
    host_ring ring(backend, {.slots = 3});
    const auto l = vbucket::make_any_loader(*s, decoder, ring, {.workers = 2});
    CHECK(l->packed() == pack);
    CHECK(l->steps() == s->size());
    std::size_t k = 0;
    for (auto& b : *l) {
      REQUIRE(k < s->size());
      CHECK(b.packed.has_value() == pack);
      if (pack) {
        CHECK(std::ranges::equal(b.samples, s->packed_batches()[k].indices));
      } else {
        const vbucket::batch want = s->batches()[k];
        CHECK(std::ranges::equal(b.samples, want.indices));
        CHECK(b.info.bucket == want.bucket);
      }
      ++k;
    }
    CHECK(k == s->size());
    CHECK(l->state() == s->state().advanced(k, 2));
    // A loader of the other batching refuses the source at run time.
    host_ring ring2(backend, {.slots = 3});
    if (pack) {
      CHECK_THROWS_WITH_AS(
          (vbucket::loader<pattern_decoder, vbucket::host_backend>(*s, decoder, ring2)),
          doctest::Contains("the source's batches are packed"), vbucket::error);
    } else {
      CHECK_THROWS_WITH_AS(host_loader(*s, decoder, ring2),
                           doctest::Contains("the source's batches are fixed"), vbucket::error);
    }
  }
}

TEST_CASE("loader packed: float32 CTHW clips are the normalised uint8 ones (threads)") {
  fixture f;
  pattern_decoder decoder;
  vbucket::host_backend backend;
  const vbucket::normalization norm{{0.5f, 0.4f, 0.3f}, {0.2f, 0.25f, 0.3f}};
  const vbucket::clip_normalizer reference(norm);
  const vbucket::packed_schedule schedule = f.plan.deal(1);
  host_ring ring(backend, {.slots = 3});
  ring.reserve(vbucket::max_packed_batch_bytes(f.plan, 4), 3);
  host_loader l(schedule, 0, decoder, ring,
                {.workers = 2,
                 .layout = vbucket::clip_layout::cthw,
                 .element = vbucket::element_type::f32,
                 .normalize = norm});
  std::uint64_t step = 0;
  while (auto b = l.next()) {
    const vbucket::packed_batch want = schedule.at(step++, 0);
    const auto& p = *b->packed;
    const vbucket::packed_layout layout = vbucket::make_packed_layout(want);
    const std::vector<std::uint8_t> u8 = reference_bytes(want, f.plan);
    for (std::size_t c = 0; c < want.size(); ++c) {
      CHECK(p.offsets[c] == 4 * layout.clip_offsets[c]);
      const vbucket::sample_shape s = want.shape(c);
      CHECK(p.clips[c].view.shape ==
            std::array<std::int64_t, 5>{1, 3, s.frames, s.height, s.width});
      CHECK(p.clips[c].view.type == vbucket::element_type::f32);
      const std::size_t n = layout.clip_offsets[c + 1] - layout.clip_offsets[c];
      std::vector<float> expect(n);
      vbucket::tensor_view out = p.clips[c].view;
      out.data = expect.data();
      reference(std::span<const std::uint8_t>(u8).subspan(layout.clip_offsets[c], n), out);
      CHECK(std::memcmp(p.clips[c].view.data, expect.data(), n * 4) == 0);
    }
    CHECK(p.flat.bytes() == 4 * layout.bytes());
  }
  CHECK(step == schedule.steps());
}
