/// Tests of vbucket/run/audit.hpp: a clean multi-rank log passes with its counts; each kind of
/// deviation is named as what it is, with the sample and where it appeared (a missing sample, a
/// duplicated one, a sample of another epoch, a line of an earlier epoch after a later one, a
/// truncated line, a corrupt field, a header found by the pre-pass, a header written twice,
/// shares and counts off their targets, draws with multiplicity, no header, the naming cap); and
/// a property test: random plans dealt to random worlds, interrupted and resumed under other
/// worlds, audited clean, then one random corruption reported as exactly that deviation.

#include <doctest/doctest.h>

#include <algorithm>   // std::find
#include <cstdint>     // std::uint64_t
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ifstream, std::ofstream
#include <map>         // std::map
#include <set>         // std::set
#include <sstream>     // std::stringstream
#include <string>      // std::string
#include <tuple>       // std::tuple
#include <utility>     // std::pair
#include <vector>      // std::vector

#include "vbucket/run/audit.hpp"
#include "vbucket_test/configs.hpp"
#include "vbucket_test/ledger_runs.hpp"
#include "vbucket_test/temp_files.hpp"

namespace {

using vbucket::audit_issue;
using vbucket::audit_report;

/// The lines of a file (the magic line included), and back.
std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> out;
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}
void write_lines(const std::string& path, const std::vector<std::string>& lines,
                 bool last_newline = true) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (std::size_t i = 0; i < lines.size(); ++i)
    out << lines[i] << (i + 1 < lines.size() || last_newline ? "\n" : "");
}

/// (issue, sample or none) of every deviation, to compare with what a test expects.
using found = std::set<std::pair<audit_issue, std::int64_t>>;
found deviations_of(const audit_report& r) {
  found out;
  for (const vbucket::audit_deviation& d : r.deviations)
    out.emplace(d.issue, d.sample ? static_cast<std::int64_t>(*d.sample) : -1);
  return out;
}

/// A hand-made log of 3 ranks: epoch 0 of 40 samples ("web", drawn all), 38 and 39 dropped as
/// unassigned, the other 38 in batches of 4 in the order i·7 mod 38: 9 full batches and one
/// of 2 samples + 2 pads (the bucket's first two), dealt round robin to 3 ranks: 4 steps, the
/// last completed by repeats of batches 0 and 1.
struct hand_log {
  std::vector<std::vector<std::string>> files{3};
  std::vector<std::vector<std::uint64_t>> batches;

  hand_log() {
    std::vector<std::uint64_t> order;
    for (std::uint64_t i = 0; i < 38; ++i) order.push_back(i * 7 % 38);
    for (std::size_t b = 0; b < 10; ++b) {
      std::vector<std::uint64_t> ids;
      for (std::size_t k = 0; k < 4; ++k)
        ids.push_back(4 * b + k < 38 ? order[4 * b + k] : order[4 * b + k - 38]);
      batches.push_back(ids);
    }
    for (auto& f : files) f.emplace_back(vbucket::ledger_magic);
    files[0].emplace_back("E e=0 st=0 n=40 src=1 seed=1 pads=2");
    files[0].emplace_back("S e=0 src=0 name=web first=0 rows=40 drawn=40 draw=all weight=1");
    files[0].emplace_back("X e=0 why=unassigned at=0 ids=38,39");
    for (std::uint64_t step = 0; step < 4; ++step) {
      for (std::uint32_t r = 0; r < 3; ++r) {
        const std::uint64_t p = step * 3 + r;
        const bool repeat = p >= 10;
        const std::vector<std::uint64_t>& ids = batches[repeat ? p - 10 : p];
        std::string l = "B e=0 s=" + std::to_string(step) + " st=0 r=" + std::to_string(r) +
                        " w=3 p=" + std::to_string(p) + (p == 9 ? " pad=2" : "") +
                        (repeat ? " rep=1" : "") + " ids=";
        for (std::size_t k = 0; k < ids.size(); ++k) l += (k ? "," : "") + std::to_string(ids[k]);
        files[r].push_back(l);
      }
    }
  }

  std::vector<std::string> write(const vbucket_test::temp_dir& dir, bool last_newline = true) {
    std::vector<std::string> paths;
    for (std::uint32_t r = 0; r < 3; ++r) {
      paths.push_back((dir.path / vbucket::ledger_file_name(r)).string());
      write_lines(paths.back(), files[r], last_newline || r != 2);
    }
    return paths;
  }
};

audit_report audit(const std::vector<std::string>& paths, vbucket::audit_options o = {}) {
  return vbucket::audit_ledgers(paths, o);
}

}  // namespace

