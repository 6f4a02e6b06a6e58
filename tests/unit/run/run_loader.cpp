// vbucket::run_loader: a loader over a run hands out the run loop's batches, each clip decoded
// by its source's decoder with a crop seeded by the sample's global id; failed clips are
// replaced within the bucket, counted per source and recorded in the ledger; out-of-memory
// steps, world changes and resumes from a saved state are followed.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "vbucket/run/audit.hpp"
#include "vbucket/run/run_loader.hpp"
#include "vbucket/run/run_plan.hpp"
#include "vbucket_test/configs.hpp"
#include "vbucket_test/run_tables.hpp"  // lcg, run_table
#include "vbucket_test/temp_files.hpp"

namespace {

using vbucket::run_batch;
using vbucket::run_loop;
using vbucket::run_plan;
using vbucket_test::spec;

/// Writes a stamp (its source, the row, the crop seed) into a clip's first 16 bytes and leaves
/// the rest (the slots are large); fails for the rows in `bad`.
struct stamp_decoder {
  std::uint32_t source = 0;
  std::set<std::uint32_t> bad;
  std::optional<std::string> decode(const vbucket::clip_task& t, std::span<std::uint8_t> out) {
    if (out.size() != t.bytes()) return "wrong buffer size";
    if (bad.count(t.sample)) return "row " + std::to_string(t.sample) + ": corrupt";
    const std::uint64_t who = (std::uint64_t{source} << 32) | t.sample;
    std::memcpy(out.data(), &who, 8);
    std::memcpy(out.data() + 8, &t.seed, 8);
    return std::nullopt;
  }
};
static_assert(vbucket::clip_decoder<stamp_decoder>);

using host_ring = vbucket::staging_ring<vbucket::host_backend>;
using stamp_loader = vbucket::run_loader<stamp_decoder, vbucket::host_backend>;

vbucket::bucket_config config(std::int64_t scale) {
  return vbucket::bucket_config(
      std::vector{spec("256px", 1, 1.0, -1, 8 * scale), spec("256px", 33, 1.0, -1, 4 * scale),
                  spec("256px", 65, 1.0, -1, 3 * scale), spec("256px", 129, 1.0, -1, 2 * scale)},
      vbucket::opensora_v2_tables{});
}

/// Two sources, a fixed stage and, from step 12, a packed one.
struct scenario {
  std::vector<vbucket::run_source> sources;
  std::vector<vbucket::run_stage> stages;
  explicit scenario(bool packed_stage = true) {
    const char* names[] = {"web", "curated"};
    for (std::size_t i = 0; i < 2; ++i) {
      vbucket::run_source r;
      r.name = names[i];
      r.table = vbucket_test::run_table(60 + 40 * i, 31 + i, {});
      sources.push_back(std::move(r));
    }
    vbucket::draw_spec d;
    d.draws = {{vbucket::draw_kind::weight, 1.0}, {vbucket::draw_kind::weight, 2.0}};
    d.epoch_samples = 150;
    stages.push_back({.name = "a", .config = config(1), .draws = d});
    if (packed_stage)
      stages.push_back(
          {.name = "b",
           .from_step = 12,
           .config = config(1),
           .draws = d,
           .batches = {.batching = vbucket::batching_mode::packed, .token_budget = 60000}});
  }
  [[nodiscard]] std::unique_ptr<run_plan> make(std::uint32_t world) const {
    return std::make_unique<run_plan>(sources, stages,
                                      vbucket::run_options{.seed = 7, .world = world});
  }
};

/// The decoded stamp of clip c of a batch.
std::pair<std::uint64_t, std::uint64_t> stamp(const stamp_loader::loaded_batch& b, std::size_t c) {
  const auto* base = static_cast<const std::uint8_t*>(b.data.tensor.view.data);
  const std::size_t at =
      b.data.packed ? b.data.packed->offsets[c] : c * (b.data.tensor.view.bytes() / b.run.size());
  std::uint64_t who = 0, seed = 0;
  std::memcpy(&who, base + at, 8);
  std::memcpy(&seed, base + at + 8, 8);
  return {who, seed};
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool same_batch(const run_batch& a, const run_batch& b) {
  return a.epoch == b.epoch && a.step == b.step && a.rank == b.rank && a.world == b.world &&
         a.stage == b.stage && a.position == b.position && a.pads == b.pads &&
         a.repeat == b.repeat && a.sources == b.sources && a.rows == b.rows;
}

}  // namespace

TEST_CASE("run_loader: the loop's batches, each clip its source's row with the run's crop seed") {
  const scenario sc;
  for (const std::uint32_t world : {1u, 3u}) {
    INFO("world " << world);
    vbucket::host_backend backend;
    std::vector<std::unique_ptr<run_plan>> runs, reference;
    std::vector<std::unique_ptr<run_loop>> loops;
    std::vector<std::unique_ptr<host_ring>> rings;
    std::vector<std::unique_ptr<stamp_loader>> loaders;
    std::vector<stamp_decoder> decoders(2);
    decoders[1].source = 1;
    for (std::uint32_t r = 0; r < world; ++r) {
      runs.push_back(sc.make(world));
      reference.push_back(sc.make(world));
      loops.push_back(std::make_unique<run_loop>(*runs.back(), r));
      rings.push_back(std::make_unique<host_ring>(backend, vbucket::staging_options{.slots = 4}));
      loaders.push_back(std::make_unique<stamp_loader>(
          *loops.back(), std::vector<stamp_decoder*>{&decoders[0], &decoders[1]}, *rings.back(),
          vbucket::loader_options{.workers = 2, .prefetch = 2}));
    }
    std::uint64_t batches = 0, packed = 0;
    bool oom_done = false, world_done = false;
    for (int guard = 0; guard < 1000; ++guard) {
      if (runs[0]->epoch() >= 2) break;
      std::vector<stamp_loader::loaded_batch> step;
      for (auto& l : loaders)
        if (auto b = l->next()) step.push_back(std::move(*b));
      if (step.empty()) continue;
      REQUIRE(step.size() == loaders.size());
      const std::uint64_t k = step[0].run.step;
      for (std::size_t r = 0; r < step.size(); ++r) {
        const auto& b = step[r];
        CHECK(same_batch(b.run, reference[r]->batch(static_cast<std::uint32_t>(r))));
        REQUIRE(b.sources.size() == b.run.size());
        CHECK(b.sources == b.run.sources);  // nothing failed: decoded as planned
        CHECK(b.rows == b.run.rows);
        for (std::size_t c = 0; c < b.run.size(); ++c) {
          const auto [who, seed] = stamp(b, c);
          CHECK(who == ((std::uint64_t{b.run.sources[c]} << 32) | b.run.rows[c]));
          CHECK(seed == vbucket::run_crop_seed(7, sc.sources[b.run.sources[c]].name, b.run.epoch,
                                               b.run.rows[c]));
        }
        packed += b.data.packed ? 1U : 0U;
        ++batches;
      }
      if (k == 4 && !oom_done) {  // step 4 failed: the next batches are step 4 planned again
        oom_done = true;
        for (auto& l : loops) l->out_of_memory();
        for (auto& r : reference) r->out_of_memory();
        continue;
      }
      for (auto& r : reference) r->advance();
      if (k == 8 && !world_done && world > 1) {  // from step 9 on, one rank fewer
        world_done = true;
        step.clear();  // the batches go back to their rings before the last rank's ring goes
        loaders.pop_back();
        (void)loops.back()->state();  // its batch counts as trained before it goes
        loops.pop_back();
        rings.pop_back();
        runs.pop_back();
        reference.pop_back();
        for (std::uint32_t r = 0; r < world - 1; ++r) {
          loops[r]->set_world(world - 1);
          reference[r]->set_world(world - 1);
        }
      }
    }
    CHECK(runs[0]->epoch() == 2);
    CHECK(oom_done);
    CHECK(packed > 0);  // the packed stage was decoded too
    CHECK(loaders[0]->stats().batches > 0);
    CHECK(batches > 20);
  }
}

TEST_CASE(
    "run_loader: failed clips are replaced in the bucket, counted per source, in the ledger") {
  const scenario sc(false);
  const vbucket_test::temp_dir dir("run_loader");
  const std::string ledger = (dir.path / "ledger").string();
  auto run = sc.make(1);
  run_loop loop(*run, 0, ledger);
  std::vector<stamp_decoder> decoders(2);
  decoders[1].source = 1;
  decoders[1].bad = {3, 5, 8, 13, 21};
  vbucket::host_backend backend;
  host_ring ring(backend, {.slots = 4});
  // A number field per sample: its global id times 10, over the sources' rows stacked.
  const std::vector<std::uint64_t> bases = vbucket::run_id_bases(*run);
  auto fields = std::make_shared<vbucket::field_table>(bases.back());
  std::vector<std::uint64_t> tens(bases.back());
  for (std::size_t i = 0; i < tens.size(); ++i) tens[i] = 10 * i;
  fields->add_numbers<std::uint64_t>("tens", tens);
  stamp_loader loader(loop, {&decoders[0], &decoders[1]}, ring,
                      {.workers = 2, .prefetch = 2, .fields = fields});
  std::uint64_t subs = 0;
  while (auto b = loader.next()) {
    for (const auto& s : b->substitutions) {
      ++subs;
      CHECK(s.failed >= bases[1]);  // only source 1's rows fail
      CHECK(decoders[1].bad.count(static_cast<std::uint32_t>(s.failed - bases[1])) == 1);
      CHECK(b->rows[s.slot] != b->run.rows[s.slot]);  // the clip holds the replacement
      CHECK(bases[b->sources[s.slot]] + b->rows[s.slot] == s.replacement);
    }
    REQUIRE(b->data.fields.numbers.size() == 1);
    for (std::size_t c = 0; c < b->run.size(); ++c) {
      const auto [who, seed] = stamp(*b, c);
      CHECK(who == ((std::uint64_t{b->sources[c]} << 32) | b->rows[c]));
      CHECK(b->data.fields.numbers[0].at<std::uint64_t>(c) ==
            10 * (bases[b->sources[c]] + b->rows[c]));  // the decoded clip's fields
    }
  }
  REQUIRE(subs > 0);
  CHECK(loader.substitutions_by_source()[0] == 0);
  CHECK(loader.substitutions_by_source()[1] == subs);
  CHECK(loader.stats().substitutions == subs);
  const vbucket::audit_report r = vbucket::audit_ledgers(files_in(ledger));
  INFO(vbucket::format_audit_report(r));
  CHECK(r.clean());
  CHECK(r.epochs.size() == 1);
}

TEST_CASE("run_loader: a state taken after batch k resumes at k + 1, and the ledger agrees") {
  const scenario sc;
  const vbucket_test::temp_dir dir("run_loader_resume");
  const std::string ledger = (dir.path / "ledger").string();
  std::vector<stamp_decoder> decoders(2);
  decoders[1].source = 1;
  vbucket::host_backend backend;
  std::vector<run_batch> got;
  std::string saved;
  for (int life = 0; life < 4; ++life) {  // killed after 5 steps, with a batch in hand
    auto run = sc.make(1);
    run_loop loop(*run, 0, ledger);
    if (!saved.empty()) loop.load(saved);
    host_ring ring(backend, {.slots = 4});
    stamp_loader loader(loop, {&decoders[0], &decoders[1]}, ring, {.workers = 2, .prefetch = 3});
    bool ended = false;
    for (int i = 0; i < 6; ++i) {
      auto b = loader.next();
      if (!b) {
        ended = true;
        break;
      }
      if (i == 5) break;  // in hand, not trained: the kill
      got.push_back(b->run);
      saved = loop.state();
    }
    if (ended) break;
  }
  auto reference = sc.make(1);
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("batch " << i);
    CHECK(same_batch(got[i], reference->batch(0)));
    reference->advance();
  }
  CHECK(got.size() == 20);
  const vbucket::audit_report r = vbucket::audit_ledgers(files_in(ledger));
  INFO(vbucket::format_audit_report(r));
  // The epoch is unfinished: what was recorded is exactly what was trained.
  CHECK(r.deviations.empty());
}
