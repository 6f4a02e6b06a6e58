/// Tests of vbucket/run/ledger.hpp: every record kind written and read back (free text
/// percent-encoded); the file writer (magic line once, appends, one line per write) and the
/// streaming reader (long lines across blocks, a truncated last line, another magic or version);
/// parse errors that name the file, line and field; the hooks (`record_of`, pads of a bucket's
/// last batch, repeats, substitutions, `epoch_block_of`, `drop_last_samples`); and a
/// batch_sampler epoch written to per-rank ledgers, interrupted and resumed under another world
/// size, whose lines hold every planned sample exactly once.

#include <doctest/doctest.h>

#include <algorithm>  // std::ranges::sort
#include <cstdint>    // std::uint64_t, std::uint32_t
#include <fstream>    // std::ifstream
#include <iterator>   // std::istreambuf_iterator
#include <map>        // std::map
#include <set>        // std::set
#include <span>       // std::span
#include <string>     // std::string
#include <utility>    // std::pair
#include <vector>     // std::vector

#include "vbucket/run/delivery_records.hpp"  // record_of, epoch_block_of
#include "vbucket/run/ledger.hpp"
#include "vbucket/sample/batch_sampler.hpp"
#include "vbucket_test/configs.hpp"
#include "vbucket_test/ledger_runs.hpp"
#include "vbucket_test/temp_files.hpp"

namespace {

using vbucket::ledger_batch;
using vbucket::ledger_epoch;
using vbucket::ledger_ids;
using vbucket::ledger_line;
using vbucket::ledger_reader;
using vbucket::ledger_source;
using vbucket::ledger_writer;

/// Reads every line of a ledger file (after the magic line) as text.
std::vector<std::string> lines_of(const std::string& path) {
  ledger_reader r(path, 64);  // a tiny block: lines cross block boundaries
  std::vector<std::string> out;
  ledger_line l;
  while (r.next(l)) out.emplace_back(l.text);
  return out;
}

std::string line_of(const auto& record) {
  std::string s;
  vbucket::append_ledger_line(s, record);
  REQUIRE(!s.empty());
  REQUIRE(s.back() == '\n');
  s.pop_back();
  return s;
}

}  // namespace

TEST_CASE("ledger: every record kind reads back as written") {
  ledger_epoch e{.epoch = 3,
                 .stage = 1,
                 .samples = 1500,
                 .sources = 2,
                 .seed = 42,
                 .fingerprint = 0x00a1b2c3d4e5f607ULL,
                 .pads = 7};
  ledger_epoch e2;
  vbucket::parse_ledger_line(line_of(e), "x:1", e2);
  CHECK(e2.epoch == 3);
  CHECK(e2.stage == 1);
  CHECK(e2.samples == 1500);
  CHECK(e2.sources == 2);
  CHECK(e2.seed == 42u);
  CHECK(e2.fingerprint == 0x00a1b2c3d4e5f607ULL);
  CHECK(e2.pads == 7u);
  CHECK(line_of(e) == "E e=3 st=1 n=1500 src=2 seed=42 fp=00a1b2c3d4e5f607 pads=7");

  ledger_source s{.epoch = 3,
                  .id = 1,
                  .name = "web clips: 50%=x,y;z>",
                  .first = 1000,
                  .rows = 500,
                  .drawn = 430,
                  .draw = vbucket::ledger_draw::listed,
                  .weight = 0.3,
                  .count = std::nullopt,
                  .digest = 0xffULL};
  ledger_source s2;
  vbucket::parse_ledger_line(line_of(s), "x:2", s2);
  CHECK(s2.name == s.name);
  CHECK(line_of(s).find(' ', 2) != std::string::npos);
  CHECK(line_of(s).find("name=web%20clips%3A%2050%25%3Dx%2Cy%3Bz%3E ") != std::string::npos);
  CHECK(s2.first == 1000);
  CHECK(s2.rows == 500);
  CHECK(s2.drawn == 430);
  CHECK(s2.draw == vbucket::ledger_draw::listed);
  CHECK(s2.weight == 0.3);
  CHECK(!s2.count);
  CHECK(s2.digest == 0xffu);

  ledger_ids d{.tag = 'X', .epoch = 3, .why = "no bucket", .at = 5, .ids = {17, 230, 0}};
  ledger_ids d2;
  vbucket::parse_ledger_line(line_of(d), "x:3", d2);
  CHECK(d2.tag == 'X');
  CHECK(d2.why == "no bucket");
  CHECK(d2.at == 5);
  CHECK(d2.ids == std::vector<std::uint64_t>{17, 230, 0});
  CHECK(line_of(d) == "X e=3 why=no%20bucket at=5 ids=17,230,0");

  ledger_batch b;
  b.epoch = 3;
  b.step = 812;
  b.rank = 2;
  b.world = 8;
  b.position = 45;
  b.bucket = 11;
  b.pads = 1;
  b.ids = {5, 99, 1007, 5, 18446744073709551615ULL};
  b.substitutions = {{2, 1007, 1009, "decode failed: moov atom"}, {0, 5, 6, ""}};
  ledger_batch b2;
  vbucket::parse_ledger_line(line_of(b), "x:4", b2);
  CHECK(b2.epoch == 3);
  CHECK(b2.step == 812);
  CHECK(b2.stage == 0);
  CHECK(b2.rank == 2);
  CHECK(b2.world == 8);
  CHECK(b2.position == 45u);
  CHECK(b2.bucket == 11);
  CHECK(b2.pads == 1);
  CHECK(!b2.repeat);
  CHECK(b2.ids == b.ids);
  REQUIRE(b2.substitutions.size() == 2);
  CHECK(b2.substitutions[0].slot == 2);
  CHECK(b2.substitutions[0].failed == 1007);
  CHECK(b2.substitutions[0].replacement == 1009);
  CHECK(b2.substitutions[0].why == "decode failed: moov atom");
  CHECK(b2.substitutions[1].why.empty());

  ledger_batch r{.epoch = 0, .step = 1, .rank = 0, .world = 1, .repeat = true, .ids = {7, 8}};
  CHECK(line_of(r) == "B e=0 s=1 st=0 r=0 w=1 rep=1 ids=7,8");
  ledger_batch r2;
  vbucket::parse_ledger_line(line_of(r), "x:5", r2);
  CHECK(r2.repeat);
  CHECK(!r2.position);
  CHECK(!r2.bucket);
}