TEST_CASE("audit: a clean multi-rank log passes, with its counts") {
  vbucket_test::temp_dir dir("audit_clean");
  hand_log log;
  const audit_report r = audit(log.write(dir));
  INFO(vbucket::format_audit_report(r));
  CHECK(r.clean());
  CHECK(r.deviations.empty());
  REQUIRE(r.epochs.size() == 1);
  const vbucket::audit_epoch& e = r.epochs[0];
  CHECK(e.header);
  CHECK(e.samples == 40);
  CHECK(e.batches == 12);
  CHECK(e.repeat_batches == 2);
  CHECK(e.repeat_samples == 8);
  CHECK(e.delivered == 38);
  CHECK(e.pads == 2);
  CHECK(e.dropped == 2);
  CHECK(e.dropped_by.at("unassigned") == 2);
  CHECK(e.drawn == 40);
  CHECK(e.missing + e.duplicated + e.unexpected == 0);
  CHECK(e.worlds == std::set<std::uint32_t>{3});
  CHECK(e.ranks == std::set<std::uint32_t>{0, 1, 2});
  CHECK(e.memory_bytes == 8);  // one 64-bit word of bits for 40 samples
  REQUIRE(e.sources.size() == 1);
  CHECK(e.sources[0].delivered == 38);
  CHECK(e.sources[0].dropped == 2);
  CHECK(e.sources[0].share == 1.0);
  CHECK(r.ids == 12 * 4 + 2);
  CHECK(r.lines == 3 + 12);
  const std::string text = vbucket::format_audit_report(r);
  CHECK(text.find("clean: 3 files, 15 lines, 50 sample ids, 1 epochs, 0 deviations") !=
        std::string::npos);
}

TEST_CASE("audit: a missing sample is named") {
  vbucket_test::temp_dir dir("audit_missing");
  hand_log log;
  // rank 1, step 0 (line 2 of its file): drop its second id.
  const std::uint64_t gone = log.batches[1][1];
  std::string& l = log.files[1][1];
  const std::string needle = "," + std::to_string(gone) + ",";
  REQUIRE(l.find(needle) != std::string::npos);
  l.replace(l.find(needle), needle.size(), ",");
  const audit_report r = audit(log.write(dir));
  CHECK(!r.clean());
  CHECK(deviations_of(r) == found{{audit_issue::missing, static_cast<std::int64_t>(gone)}});
  REQUIRE(r.deviations.size() == 1);
  CHECK(r.deviations[0].drawn == 1);
  CHECK(r.deviations[0].seen == 0);
  // It appears only in the alignment repeat of its batch (rank 2's step 3), which is a pad.
  REQUIRE(r.deviations[0].places.size() == 1);
  CHECK(r.deviations[0].places[0].how == "repeat");
  CHECK(r.epochs[0].missing == 1);
  CHECK(vbucket::format_audit_deviation(r.deviations[0]) ==
        "epoch 0: sample " + std::to_string(gone) + " (source \"web\" row " + std::to_string(gone) +
            "): missing: drawn 1, delivered or dropped 0: repeat at rank 2 step 3 (" +
            (dir.path / "rank-00002.ledger").string() + ":5)");
}

TEST_CASE("audit: a duplicated sample is named with every place it appeared") {
  vbucket_test::temp_dir dir("audit_dup");
  hand_log log;
  // The first id of rank 0's step 1 batch, delivered again at the front of rank 2's step 2.
  const std::uint64_t twice = log.batches[3][0];
  std::string& l = log.files[2][3];
  l.insert(l.find("ids=") + 4, std::to_string(twice) + ",");
  const std::vector<std::string> paths = log.write(dir);
  const audit_report r = audit(paths);
  CHECK(deviations_of(r) == found{{audit_issue::duplicated, static_cast<std::int64_t>(twice)}});
  REQUIRE(r.deviations.size() == 1);
  const vbucket::audit_deviation& d = r.deviations[0];
  CHECK(d.drawn == 1);
  CHECK(d.seen == 2);
  REQUIRE(d.places.size() == 2);
  std::set<std::tuple<std::string, std::uint64_t, std::uint32_t, std::uint64_t>> where;
  for (const auto& p : d.places) where.emplace(p.file, p.line, p.rank, p.step);
  // rank 0's step 1 is line 6 of its file (magic, E, S, X, step 0, step 1); rank 2's step 2 is
  // its line 4.
  CHECK(where == std::set<std::tuple<std::string, std::uint64_t, std::uint32_t, std::uint64_t>>{
                     {paths[0], 6, 0, 1}, {paths[2], 4, 2, 2}});
  CHECK(r.epochs[0].duplicated == 1);
}

