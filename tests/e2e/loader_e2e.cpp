/// End-to-end: scan the generated dataset, bucket it, plan one epoch for world size 2 and run
/// the loader with FFmpeg decoding on both ranks. Every assigned sample is delivered, the only
/// extra copies are the counted pads and repeats, bad files are replaced from their bucket and
/// counted, every tensor has its bucket's shape, and resuming mid-epoch continues exactly
/// (same batches, same bytes); float32 and bfloat16 CTHW batches made on the workers equal the
/// CPU reference of normalize.hpp applied to the uint8 batches, with a batch_sampler and
/// file_decoder over the trainer's own records driving the loaders.
#include <doctest/doctest.h>

#include <algorithm>  // std::count_if
#include <cstdint>    // std::uint64_t
#include <cstring>    // std::memcmp
#include <map>        // std::map
#include <set>        // std::set
#include <span>       // std::span
#include <string>     // std::string
#include <vector>     // std::vector

#include "vbucket/ffmpeg/ffmpeg.hpp"
#include "vbucket/ffmpeg/file_decoder.hpp"
#include "vbucket/vbucket.hpp"

namespace {

using decoder_t = const vbucket::ffmpeg::file_decoder;
using loader_t = vbucket::loader<decoder_t, vbucket::host_backend>;

struct dataset {
  std::vector<std::string> files, paths;
  std::size_t unreadable = 0;
  vbucket::meta_table meta;
  vbucket::bucket_config config;
  std::vector<vbucket::bucket_id> ids;
  vbucket::epoch_plan plan;

  dataset() {
    vbucket::ffmpeg::quiet_logs();
    files = vbucket::ffmpeg::list_media(VBUCKET_E2E_MEDIA_DIR);
    const auto probed = vbucket::ffmpeg::probe_all(files, 2);
    for (std::size_t i = 0; i < files.size(); ++i) {
      if (!probed[i]) {
        ++unreadable;
        continue;
      }
      meta.push_back({probed[i]->num_frames, probed[i]->height, probed[i]->width, probed[i]->fps});
      paths.push_back(files[i]);
    }
    config = vbucket::bucket_config(std::vector<vbucket::bucket_spec>{{"256px", 1, 1.0, {}, 5},
                                                                      {"256px", 5, 1.0, {}, 3},
                                                                      {"256px", 9, 0.5, {}, 2},
                                                                      {"256px", 17, 1.0, {}, 2}},
                                    vbucket::opensora_v2_tables{});
    ids =
        vbucket::assign_all(config, meta, vbucket::opensora_v2_rule{}, vbucket::fast_source(11, 0));
    plan = vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), config,
                                    {.seed = 11, .epoch = 0});
  }
};

std::uint64_t fnv1a(std::span<const std::uint8_t> bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto b : bytes) h = (h ^ b) * 0x100000001b3ULL;
  return h;
}

struct delivered {
  std::uint64_t position;
  std::vector<std::uint32_t> samples;
  std::uint64_t hash;
  bool operator==(const delivered&) const = default;
};

std::vector<delivered> run(const dataset& d, const vbucket::epoch_schedule& s, std::uint32_t rank,
                           decoder_t& decoder, std::size_t limit = SIZE_MAX,
                           vbucket::plan_state* state = nullptr) {
  vbucket::host_backend backend;
  vbucket::staging_ring<vbucket::host_backend> ring(backend, {.slots = 4});
  loader_t l(s, rank, decoder, ring, {.workers = 2, .prefetch = 2});
  std::vector<delivered> out;
  while (out.size() < limit) {
    auto b = l.next();
    if (!b) break;
    out.push_back({b->info.position, b->samples, fnv1a(b->tensor.bytes())});
  }
  if (state) *state = l.state();
  (void)d;
  return out;
}

}  // namespace

