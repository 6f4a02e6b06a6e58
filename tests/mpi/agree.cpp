/// Tests of vbucket/mpi/agree.hpp, run as several processes (4 in ctest): agreement on equal
/// values, the error every rank throws for a disagreeing rank (naming it) and for a rank that
/// failed, and the rank lists of the messages.

#include <doctest/doctest.h>

#include <cmath>      // NAN
#include <cstdint>    // std::uint64_t, std::uint32_t
#include <memory>     // std::make_shared
#include <optional>   // std::nullopt
#include <stdexcept>  // std::runtime_error
#include <string>     // std::string
#include <vector>     // std::vector

#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/bucket/rules.hpp"
#include "vbucket/mpi/mpi.hpp"
#include "vbucket/sample/batch_sampler.hpp"

namespace {

using vbucket::mpi::communicator;

/// The message `body` throws as vbucket::error, or "" when it throws nothing.
template <class Body>
std::string error_of(Body&& body) {
  try {
    body();
  } catch (const vbucket::error& e) {
    return e.what();
  }
  return "";
}

/// A sampler over a small synthetic table; `rows` and `seed` make plans that differ.
std::uint64_t plan_fingerprint_of(std::size_t rows, std::uint64_t seed,
                                  const vbucket::sampler_options& base) {
  vbucket::meta_table meta;
  for (std::size_t i = 0; i < rows; ++i)  // clips of 2 to 90 frames at 12 fps, and images
    meta.push_back({static_cast<std::int64_t>(1 + i % 90), static_cast<std::int64_t>(240 + i % 300),
                    static_cast<std::int64_t>(320 + (i * 7) % 500), i % 90 == 0 ? NAN : 12.0});
  const std::vector<vbucket::bucket_spec> specs{{"256px", 1, 1.0, std::nullopt, 2},
                                                {"256px", 17, 1.0, std::nullopt, 4},
                                                {"256px", 51, 1.0, std::nullopt, 2}};
  auto config =
      std::make_shared<const vbucket::bucket_config>(specs, vbucket::opensora_v2_tables{});
  vbucket::sampler_options o = base;
  o.seed = seed;
  vbucket::batch_sampler sampler(meta, config, vbucket::opensora_v2_rule{}, o);
  sampler.set_epoch(3);
  // Most rows in a bucket (those of 2 to 16 frames fit none), so that one row more or less
  // changes the batches. CHECK, not REQUIRE: every rank must go on to the collective.
  CHECK(sampler.stats().total.grouped * 4 >= rows * 3);
  return sampler.fingerprint();
}

}  // namespace

TEST_CASE("rank lists: ranges, singles, a cap") {
  using vbucket::mpi::detail::rank_list;
  CHECK(rank_list({2}) == "2");
  CHECK(rank_list({0, 1, 2, 3, 5, 9, 10}) == "0-3,5,9-10");
  CHECK(rank_list({1, 3, 5, 7}, 2) == "1,3,... (4 ranks)");
}

TEST_CASE("ranks that plan the same epoch agree") {
  const communicator comm;
  const vbucket::sampler_options o = vbucket::mpi::with_rank_world(comm, {});
  // Each rank plans alone, with its own rank in the options: the fingerprint is the epoch's.
  const std::uint64_t fp = plan_fingerprint_of(500, 11, o);
  CHECK(error_of([&] { vbucket::mpi::agree(comm, fp); }).empty());
  CHECK(vbucket::mpi::agree_on(comm, [&] { return fp; }) == fp);
}