TEST_CASE("audit: a sample of another epoch, and a line of an earlier epoch after a later one") {
  vbucket_test::temp_dir dir("audit_epochs");
  // Two epochs of one listed source of 20 rows: epoch 0 draws 0..9, epoch 1 draws 10..19;
  // batches of 5, one rank.
  std::vector<std::string> lines{std::string(vbucket::ledger_magic)};
  for (std::uint64_t e = 0; e < 2; ++e) {
    std::vector<std::uint64_t> drawn;
    for (std::uint64_t i = 0; i < 10; ++i) drawn.push_back(10 * e + i);
    lines.push_back("E e=" + std::to_string(e) + " st=0 n=20 src=1");
    lines.push_back("S e=" + std::to_string(e) +
                    " src=0 name=a first=0 rows=20 drawn=10 draw=listed digest=" +
                    vbucket::plan_state::hex(vbucket::ledger_digest(drawn)));
    std::string d = "D e=" + std::to_string(e) + " src=0 at=0 ids=";
    for (std::size_t i = 0; i < drawn.size(); ++i) d += (i ? "," : "") + std::to_string(drawn[i]);
    lines.push_back(d);
    for (std::uint64_t b = 0; b < 2; ++b) {
      std::string l =
          "B e=" + std::to_string(e) + " s=" + std::to_string(2 * e + b) + " st=0 r=0 w=1 ids=";
      for (std::uint64_t k = 0; k < 5; ++k)
        l += (k ? "," : "") + std::to_string(10 * e + 5 * b + k);
      lines.push_back(l);
    }
  }
  const std::string path = (dir.path / "rank-00000.ledger").string();
  write_lines(path, lines);
  CHECK(audit({path}).clean());

  // Epoch 0's batch delivers sample 17 (drawn for epoch 1) instead of 2.
  std::vector<std::string> swapped = lines;
  REQUIRE(swapped[4] == "B e=0 s=0 st=0 r=0 w=1 ids=0,1,2,3,4");
  swapped[4] = "B e=0 s=0 st=0 r=0 w=1 ids=0,1,17,3,4";
  write_lines(path, swapped);
  audit_report r = audit({path});
  CHECK(deviations_of(r) == found{{audit_issue::unexpected, 17}, {audit_issue::missing, 2}});
  for (const auto& d : r.deviations) {
    CHECK(d.epoch == 0);
    if (d.issue == audit_issue::unexpected) {
      CHECK(d.drawn == 0);
      CHECK(d.seen == 1);
      REQUIRE(d.places.size() == 1);
      CHECK(d.places[0].line == 5);
    }
  }
  CHECK(r.epochs[0].unexpected == 1);
  CHECK(r.epochs[0].missing == 1);
  CHECK(r.epochs[1].clean());

  // Epoch 0's second batch written after epoch 1's lines: an order deviation, and the batch
  // is then missing from epoch 0.
  std::vector<std::string> late = lines;
  const std::string moved = late[5];
  late.erase(late.begin() + 5);
  late.push_back(moved);
  write_lines(path, late);
  r = audit({path});
  CHECK(deviations_of(r) == found{{audit_issue::order, -1},
                                  {audit_issue::missing, 5},
                                  {audit_issue::missing, 6},
                                  {audit_issue::missing, 7},
                                  {audit_issue::missing, 8},
                                  {audit_issue::missing, 9}});
  for (const auto& d : r.deviations)
    if (d.issue == audit_issue::order)
      CHECK(d.detail == path +
                            ":11: a line of epoch 0 after epoch 1's lines (a file's epochs "
                            "must not go back): not counted");
}

TEST_CASE("audit: a truncated line and a corrupt field are named, file and line") {
  vbucket_test::temp_dir dir("audit_lines");
  {
    hand_log log;
    // The last line of rank 2 (its step 3, a repeat) loses its end and its newline.
    std::string& l = log.files[2].back();
    l.resize(l.size() - 3);
    const audit_report r = audit(log.write(dir, false));
    CHECK(deviations_of(r) == found{{audit_issue::truncated, -1}});  // a repeat: nothing missing
    REQUIRE(r.deviations.size() == 1);
    CHECK(r.deviations[0].detail ==
          (dir.path / "rank-00002.ledger").string() +
              ":5: the last line ends without a newline (a write cut short): not counted");
  }
  {
    hand_log log;
    // rank 2's step 0 batch (its line 2), cut short: its four samples are missing too.
    std::vector<std::string> lines = log.files[2];
    lines.resize(2);
    lines[1].resize(lines[1].size() - 1);
    log.files[2] = lines;
    const audit_report r = audit(log.write(dir, false));
    found want{{audit_issue::truncated, -1}};
    for (const std::uint64_t id : log.batches[2])
      want.emplace(audit_issue::missing, static_cast<std::int64_t>(id));
    // rank 2's later batches (5 and 8) are gone too; the repeat of 11 was a pad.
    for (const std::size_t b : {std::size_t{5}, std::size_t{8}})
      for (const std::uint64_t id : log.batches[b])
        want.emplace(audit_issue::missing, static_cast<std::int64_t>(id));
    CHECK(deviations_of(r) == want);
  }
  {
    hand_log log;
    std::string& l = log.files[1][2];  // rank 1, step 1: batch 4
    const std::size_t ids = l.find("ids=") + 4;
    const std::size_t comma = l.find(',', ids);
    l.insert(comma + 1, "x");  // its second id is no number
    const audit_report r = audit(log.write(dir));
    found want{{audit_issue::corrupt, -1}};
    for (const std::uint64_t id : log.batches[4])
      want.emplace(audit_issue::missing, static_cast<std::int64_t>(id));
    CHECK(deviations_of(r) == want);
    const std::string rest = "x" + std::to_string(log.batches[4][1]) + "," +
                             std::to_string(log.batches[4][2]) + "," +
                             std::to_string(log.batches[4][3]);
    for (const auto& d : r.deviations)
      if (d.issue == audit_issue::corrupt)
        CHECK(d.detail == (dir.path / "rank-00001.ledger").string() +
                              ":3: field ids: id 2 is not a number (near \"" + rest.substr(0, 20) +
                              "\"): not counted");
  }
}