TEST_CASE("ledger: ids of every length read back (8 digits at a time, then one by one)") {
  vbucket_test::test_rng g{5};
  for (int round = 0; round < 2000; ++round) {
    ledger_batch b{.epoch = 1, .step = 2, .rank = 0, .world = 1};
    const std::uint64_t n = 1 + g.below(12);
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t digits = 1 + g.below(20);  // 1 to 20 digits
      std::uint64_t v = g.next();
      if (digits < 20) {
        std::uint64_t limit = 1;
        for (std::uint64_t d = 0; d < digits; ++d) limit *= 10;
        v %= limit;
      }
      b.ids.push_back(v);
    }
    std::string text = line_of(b);
    ledger_batch back;
    vbucket::parse_ledger_line(text, "x", back);
    CHECK(back.ids == b.ids);
    // Leading zeros and a field after the ids (the last id is not at the end of the line).
    if (b.ids[0] < 1'000'000'000'000'000ULL) text.insert(text.find("ids=") + 4, "000");
    text += " pad=0";
    vbucket::parse_ledger_line(text, "x", back);
    REQUIRE(!back.ids.empty());
    CHECK(back.ids[0] == b.ids[0]);
    CHECK(back.ids.size() == b.ids.size());
  }
  ledger_batch back;
  vbucket::parse_ledger_line("B e=0 s=0 st=0 r=0 w=1 ids=18446744073709551615,0,12345678,123456789",
                             "x", back);
  CHECK(back.ids == std::vector<std::uint64_t>{18446744073709551615ULL, 0, 12345678, 123456789});
  CHECK_THROWS_WITH(
      vbucket::parse_ledger_line("B e=0 s=0 st=0 r=0 w=1 ids=1,18446744073709551616,3", "x", back),
      doctest::Contains("id 2 is too long"));
  CHECK_THROWS_WITH(vbucket::parse_ledger_line("B e=0 s=0 st=0 r=0 w=1 ids=12345678a,3", "x", back),
                    doctest::Contains("unexpected character 'a' after id 1"));
}