TEST_CASE("e2e: one epoch, world size 2, both ranks, with bad files (threads)") {
  const dataset d;
  REQUIRE(d.files.size() == 64);
  // not_media.mp4, and the MP4s the probe finds unusable: truncated.mp4 (no media data after
  // the header) and zeroed.mp4 (media data overwritten with zeros). garbled.mp4 probes fine.
  CHECK(d.unreadable == 3);
  const vbucket::ffmpeg::file_decoder decoder(d.paths, d.meta);
  const auto schedule = d.plan.deal(2);
  std::multiset<std::uint32_t> planned_slots;
  std::uint64_t delivered_slots = 0, substitutions = 0;
  for (std::uint32_t rank = 0; rank < 2; ++rank) {
    vbucket::host_backend backend;
    vbucket::staging_ring<vbucket::host_backend> ring(backend, {.slots = 4});
    ring.reserve_for(d.config);
    loader_t l(schedule, rank, decoder, ring, {.workers = 2, .prefetch = 2});
    std::uint64_t step = 0;
    while (auto b = l.next()) {
      const vbucket::batch want = schedule.at(step++, rank);
      CHECK(b->info.position == want.position);
      CHECK(b->tensor.view.shape == std::array<std::int64_t, 5>{d.config.batch_size(want.bucket),
                                                                want.frames, want.height,
                                                                want.width, 3});
      REQUIRE(b->samples.size() == want.indices.size());
      std::set<std::size_t> substituted;
      for (const auto& s : b->substitutions) {
        substituted.insert(s.clip);
        CHECK(d.paths[s.failed].find("/bad/") != std::string::npos);  // only bad files fail
        CHECK(d.ids[s.replacement] == want.bucket);
        CHECK(d.paths[s.replacement].find("/bad/") == std::string::npos);
      }
      for (std::size_t c = 0; c < want.indices.size(); ++c) {
        planned_slots.insert(want.indices[c]);
        if (!substituted.count(c)) CHECK(b->samples[c] == want.indices[c]);
      }
      delivered_slots += b->samples.size();
      substitutions += b->substitutions.size();
    }
    CHECK(step == schedule.steps());
    // A replacement may be a bad file too (then it is tried again): failures ≥ substitutions.
    CHECK(l.stats().failed >= l.stats().substitutions);
  }
  // Every assigned sample was delivered; the extra copies are exactly the counted pads and
  // rank-alignment repeats.
  std::set<std::uint32_t> assigned;
  for (std::uint32_t i = 0; i < d.ids.size(); ++i)
    if (d.ids[i] >= 0) assigned.insert(i);
  CHECK(std::set<std::uint32_t>(planned_slots.begin(), planned_slots.end()) == assigned);
  std::uint64_t pads = 0;
  for (const auto& pb : d.plan.buckets()) pads += pb.pads;
  CHECK(delivered_slots == assigned.size() + pads + schedule.repeat_samples());
  // The bad-but-probeable file was assigned (256px takes every 320x240 clip) and replaced.
  CHECK(substitutions >= 1);
}

TEST_CASE("e2e: resume mid-epoch continues with the same batches and bytes (threads)") {
  const dataset d;
  const vbucket::ffmpeg::file_decoder decoder(d.paths, d.meta);
  const auto schedule = d.plan.deal(2);
  const auto full = run(d, schedule, 0, decoder);
  REQUIRE(full.size() > 3);
  vbucket::plan_state saved;
  const auto head = run(d, schedule, 0, decoder, 2, &saved);
  CHECK(saved.consumed == 4);
  const auto tail =
      run(d, d.plan.deal(2, vbucket::plan_state::parse(saved.to_string())), 0, decoder);
  std::vector<delivered> joined = head;
  joined.insert(joined.end(), tail.begin(), tail.end());
  CHECK(joined == full);
}

TEST_CASE("e2e: CTHW batches hold the THWC batches' values, transposed") {
  const dataset d;
  const vbucket::ffmpeg::file_decoder decoder(d.paths, d.meta);
  const auto schedule = d.plan.deal(1);
  vbucket::host_backend backend;
  vbucket::staging_ring<vbucket::host_backend> ring(backend, {.slots = 4});
  loader_t thwc(schedule, 0, decoder, ring, {.workers = 1, .prefetch = 1});
  loader_t cthw(schedule, 0, decoder, ring,
                {.workers = 1, .prefetch = 1, .layout = vbucket::clip_layout::cthw});
  auto a = thwc.next();
  auto b = cthw.next();
  REQUIRE(a);
  REQUIRE(b);
  const auto& s = a->tensor.view.shape;  // B T H W C
  CHECK(b->tensor.view.shape == std::array<std::int64_t, 5>{s[0], 3, s[1], s[2], s[3]});
  const auto x = a->tensor.bytes();
  const auto y = b->tensor.bytes();
  std::size_t wrong = 0;
  const auto plane = static_cast<std::size_t>(s[1] * s[2] * s[3]);
  for (std::size_t n = 0; n < static_cast<std::size_t>(s[0]); ++n)
    for (std::size_t p = 0; p < plane; ++p)
      for (std::size_t c = 0; c < 3; ++c)
        wrong += x[(n * plane + p) * 3 + c] != y[(n * 3 + c) * plane + p];
  CHECK(wrong == 0);
}