TEST_CASE("audit: a header found anywhere, and a declaration written twice, read once") {
  vbucket_test::temp_dir dir("audit_header");
  hand_log log;
  // The epoch's declaration moves to the end of rank 1's file; rank 0 writes none.
  std::vector<std::string> decl(log.files[0].begin() + 1, log.files[0].begin() + 4);
  log.files[0].erase(log.files[0].begin() + 1, log.files[0].begin() + 4);
  log.files[1].insert(log.files[1].end(), decl.begin(), decl.end());
  // ... and is written again (a resume) in rank 2's file.
  log.files[2].insert(log.files[2].begin() + 2, decl.begin(), decl.end());
  const audit_report r = audit(log.write(dir));
  INFO(vbucket::format_audit_report(r));
  CHECK(r.clean());
  CHECK(r.epochs[0].dropped == 2);

  // A second header that differs is named.
  log.files[2][2] = "E e=0 st=0 n=41 src=1 seed=1 pads=2";
  const audit_report r2 = audit(log.write(dir));
  CHECK(deviations_of(r2) == found{{audit_issue::header, -1}});
  CHECK(r2.deviations[0].detail.find("rank-00002.ledger:3: epoch 0's header differs") !=
        std::string::npos);
}

TEST_CASE("audit: shares against weights, counts, and draws with multiplicity") {
  vbucket_test::temp_dir dir("audit_shares");
  const std::string path = (dir.path / "rank-00000.ledger").string();
  // Sources a (rows 0..29) and b (rows 30..39). Drawn: a 0..29 (30), b 30..39 (10).
  const auto write = [&](const std::string& wa, const std::string& wb,
                         const std::vector<std::uint64_t>& extra_draws,
                         const std::vector<std::uint64_t>& extra_delivered) {
    std::vector<std::uint64_t> da, db;
    for (std::uint64_t i = 0; i < 30; ++i) da.push_back(i);
    for (std::uint64_t i = 30; i < 40; ++i) db.push_back(i);
    da.insert(da.end(), extra_draws.begin(), extra_draws.end());
    const auto ids = [](const std::vector<std::uint64_t>& v) {
      std::string s;
      for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
      return s;
    };
    std::vector<std::uint64_t> all;  // every row once, then the extra deliveries
    for (std::uint64_t i = 0; i < 40; ++i) all.push_back(i);
    all.insert(all.end(), extra_delivered.begin(), extra_delivered.end());
    write_lines(path, {std::string(vbucket::ledger_magic), "E e=0 st=0 n=40 src=2",
                       "S e=0 src=0 name=a first=0 rows=30 drawn=" + std::to_string(da.size()) +
                           " draw=listed " + wa,
                       "S e=0 src=1 name=b first=30 rows=10 drawn=10 draw=listed " + wb,
                       "D e=0 src=0 at=0 ids=" + ids(da), "D e=0 src=1 at=0 ids=" + ids(db),
                       "B e=0 s=0 st=0 r=0 w=1 ids=" + ids(all)});
  };
  write("weight=0.75", "weight=0.25", {}, {});
  CHECK(audit({path}).clean());
  write("weight=0.5", "weight=0.5", {}, {});
  audit_report r = audit({path});
  CHECK(deviations_of(r) == found{{audit_issue::share, -1}});  // one line: a is off (and b)
  CHECK(r.deviations.size() == 2);
  CHECK(r.deviations[0].detail.find(
            "drew 0.7500 of the weighted samples, its weight says 0.5000") != std::string::npos);
  // Within the tolerance.
  write("weight=0.745", "weight=0.255", {}, {});
  CHECK(audit({path}).clean());
  write("count=30", "count=11", {}, {});
  r = audit({path});
  CHECK(deviations_of(r) == found{{audit_issue::share, -1}});
  CHECK(r.deviations[0].detail == "epoch 0: source 1 (\"b\") drew 10 samples, its count is 11");
  // Sample 3 drawn twice (with replacement) and delivered twice: clean; three times: one extra.
  write("count=31", "count=10", {3}, {3});
  CHECK(audit({path}).clean());
  write("count=31", "count=10", {3}, {3, 3});
  r = audit({path});
  CHECK(deviations_of(r) == found{{audit_issue::duplicated, 3}});
  CHECK(r.deviations[0].drawn == 2);
  CHECK(r.deviations[0].seen == 3);
  write("count=31", "count=10", {3}, {});
  r = audit({path});
  CHECK(deviations_of(r) == found{{audit_issue::missing, 3}});
  CHECK(r.deviations[0].drawn == 2);
  CHECK(r.deviations[0].seen == 1);
  CHECK(r.epochs[0].memory_bytes == 40 + 8);  // a count and a drawn bit per id
}