TEST_CASE("a rank with other metadata or another seed: every rank throws, naming it") {
  const communicator comm;
  const std::uint32_t world = comm.size(), me = comm.rank();
  if (world < 2) return;  // nobody to disagree with
  const vbucket::sampler_options o = vbucket::mpi::with_rank_world(comm, {});
  const std::uint32_t odd = world - 1;
  SUBCASE("other metadata (one row fewer)") {
    const std::uint64_t fp = plan_fingerprint_of(me == odd ? 499 : 500, 11, o);
    const std::string e = error_of([&] { vbucket::mpi::agree(comm, fp); });
    CHECK(e.find("rank " + std::to_string(odd) + " of " + std::to_string(world) +
                 " disagree on the plan fingerprint") != std::string::npos);
    CHECK(e.find("(the most common)") != std::string::npos);
  }
  SUBCASE("another seed, named in the message as what") {
    const std::uint64_t fp = plan_fingerprint_of(500, me == odd ? 12 : 11, o);
    const std::string e = error_of([&] { vbucket::mpi::agree(comm, fp, "epoch plan"); });
    CHECK(e.find("rank " + std::to_string(odd) + " of " + std::to_string(world) +
                 " disagree on the epoch plan") != std::string::npos);
  }
  SUBCASE("the values are in the message, the odd one first") {
    const std::uint64_t fp = me == odd ? 0xabcull : 0x123ull;
    const std::string e = error_of([&] { vbucket::mpi::agree(comm, fp); });
    const auto odd_at = e.find("0x0000000000000abc on rank " + std::to_string(odd));
    const auto common_at = e.find("0x0000000000000123 on rank");
    CHECK(odd_at != std::string::npos);
    CHECK(common_at != std::string::npos);
    CHECK(odd_at < common_at);
  }
}

TEST_CASE("a tie: the group of rank 0 is the reference") {
  const communicator comm;
  const std::uint32_t world = comm.size(), me = comm.rank();
  if (world < 2) return;
  // The upper half differs; with an even world the two groups are the same size.
  const std::uint64_t fp = me < (world + 1) / 2 ? 1 : 2;
  std::vector<std::uint32_t> upper;
  for (std::uint32_t r = (world + 1) / 2; r < world; ++r) upper.push_back(r);
  const std::string e = error_of([&] { vbucket::mpi::agree(comm, fp); });
  CHECK(e.find(vbucket::mpi::detail::ranks_named(upper) + " of " + std::to_string(world) +
               " disagree") != std::string::npos);
}

TEST_CASE("a rank that fails before agreeing: every rank throws its message, none hangs") {
  const communicator comm;
  const std::uint32_t world = comm.size(), me = comm.rank();
  const std::uint32_t bad = world > 1 ? 1 : 0;
  SUBCASE("agree_on: an exception of the computation") {
    const std::string e = error_of([&] {
      (void)vbucket::mpi::agree_on(comm, [&]() -> std::uint64_t {
        if (me == bad) throw std::runtime_error("meta.csv: row 7: height is -1");
        return 42;
      });
    });
    CHECK(e.find("rank " + std::to_string(bad) + " of " + std::to_string(world) +
                 " failed before agreeing on the plan fingerprint; rank " + std::to_string(bad) +
                 ": meta.csv: row 7: height is -1") != std::string::npos);
  }
  SUBCASE("agree_failed on one rank, agree on the others") {
    const std::string e = error_of([&] {
      if (me == bad)
        vbucket::mpi::agree_failed(comm, "config.json: key \"360p\": bad");
      else
        vbucket::mpi::agree(comm, 7);
    });
    CHECK(e.find("failed before agreeing") != std::string::npos);
    CHECK(e.find("config.json: key \"360p\": bad") != std::string::npos);
  }
  SUBCASE("every rank fails: the lowest rank's message") {
    const std::string e = error_of(
        [&] { vbucket::mpi::agree_failed(comm, "rank " + std::to_string(me) + "'s trouble"); });
    CHECK(e.find("of " + std::to_string(world) + " failed") != std::string::npos);
    CHECK(e.find(": rank 0's trouble") != std::string::npos);
  }
  SUBCASE("every rank fails the same way: the message once, for all") {
    const std::string e =
        error_of([&] { vbucket::mpi::agree_failed(comm, "missing required flag --epoch"); });
    if (world == 1)
      CHECK(e == "missing required flag --epoch");
    else
      CHECK(e == "vbucket::mpi: all " + std::to_string(world) +
                     " ranks failed before agreeing on the plan fingerprint: missing required "
                     "flag --epoch");
  }
  // The communicator still works: the next collective meets every rank.
  CHECK(error_of([&] { vbucket::mpi::agree(comm, 5); }).empty());
}