TEST_CASE(
    "e2e: float32 and bfloat16 CTHW from the workers equal normalize.hpp of the uint8 "
    "batches, records and a sampler driving it (threads)") {
  const dataset d;
  // The trainer's own records (a path member), read by file_decoder and batch_sampler alike.
  struct record {
    std::int64_t num_frames, height, width;
    double fps;
    std::string path;
  };
  std::vector<record> records;
  for (std::size_t i = 0; i < d.paths.size(); ++i)
    records.push_back(
        {d.meta[i].num_frames, d.meta[i].height, d.meta[i].width, d.meta[i].fps, d.paths[i]});
  const vbucket::ffmpeg::file_decoder decoder(records);
  // The hand-wired plan of `dataset` draws from fast_source: the sampler too.
  vbucket::batch_sampler sampler(
      records, d.config, vbucket::opensora_v2_rule{},
      {.seed = 11, .world = 1, .rank = 0, .rng = vbucket::rng_mode::fast});
  sampler.set_epoch(0);
  REQUIRE(sampler.size() == d.plan.deal(1).steps());
  const vbucket::normalization norm{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
  vbucket::host_backend backend;
  vbucket::staging_ring<vbucket::host_backend> ring(backend, {.slots = 3});
  vbucket::staging_ring<vbucket::host_backend> ring_f32(backend, {.slots = 3});
  vbucket::staging_ring<vbucket::host_backend> ring_bf16(backend, {.slots = 3});
  vbucket::loader u8(sampler, decoder, ring, {.workers = 2});
  vbucket::loader f32(sampler, decoder, ring_f32,
                      {.workers = 2,
                       .layout = vbucket::clip_layout::cthw,
                       .element = vbucket::element_type::f32,
                       .normalize = norm});
  vbucket::loader bf16(sampler, decoder, ring_bf16,
                       {.workers = 2,
                        .layout = vbucket::clip_layout::cthw,
                        .element = vbucket::element_type::bf16,
                        .normalize = norm});
  std::uint64_t batches = 0, wrong = 0;
  while (auto a = u8.next()) {
    auto x = f32.next();
    auto y = bf16.next();
    REQUIRE(x);
    REQUIRE(y);
    REQUIRE(x->samples == a->samples);
    REQUIRE(y->samples == a->samples);
    const auto& s = a->tensor.view.shape;  // B T H W C
    const vbucket::batch_shape shape{static_cast<std::size_t>(s[0]), static_cast<std::size_t>(s[1]),
                                     static_cast<std::size_t>(s[2]),
                                     static_cast<std::size_t>(s[3])};
    std::vector<float> want_f32(shape.elements());
    std::vector<std::uint16_t> want_bf16(shape.elements());
    vbucket::normalize_thwc_to_cthw<float>(a->tensor.bytes(), want_f32, shape, norm);
    vbucket::normalize_thwc_to_cthw<std::uint16_t>(a->tensor.bytes(), want_bf16, shape, norm);
    const auto got_f32 = x->tensor.values<float>();
    const auto got_bf16 = y->tensor.values<std::uint16_t>();
    REQUIRE(got_f32.size() == want_f32.size());
    REQUIRE(got_bf16.size() == want_bf16.size());
    for (std::size_t i = 0; i < want_f32.size(); ++i)
      wrong +=
          std::memcmp(&got_f32[i], &want_f32[i], sizeof(float)) != 0 || got_bf16[i] != want_bf16[i];
    ++batches;
  }
  CHECK_FALSE(f32.next());
  CHECK(batches == sampler.size());
  CHECK(wrong == 0);
}