TEST_CASE("audit: two sources drawn whole, with ids between them in no source") {
  vbucket_test::temp_dir dir("audit_two");
  const std::string path = (dir.path / "rank-00000.ledger").string();
  // a: ids 0..9, b: ids 12..19; 10 and 11 belong to no source.
  const auto write = [&](const std::string& ids) {
    write_lines(path, {std::string(vbucket::ledger_magic), "E e=4 st=1 n=20 src=2",
                       "S e=4 src=1 name=b first=12 rows=8 drawn=8 draw=all weight=0.45",
                       "S e=4 src=0 name=a first=0 rows=10 drawn=10 draw=all weight=0.55",
                       "B e=4 s=9 st=1 r=0 w=1 ids=" + ids});
  };
  write("19,0,1,2,3,4,5,6,7,8,9,12,13,14,15,16,17,18");
  audit_report r = audit({path});
  INFO(vbucket::format_audit_report(r));
  CHECK(r.clean());
  REQUIRE(r.epochs[0].sources.size() == 2);
  CHECK(r.epochs[0].sources[0].delivered == 10);
  CHECK(r.epochs[0].sources[1].delivered == 8);
  CHECK(r.epochs[0].stages == std::set<std::uint32_t>{1});
  write("19,0,1,2,3,4,5,6,7,8,9,11,12,13,14,15,16,17");  // 11 instead of 18
  r = audit({path});
  CHECK(deviations_of(r) == found{{audit_issue::unexpected, 11}, {audit_issue::missing, 18}});
  for (const auto& d : r.deviations) {
    if (d.issue == audit_issue::unexpected) CHECK(d.detail == "in no source");
    if (d.issue == audit_issue::missing) CHECK(d.detail == "source \"b\" row 6");
  }
  CHECK(r.epochs[0].sources[1].delivered == 7);
}