namespace {
/// The error parsing `text` into `out` gives, or "(no error)".
template <class Record>
std::string parse_message(const std::string& text, const char* where, Record& out) {
  try {
    vbucket::parse_ledger_line(text, where, out);
  } catch (const vbucket::error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("ledger: parse errors name the place, the field and what is wrong") {
  ledger_batch b;
  const auto message = [&](const std::string& text) {
    return parse_message(text, "rank-00001.ledger:17", b);
  };
  CHECK(message("B e=0 s=1 st=0 r=0 w=1 ids=1,2,x3") ==
        "rank-00001.ledger:17: field ids: id 3 is not a number (near \"x3\")");
  CHECK(message("B e=0 s=1 st=0 r=0 w=1 ids=1,2;3") ==
        "rank-00001.ledger:17: field ids: unexpected character ';' after id 2");
  CHECK(message("B e=0 s=1 st=0 r=0 ids=1,2") == "rank-00001.ledger:17: missing field w");
  CHECK(message("B e=0 s=-1 st=0 r=0 w=1 ids=1") ==
        "rank-00001.ledger:17: field s=\"-1\" is not a valid number");
  CHECK(message("B e=0 s=1 st=0 r=0 w=1 pad=3 ids=1,2") ==
        "rank-00001.ledger:17: field pad=3 is more than the batch's 2 ids");
  CHECK(message("B e=0 s=1 st=0 r=0 w=1 ids=1,2 sub=1:3>4:x") ==
        "rank-00001.ledger:17: field sub: slot 1 does not hold sample 3");
  CHECK(message("B e=0 s=1 st=0 r=0 w=1 ids=1,2 sub=1-2") ==
        "rank-00001.ledger:17: field sub: \"1-2\" is not slot:failed>replacement:why");
  CHECK(message("B e=0 s=1 st=0 r=0 w=1 ids=1,99999999999999999999") ==
        "rank-00001.ledger:17: field ids: id 2 is too long (near \"99999999999999999999\")");
  CHECK(message("B e=0 junk r=0") == "rank-00001.ledger:17: field \"junk\" is not key=value");
  CHECK(message("B") == "rank-00001.ledger:17: expected a tag and fields");
  CHECK(message("B e=0 s=1 st=0 r=0 w=1 ids=1 future=yes") == "(no error)");  // v1 may add keys
  // Each record kind's own fields, by its tag: a D chunk names its source, an X chunk its
  // reason; the other's key is not theirs.
  ledger_ids chunk;
  const auto chunk_message = [&](const std::string& text) {
    return parse_message(text, "l:3", chunk);
  };
  CHECK(chunk_message("D e=0 why=x at=0 ids=1") == "l:3: missing field src");
  CHECK(chunk_message("X e=0 src=1 at=0 ids=1") == "l:3: missing field why");
  CHECK(chunk_message("X e=0 why=policy at=2 ids=1 src=5") == "(no error)");
  CHECK(chunk.tag == 'X');
  CHECK(chunk.source == 0);  // not an X record's field: skipped as unknown
  CHECK(chunk.at == 2);
  ledger_source src;
  CHECK_THROWS_WITH(
      vbucket::parse_ledger_line("S e=0 src=0 name=a first=0 rows=1 drawn=1 draw=some", "l:4", src),
      "l:4: field draw=\"some\" is not all or listed");
}

TEST_CASE("ledger: the file writer appends whole lines; the reader streams them back") {
  vbucket_test::temp_dir dir("ledger_file");
  const std::string path = (dir.path / vbucket::ledger_file_name(3)).string();
  CHECK(vbucket::ledger_file_name(3) == "rank-00003.ledger");
  CHECK(vbucket::ledger_file_name(123456) == "rank-123456.ledger");
  ledger_batch b{.epoch = 0, .step = 0, .rank = 3, .world = 4};
  for (std::uint64_t i = 0; i < 300; ++i) b.ids.push_back(i * 1000003);  // a 2.5 kB line
  {
    ledger_writer w(path, vbucket::ledger_format::text);
    w.write(b);
  }
  {
    ledger_writer w(path);  // a resumed process appends in the file's format, no second magic
    b.step = 1;
    w.write(b);
    w.write_drawn(0, 2, std::vector<std::uint64_t>(vbucket::ledger_chunk_ids + 3, 9));
  }
  const std::vector<std::string> lines = lines_of(path);
  REQUIRE(lines.size() == 4);
  ledger_batch back;
  vbucket::parse_ledger_line(lines[1], "l", back);
  CHECK(back.step == 1);
  CHECK(back.ids == b.ids);
  ledger_ids chunk;
  vbucket::parse_ledger_line(lines[2], "l", chunk);
  CHECK(chunk.ids.size() == vbucket::ledger_chunk_ids);
  CHECK(chunk.at == 0);
  vbucket::parse_ledger_line(lines[3], "l", chunk);
  CHECK(chunk.ids.size() == 3);
  CHECK(chunk.at == vbucket::ledger_chunk_ids);  // D: the index of its first id

  // A sink gets the magic line, then each line whole.
  std::vector<std::string> got;
  ledger_writer sink([&](std::string_view l) { got.emplace_back(l); },
                     vbucket::ledger_format::text);
  sink.write(b);
  REQUIRE(got.size() == 2);
  CHECK(got[0] == std::string(vbucket::ledger_magic) + "\n");
  CHECK(got[1] == line_of(b) + "\n");

  // A truncated last line is read and marked.
  const std::string cut =
      dir.write("cut.ledger",
                "#vbucket-ledger 1\nB e=0 s=0 st=0 r=0 w=1 ids=1\nB e=0 s=1 st=0 r=0 w=1 ids=2,");
  ledger_reader r(cut);
  ledger_line l;
  REQUIRE(r.next(l));  // the magic line is the constructor's
  CHECK(!l.truncated);
  CHECK(l.number == 2);
  REQUIRE(r.next(l));
  CHECK(l.truncated);
  CHECK(l.number == 3);
  CHECK(l.text == "B e=0 s=1 st=0 r=0 w=1 ids=2,");
  CHECK(!r.next(l));

  const std::string other = dir.write("other.ledger", "hello\n");
  CHECK_THROWS_WITH(ledger_reader{other},
                    doctest::Contains("other.ledger:1: not a vbucket ledger"));
  const std::string v3 = dir.write("v3.ledger", "#vbucket-ledger 3\n");
  CHECK_THROWS_WITH(ledger_reader{v3},
                    doctest::Contains("v3.ledger:1: ledger version \"3\" is not supported (this "
                                      "build reads versions 1 and 2)"));
  CHECK_THROWS_WITH(ledger_reader{(dir.path / "none.ledger").string()},
                    doctest::Contains("none.ledger\""));
}

TEST_CASE("ledger: pads, repeats and substitutions of a plan's batches") {
  // One bucket (256px images, batch size 4) over 10 images: 3 batches, the last with 2 pads.
  const vbucket::bucket_config config(std::vector{vbucket_test::spec("256px", 1, 1.0, -1, 4)},
                                      vbucket::opensora_v2_tables{});
  const std::vector<vbucket::bucket_id> ids(10, 0);
  const vbucket::epoch_plan plan = vbucket::make_epoch_plan(
      std::span<const vbucket::bucket_id>(ids), config, {.seed = 7, .epoch = 2});
  REQUIRE(plan.num_batches() == 3);
  const vbucket::epoch_schedule s = plan.deal(2);  // 2 steps: one alignment repeat
  std::uint64_t pads = 0, repeats = 0;
  std::map<std::uint64_t, int> real;
  for (std::uint64_t step = 0; step < s.steps(); ++step) {
    for (std::uint32_t r = 0; r < 2; ++r) {
      const vbucket::batch b = s.at(step, r);
      const ledger_batch rec =
          vbucket::record_of(b, plan, {.step = 100 + step, .rank = r, .world = 2, .id_offset = 50});
      CHECK(rec.epoch == 2);
      CHECK(rec.step == 100 + step);
      CHECK(rec.position == b.position);
      CHECK(rec.ids.size() == 4);
      if (rec.repeat) {
        ++repeats;
        continue;
      }
      pads += rec.pads;
      for (std::size_t i = 0; i + rec.pads < rec.ids.size(); ++i) ++real[rec.ids[i]];
      // The pads repeat samples of the bucket's first batch slots (pad k = sample k).
      for (std::size_t i = rec.ids.size() - rec.pads; i < rec.ids.size(); ++i) {
        CHECK(rec.ids[i] >= 50);
        CHECK(rec.ids[i] < 60);
      }
    }
  }
  CHECK(pads == 2);
  CHECK(repeats == 1);
  REQUIRE(real.size() == 10);  // every image once, as ids 50..59
  for (const auto& [id, n] : real) {
    CHECK(n == 1);
    CHECK(id >= 50);
    CHECK(id < 60);
  }

  struct loader_substitution {  // the loader's `substitution` shape
    std::uint64_t position;
    std::size_t clip;
    std::uint32_t failed;
    std::uint32_t replacement;
    std::string error;
  };
  ledger_batch rec = vbucket::record_of(s.at(0, 0), plan, {.id_offset = 50});
  const std::vector<loader_substitution> subs{
      {0, 1, static_cast<std::uint32_t>(rec.ids[1] - 50), 3, "moov atom not found"}};
  vbucket::add_substitutions(rec, subs, 50);
  REQUIRE(rec.substitutions.size() == 1);
  CHECK(rec.substitutions[0].slot == 1);
  CHECK(rec.substitutions[0].failed == rec.ids[1]);
  CHECK(rec.substitutions[0].replacement == 53);
  ledger_batch back;
  vbucket::parse_ledger_line(line_of(rec), "x", back);  // the slot holds the failed sample
  CHECK(back.substitutions[0].why == "moov atom not found");

  // A batch whose indices are not the plan's (a copy), or that has no bucket (a packed
  // loader's info): recorded without pads.
  const vbucket::batch last_batch = plan.global_batch(2);
  const std::vector<std::uint32_t> copy(last_batch.indices.begin(), last_batch.indices.end());
  vbucket::batch copied = last_batch;
  copied.indices = copy;
  CHECK(vbucket::record_of(last_batch, plan, {}).pads +
            vbucket::record_of(plan.global_batch(0), plan, {}).pads +
            vbucket::record_of(plan.global_batch(1), plan, {}).pads ==
        2);
  CHECK(vbucket::record_of(copied, plan, {}).pads == 0);
  copied.bucket = vbucket::no_bucket;
  const ledger_batch unbucketed = vbucket::record_of(copied, plan, {});
  CHECK(unbucketed.pads == 0);
  CHECK(unbucketed.ids.size() == 4);

  // epoch_block_of: 10 images drawn, nothing dropped; the plan's 2 pads declared.
  const vbucket::ledger_epoch_block block = vbucket::epoch_block_of(plan, 10, ids, "imgs");
  CHECK(block.epoch.epoch == 2);
  CHECK(block.epoch.samples == 10);
  CHECK(block.epoch.pads == 2u);
  REQUIRE(block.sources.size() == 1);
  CHECK(block.sources[0].name == "imgs");
  CHECK(block.sources[0].drawn == 10);
  CHECK(block.dropped.empty());

  // With drop_last at world 2 the third batch is left out: its 2 real samples (not its pads).
  const vbucket::epoch_schedule d = plan.deal(2, 0, true);
  REQUIRE(d.dropped_batches() == 1);
  const std::vector<std::uint64_t> left = vbucket::drop_last_samples(d);
  const ledger_batch last = vbucket::record_of(plan.global_batch(2), plan, {});
  CHECK(left.size() == 4 - last.pads);
  CHECK(std::vector<std::uint64_t>(
            last.ids.begin(), last.ids.begin() + static_cast<std::ptrdiff_t>(left.size())) == left);
}

TEST_CASE("ledger: a batch_sampler run written to per-rank ledgers, resumed under another world") {
  vbucket_test::test_rng g{11};
  const std::vector<vbucket_test::ledger_clip> clips = vbucket_test::ledger_clips(g, 600);
  const vbucket::bucket_config config = vbucket_test::draw_v2_config();
  vbucket_test::temp_dir dir("ledger_run");
  // Epoch 0: world 3, interrupted after 2 steps, resumed under world 5, then after 1 more step
  // under world 2. Epoch 1: world 2 throughout. Pads policy, no drop_last.
  vbucket_test::ledger_run_spec spec;
  spec.seed = 3;
  spec.epochs = 2;
  spec.world = 3;
  spec.changes = {{{2, 5}, {1, 2}}, {}};
  const vbucket_test::ledger_run_result run =
      vbucket_test::write_sampler_ledgers(dir.path, clips, config, spec);
  CHECK(run.resumes == 2);
  REQUIRE(run.files.size() == 5);

  // Independently of the audit: per epoch, the real ids of the batches and the dropped ids are
  // every clip exactly once.
  std::map<std::uint64_t, std::vector<int>> seen;  // epoch -> count per clip
  std::map<std::uint64_t, std::uint64_t> headers;
  std::set<std::pair<std::uint64_t, std::uint32_t>> worlds;
  for (const std::string& f : run.files) {
    for (const std::string& text : lines_of(f)) {
      if (text[0] == 'E') {
        ledger_epoch e;
        vbucket::parse_ledger_line(text, f, e);
        ++headers[e.epoch];
        CHECK(e.samples == clips.size());
      } else if (text[0] == 'B') {
        ledger_batch b;
        vbucket::parse_ledger_line(text, f, b);
        worlds.emplace(b.epoch, b.world);
        auto& v = seen[b.epoch];
        v.resize(clips.size());
        if (b.repeat) continue;
        for (std::size_t i = 0; i + b.pads < b.ids.size(); ++i) ++v[b.ids[i]];
      } else if (text[0] == 'X') {
        ledger_ids x;
        vbucket::parse_ledger_line(text, f, x);
        auto& v = seen[x.epoch];
        v.resize(clips.size());
        for (const std::uint64_t id : x.ids) ++v[id];
      }
    }
  }
  CHECK(headers == std::map<std::uint64_t, std::uint64_t>{{0, 1}, {1, 1}});
  CHECK(worlds ==
        std::set<std::pair<std::uint64_t, std::uint32_t>>{{0, 3}, {0, 5}, {0, 2}, {1, 2}});
  REQUIRE(seen.size() == 2);
  for (const auto& [epoch, v] : seen) {
    CAPTURE(epoch);
    for (std::size_t i = 0; i < v.size(); ++i) {
      CAPTURE(i);
      CHECK(v[i] == 1);
    }
  }
}

TEST_CASE("ledger: a resumed writer does not append its first record to a torn line (issue 41.5)") {
  vbucket_test::temp_dir dir("ledger_torn");
  // A kill -9 cut the last record short: its batch was never handed out (records are written
  // before), so the resumed writer drops the torn tail and its own first record reads whole.
  const std::string path = dir.write(
      "rank-00000.ledger", std::string(vbucket::ledger_magic) +
                               "\nB e=0 s=0 st=0 r=0 w=1 ids=1,2\nB e=0 s=1 st=0 r=0 w=1 ids=3,");
  ledger_batch b{.epoch = 0, .step = 1, .rank = 0, .world = 1, .ids = {3, 4}};
  {
    ledger_writer w(path, vbucket::ledger_format::text);
    w.write(b);
  }
  std::vector<std::string> records;
  for (const std::string& l : lines_of(path))
    if (l[0] != '#') records.push_back(l);
  REQUIRE(records.size() == 2);
  CHECK(records[0] == "B e=0 s=0 st=0 r=0 w=1 ids=1,2");
  CHECK(records[1] == line_of(b));
  ledger_reader r(path);
  ledger_line l;
  while (r.next(l)) CHECK(!l.truncated);

  // A file torn inside its magic line starts again; one that is no ledger is refused.
  const std::string magic_cut = dir.write("rank-00001.ledger", "#vbucket-led");
  {
    ledger_writer w(magic_cut, vbucket::ledger_format::text);
    w.write(b);
  }
  CHECK(lines_of(magic_cut) == std::vector<std::string>{line_of(b)});
  const std::string other = dir.write("other.ledger", "index,resolution\n1,2");
  CHECK_THROWS_WITH(ledger_writer{other},
                    doctest::Contains("other.ledger\" is not a vbucket ledger"));
}

namespace {

/// Writes `records` to a fresh file in `format` and reads them back as text lines (`--dump`).
template <class... Records>
std::vector<std::string> through_file(const vbucket_test::temp_dir& dir, const std::string& name,
                                      vbucket::ledger_format format, const Records&... records) {
  const std::string path = (dir.path / name).string();
  {
    ledger_writer w(path, format);
    (w.write(records), ...);
  }
  ledger_reader r(path, 64);
  CHECK(r.format() == format);
  std::vector<std::string> out;
  ledger_line l;
  while (r.next(l)) {
    CHECK(l.binary == (format == vbucket::ledger_format::binary));
    out.push_back(vbucket::ledger_text_of(l, {path, l.number}));
  }
  return out;
}

}  // namespace

TEST_CASE("ledger: the binary format (version 2) holds every record kind as the text one does") {
  vbucket_test::temp_dir dir("ledger_binary");
  const ledger_epoch e{.epoch = 3,
                       .stage = 1,
                       .samples = 1500,
                       .sources = 2,
                       .seed = 42,
                       .fingerprint = 0x00a1b2c3d4e5f607ULL};
  const ledger_source s{.epoch = 3,
                        .id = 1,
                        .name = "web clips: 50%",
                        .first = 1000,
                        .rows = 500,
                        .drawn = 430,
                        .draw = vbucket::ledger_draw::listed,
                        .weight = 0.3,
                        .count = 7,
                        .digest = 0xffULL};
  const ledger_ids d{.tag = 'D', .epoch = 3, .source = 1, .at = 4096, .ids = {1000, 1499, 1000}};
  const ledger_ids x{.tag = 'X', .epoch = 3, .why = "no bucket", .at = 5, .ids = {17, 0}};
  ledger_batch b{.epoch = 3,
                 .step = 812,
                 .stage = 1,
                 .rank = 2,
                 .world = 8,
                 .position = 45,
                 .bucket = -1,
                 .pads = 1,
                 .ids = {5, 99, 1007, 5, 18446744073709551615ULL}};
  b.substitutions = {{2, 1007, 1009, "decode failed"}, {0, 5, 6, ""}};
  const ledger_batch r{.epoch = 4, .step = 813, .world = 1, .repeat = true, .ids = {7, 8}};
  const std::vector<std::string> text =
      through_file(dir, "t.ledger", vbucket::ledger_format::text, e, s, d, x, b, r);
  const std::vector<std::string> binary =
      through_file(dir, "b.ledger", vbucket::ledger_format::binary, e, s, d, x, b, r);
  CHECK(text == std::vector<std::string>{line_of(e), line_of(s), line_of(d), line_of(x), line_of(b),
                                         line_of(r)});
  CHECK(binary == text);
  // Smaller: a batch of 5 ids in 45 bytes of text takes 31 in binary, the ids 8 bytes each
  // near 2^64 and 1 to 2 bytes below 2^14.
  std::string bin;
  vbucket::append_ledger_record(bin, b);
  CHECK(bin.size() < line_of(b).size());

  // Every cut of a binary record is read as a record cut short (and the rest is not lost when
  // a writer appends after it); a corrupt length makes the rest of the file one record '?'.
  const std::string path = (dir.path / "b.ledger").string();
  std::string whole;
  {
    std::ifstream in(path, std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::string last;
  vbucket::append_ledger_record(last, r);
  for (std::size_t cut = 1; cut < last.size(); ++cut) {
    CAPTURE(cut);
    const std::string torn = dir.write("torn.ledger", whole.substr(0, whole.size() - cut));
    {
      ledger_reader rd(torn);
      ledger_line l;
      std::vector<bool> cut_short;
      while (rd.next(l)) cut_short.push_back(l.truncated);
      CHECK(cut_short == std::vector<bool>{false, false, false, false, false, true});
    }
    {
      ledger_writer w(torn, vbucket::ledger_format::binary);  // a resumed writer
      w.write(r);
    }
    CHECK(through_file(dir, "torn.ledger", vbucket::ledger_format::binary) == text);
  }
  const std::string bad = dir.write(
      "bad.ledger", std::string(vbucket::ledger_magic_v2) + "\nB\xff\xff\xff\xff\x7f" + "junk");
  {
    ledger_reader rd(bad);
    ledger_line l;
    REQUIRE(rd.next(l));
    CHECK(l.tag == '?');
    CHECK(!rd.next(l));
  }
  // A record whose count runs past its end names the place, and allocates nothing.
  std::string huge = std::string(vbucket::ledger_magic_v2) + "\n";
  huge +=
      std::string("B\x0c", 2) + std::string("\x03\x00\x00\x00\x01\x00\x00\x00\x00\xff\xff\x7f", 12);
  const std::string huge_path = dir.write("huge.ledger", huge);
  ledger_reader hr(huge_path);
  ledger_line hl;
  REQUIRE(hr.next(hl));
  ledger_batch hb;
  CHECK_THROWS_WITH(vbucket::parse_ledger_record(hl, {huge_path, hl.number}, hb),
                    doctest::Contains("huge.ledger:2: a count of 2097151 past the record's end"));
  // A writer does not append one format to a file of the other.
  CHECK_THROWS_WITH(ledger_writer(path, vbucket::ledger_format::text),
                    doctest::Contains("is a ledger of another version"));
}