TEST_CASE("audit: a mixture declared by epoch_block_of_sources, drawn with replacement") {
  vbucket_test::temp_dir dir("audit_mix");
  vbucket_test::test_rng g{77};
  // web: 50 rows drawn whole; img: 30 rows, 50 draws with replacement. Weights 0.5 / 0.5.
  std::vector<vbucket::ledger_source_draws> sources(2);
  sources[0] = {.name = "web", .rows = 50, .whole = true, .weight = 0.5};
  sources[1] = {.name = "img", .rows = 30, .whole = false, .weight = 0.5};
  for (int i = 0; i < 50; ++i) sources[1].drawn.push_back(g.below(30));
  const std::vector<std::uint64_t> first = vbucket::ledger_first_ids(sources);
  CHECK(first == std::vector<std::uint64_t>{0, 50, 80});
  const vbucket::ledger_epoch_block block = vbucket::epoch_block_of_sources(2, 1, sources, 9);
  CHECK(block.epoch.samples == 80);
  CHECK(block.sources[1].drawn == 50);
  CHECK(block.sources[1].digest.has_value());
  // Every draw delivered once, in batches of 7 over 3 ranks.
  std::vector<std::uint64_t> ids;
  for (std::uint64_t r = 0; r < 50; ++r) ids.push_back(first[0] + r);
  for (const std::uint64_t r : sources[1].drawn) ids.push_back(first[1] + r);
  for (std::size_t i = ids.size() - 1; i > 0; --i) std::swap(ids[i], ids[g.below(i + 1)]);
  const auto write = [&](const std::vector<std::uint64_t>& delivered) {
    std::vector<std::string> paths;
    for (std::uint32_t r = 0; r < 3; ++r) {
      paths.push_back((dir.path / vbucket::ledger_file_name(r)).string());
      std::filesystem::remove(paths.back());
    }
    std::vector<vbucket::ledger_writer> out;
    for (const std::string& p : paths) out.emplace_back(p, vbucket::ledger_format::text);
    vbucket::write_epoch_block(out[0], block);
    for (std::size_t b = 0; 7 * b < delivered.size(); ++b) {
      vbucket::ledger_batch rec;
      rec.epoch = 2;
      rec.stage = 1;
      rec.step = b / 3;
      rec.rank = static_cast<std::uint32_t>(b % 3);
      rec.world = 3;
      rec.ids.assign(
          delivered.begin() + static_cast<std::ptrdiff_t>(7 * b),
          delivered.begin() + static_cast<std::ptrdiff_t>(std::min(delivered.size(), 7 * b + 7)));
      out[rec.rank].write(rec);
    }
    return paths;
  };
  audit_report r = audit(write(ids));
  INFO(vbucket::format_audit_report(r));
  CHECK(r.clean());
  CHECK(r.epochs[0].drawn == 100);
  CHECK(r.epochs[0].delivered == 100);
  CHECK(r.epochs[0].sources[1].share == 0.5);
  // A row of img drawn twice, delivered once.
  std::map<std::uint64_t, int> times;
  for (const std::uint64_t row : sources[1].drawn) ++times[row];
  std::uint64_t twice = 0;
  for (const auto& [row, n] : times)
    if (n == 2) twice = first[1] + row;
  REQUIRE(twice != 0);
  std::vector<std::uint64_t> less = ids;
  less.erase(std::find(less.begin(), less.end(), twice));
  r = audit(write(less));
  CHECK(deviations_of(r) == found{{audit_issue::missing, static_cast<std::int64_t>(twice)}});
  CHECK(r.deviations[0].drawn == 2);
  CHECK(r.deviations[0].seen == 1);
  CHECK(r.deviations[0].detail == "source \"img\" row " + std::to_string(twice - first[1]));
  CHECK_THROWS_WITH(
      [&] {
        std::vector<vbucket::ledger_source_draws> bad = sources;
        bad[1].drawn.push_back(30);
        (void)vbucket::epoch_block_of_sources(0, 0, bad);
      }(),
      "ledger: source \"img\" draws row 30 of 30");
}

TEST_CASE("audit: an epoch without a header, and the naming cap") {
  vbucket_test::temp_dir dir("audit_cap");
  {
    hand_log log;
    log.files[0].erase(log.files[0].begin() + 1, log.files[0].begin() + 4);
    const audit_report r = audit(log.write(dir));
    CHECK(deviations_of(r) == found{{audit_issue::header, -1}});
    CHECK(!r.epochs[0].header);
    CHECK(!r.clean());
  }
  {
    hand_log log;
    log.files[1].resize(1);  // rank 1 wrote nothing: batches 1, 4, 7 missing (12 samples)
    const audit_report r = audit(log.write(dir), {.max_named = 5});
    CHECK(r.epochs[0].missing == 12);
    CHECK(r.deviations.size() == 5);
    CHECK(r.epochs[0].unnamed == 7);
    CHECK(vbucket::format_audit_report(r).find("7 more deviations not named") != std::string::npos);
  }
}

TEST_CASE("audit: property: random runs audit clean; one corruption is exactly that deviation") {
  vbucket_test::test_rng g{2026};
  std::uint64_t corrupted[4] = {};
  for (int round = 0; round < 60; ++round) {
    CAPTURE(round);
    vbucket_test::temp_dir dir("audit_prop");
    const std::vector<vbucket_test::ledger_clip> clips =
        vbucket_test::ledger_clips(g, 50 + g.below(700));
    const vbucket::bucket_config config = vbucket_test::random_config(g, 1 + g.below(12));
    vbucket_test::ledger_run_spec spec;
    spec.seed = g.next();
    spec.epochs = 1 + g.below(3);
    spec.world = static_cast<std::uint32_t>(1 + g.below(8));
    spec.drop_last = g.chance(0.3);
    spec.policy = g.chance(0.5)   ? vbucket::incomplete_policy::pad
                  : g.chance(0.5) ? vbucket::incomplete_policy::drop
                                  : vbucket::incomplete_policy::downgrade;
    spec.changes.resize(static_cast<std::size_t>(spec.epochs));
    for (auto& c : spec.changes)
      for (std::uint64_t k = g.below(3); k > 0; --k)
        c.emplace_back(g.below(6), static_cast<std::uint32_t>(1 + g.below(8)));
    CAPTURE(spec.world);
    CAPTURE(spec.drop_last);
    const vbucket_test::ledger_run_result run =
        vbucket_test::write_sampler_ledgers(dir.path, clips, config, spec);
    const audit_report clean = audit(run.files);
    INFO(vbucket::format_audit_report(clean));
    REQUIRE(clean.clean());
    REQUIRE(clean.epochs.size() == spec.epochs);
    for (const vbucket::audit_epoch& e : clean.epochs) {
      CHECK(e.drawn == clips.size());
      CHECK(e.delivered + e.dropped == clips.size());
    }

    // One corruption in a random batch line with a real sample.
    std::vector<std::pair<std::size_t, std::size_t>> candidates;  // (file, line)
    std::vector<std::vector<std::string>> files;
    for (const std::string& f : run.files) files.push_back(read_lines(f));
    for (std::size_t f = 0; f < files.size(); ++f)
      for (std::size_t l = 1; l < files[f].size(); ++l)
        if (files[f][l][0] == 'B' && files[f][l].find(" rep=1") == std::string::npos)
          candidates.emplace_back(f, l);
    if (candidates.empty()) continue;
    const auto [f, l] = candidates[static_cast<std::size_t>(g.below(candidates.size()))];
    vbucket::ledger_batch b;
    vbucket::parse_ledger_line(files[f][l], "t", b);
    const std::uint64_t first = b.ids[0];
    found want;
    const std::uint64_t kind = g.below(4);
    CAPTURE(kind);
    if (kind == 0) {  // a sample dropped from its batch (pads stay at the tail)
      b.ids.erase(b.ids.begin());
      want.emplace(audit_issue::missing, first);
    } else if (kind == 1) {  // delivered again, by another line of the same epoch
      const auto [f2, l2] = candidates[static_cast<std::size_t>(g.below(candidates.size()))];
      vbucket::ledger_batch other;
      vbucket::parse_ledger_line(files[f2][l2], "t", other);
      if (other.epoch != b.epoch) continue;
      other.ids.insert(other.ids.begin(), first);
      std::string text;
      vbucket::append_ledger_line(text, other);
      text.pop_back();
      files[f2][l2] = text;
      if (f2 == f && l2 == l) vbucket::parse_ledger_line(text, "t", b);
      want.emplace(audit_issue::duplicated, first);
    } else if (kind == 2) {  // replaced by an id past the epoch's samples
      b.ids[0] = clips.size() + g.below(1000);
      want.emplace(audit_issue::missing, first);
      want.emplace(audit_issue::unexpected, b.ids[0]);
    } else {  // a corrupt field: the line is not counted, its real samples are missing
      files[f][l] += " s=x";  // a second step field that is no number
      for (std::size_t i = 0; i + b.pads < b.ids.size(); ++i)
        want.emplace(audit_issue::missing, b.ids[i]);
      want.emplace(audit_issue::corrupt, -1);
    }
    if (kind != 3) {
      std::string text;
      vbucket::append_ledger_line(text, b);
      text.pop_back();
      files[f][l] = text;
    }
    for (std::size_t i = 0; i < files.size(); ++i) write_lines(run.files[i], files[i]);
    const audit_report bad = audit(run.files, {.max_named = 100000});
    INFO(vbucket::format_audit_report(bad));
    CHECK(!bad.clean());
    CHECK(deviations_of(bad) == want);
    ++corrupted[kind];
  }
  for (const std::uint64_t n : corrupted) CHECK(n >= 3);  // every kind of corruption was tried
}

TEST_CASE("audit: a sample drawn 128 times or more is counted exactly (issue 41.1)") {
  vbucket_test::temp_dir dir("audit_many");
  const std::string path = (dir.path / "rank-00000.ledger").string();
  // One source of one row (id 0), drawn `draws` times; delivered `delivered` times.
  const auto write = [&](std::uint64_t draws, std::uint64_t delivered) {
    std::string d, b;
    for (std::uint64_t i = 0; i < draws; ++i) d += i ? ",0" : "0";
    for (std::uint64_t i = 0; i < delivered; ++i) b += i ? ",0" : "0";
    std::vector<std::string> lines{
        std::string(vbucket::ledger_magic), "E e=0 st=0 n=1 src=1",
        "S e=0 src=0 name=a first=0 rows=1 drawn=" + std::to_string(draws) + " draw=listed",
        "D e=0 src=0 at=0 ids=" + d};
    if (delivered != 0) lines.push_back("B e=0 s=0 st=0 r=0 w=1 ids=" + b);
    write_lines(path, lines);
  };
  for (const std::uint64_t draws : {127ULL, 128ULL, 129ULL, 200ULL, 300ULL, 1000ULL}) {
    CAPTURE(draws);
    write(draws, draws);
    audit_report r = audit({path});
    INFO(vbucket::format_audit_report(r));
    CHECK(r.clean());
    for (const std::int64_t off : {-1, 1, -130}) {
      if (static_cast<std::int64_t>(draws) + off < 0) continue;
      CAPTURE(off);
      const auto delivered = static_cast<std::uint64_t>(static_cast<std::int64_t>(draws) + off);
      write(draws, delivered);
      r = audit({path});
      CHECK(!r.clean());
      CHECK(deviations_of(r) ==
            found{{off < 0 ? audit_issue::missing : audit_issue::duplicated, 0}});
      REQUIRE(r.epochs.size() == 1);
      CHECK(r.epochs[0].missing == (off < 0 ? static_cast<std::uint64_t>(-off) : 0));
      CHECK(r.epochs[0].duplicated == (off > 0 ? static_cast<std::uint64_t>(off) : 0));
    }
  }
}

TEST_CASE("audit: a whole epoch missing from every rank is named (issue 41.2)") {
  vbucket_test::temp_dir dir("audit_gap");
  const std::string path = (dir.path / "rank-00000.ledger").string();
  std::vector<std::string> lines{std::string(vbucket::ledger_magic)};
  for (std::uint64_t e = 0; e < 3; ++e) {
    const std::string es = std::to_string(e);
    lines.push_back("E e=" + es + " st=0 n=2 src=1");
    lines.push_back("S e=" + es + " src=0 name=a first=0 rows=2 drawn=2 draw=all");
    lines.push_back("B e=" + es + " s=" + es + " st=0 r=0 w=1 ids=1,0");
  }
  write_lines(path, lines);
  CHECK(audit({path}).clean());
  lines.erase(lines.begin() + 4, lines.begin() + 7);  // epoch 1
  write_lines(path, lines);
  const audit_report r = audit({path});
  INFO(vbucket::format_audit_report(r));
  CHECK(!r.clean());
  CHECK(deviations_of(r) == found{{audit_issue::header, -1}});
  REQUIRE(r.deviations.size() == 1);
  CHECK(r.deviations[0].epoch == 1);
  CHECK(r.deviations[0].detail.find("epoch 1 has no lines") != std::string::npos);
}

TEST_CASE("audit: an id space too large to hold is one error naming the file (issue 41.7)") {
  vbucket_test::temp_dir dir("audit_huge");
  const std::string path = (dir.path / "rank-00000.ledger").string();
  for (const bool listed : {false, true}) {
    CAPTURE(listed);
    write_lines(
        path,
        {std::string(vbucket::ledger_magic), "E e=0 st=0 n=18446744073709551615 src=1",
         std::string("S e=0 src=0 name=a first=0 rows=18446744073709551615 ") +
             (listed ? "drawn=2 draw=listed" : "drawn=18446744073709551615 draw=all"),
         listed ? "D e=0 src=0 at=0 ids=0,1" : "# (no list)", "B e=0 s=0 st=0 r=0 w=1 ids=1,0"});
    const audit_report r = audit({path});
    INFO(vbucket::format_audit_report(r));
    CHECK(!r.clean());
    CHECK(deviations_of(r) == found{{audit_issue::header, -1}});
    REQUIRE(!r.deviations.empty());
    CHECK(r.deviations[0].detail.find(path + ":2: epoch 0's id space n=18446744073709551615") !=
          std::string::npos);
  }
}

TEST_CASE("audit: a file whose epochs go back is named, whichever epoch is read first") {
  // Found by fuzz_ledger: epoch 1's lines, then epoch 0's, in one file; epoch 0 was not yet
  // audited when they came, so they were read without a word (and the epochs' order broke).
  vbucket_test::temp_dir dir("audit_back");
  const std::string path = (dir.path / "rank-00000.ledger").string();
  std::vector<std::string> lines{std::string(vbucket::ledger_magic)};
  for (const std::uint64_t e : {1ULL, 0ULL}) {
    const std::string es = std::to_string(e);
    lines.push_back("E e=" + es + " st=0 n=2 src=1");
    lines.push_back("S e=" + es + " src=0 name=a first=0 rows=2 drawn=2 draw=all");
    lines.push_back("B e=" + es + " s=" + es + " st=0 r=0 w=1 ids=1,0");
  }
  write_lines(path, lines);
  const audit_report r = audit({path});
  INFO(vbucket::format_audit_report(r));
  CHECK(!r.clean());
  CHECK(deviations_of(r) == found{{audit_issue::order, -1}});
  REQUIRE(r.epochs.size() == 2);
  std::swap(lines[1], lines[4]);  // in order: clean
  std::swap(lines[2], lines[5]);
  std::swap(lines[3], lines[6]);
  write_lines(path, lines);
  CHECK(audit({path}).clean());
}
