#include "vbucket/bucket/csv.hpp"

#include "vbucket/base/random.hpp"   // fast_source
#include "vbucket/bucket/rules.hpp"  // opensora_v2_rule
#include "vbucket_test/errors.hpp"   // contains

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>

namespace {

/// The message `parse_meta_csv(text, "meta.csv")` throws, or "" when it does not throw.
std::string csv_error(std::string_view text) {
  try {
    (void)vbucket::parse_meta_csv(text, "meta.csv");
  } catch (const vbucket::error& e) {
    return e.what();
  }
  return "";
}

using vbucket_test::contains;

/// Checks that `text` is rejected with a one-line message naming the file and every `parts`.
void check_error(std::string_view text, std::initializer_list<std::string_view> parts) {
  const std::string message = csv_error(text);
  INFO("message: " << message);
  REQUIRE_FALSE(message.empty());
  CHECK(message.find('\n') == std::string::npos);
  CHECK(message.rfind("meta.csv: ", 0) == 0);
  for (const auto part : parts) CHECK(contains(message, part));
}

constexpr std::string_view header = "path,num_frames,height,width,fps\n";

std::string with_header(std::string_view rows) { return std::string(header) + std::string(rows); }

/// The num_frames column of a table.
std::vector<std::int64_t> frames_of(const vbucket::meta_table& t) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < t.size(); ++i) out.push_back(t[i].num_frames);
  return out;
}

}  // namespace

TEST_CASE("csv: a plain table, row order is sample order") {
  const auto t = vbucket::parse_meta_csv(
      with_header("a.mp4,300,1080,1920,30\nb.jpg,1,720,1280,\nc.mp4,51,480,854,23.976\n"),
      "meta.csv");
  REQUIRE(t.size() == 3);
  CHECK(t[0].num_frames == 300);
  CHECK(t[0].height == 1080);
  CHECK(t[0].width == 1920);
  CHECK(t[0].fps == 30.0);
  CHECK(t[1].num_frames == 1);
  CHECK(std::isnan(t[1].fps));
  CHECK(t[2].fps == 23.976);
  CHECK(t[2].width == 854);
}

TEST_CASE("csv: columns in any order, extra columns ignored") {
  const auto t = vbucket::parse_meta_csv(
      "fps,extra,width,path,height,num_frames,text\n24,x,640,a.mp4,360,100,\"hello, world\"\n",
      "meta.csv");
  REQUIRE(t.size() == 1);
  CHECK(t[0].num_frames == 100);
  CHECK(t[0].height == 360);
  CHECK(t[0].width == 640);
  CHECK(t[0].fps == 24.0);
}

TEST_CASE("csv: RFC 4180 quoting: commas, doubled quotes and line breaks in fields") {
  const auto m =
      vbucket::parse_meta_csv_with_lines(with_header("\"a, b.mp4\",10,100,200,24\n"
                                                     "\"say \"\"hi\"\".mp4\",11,101,201,25\n"
                                                     "\"two\nlines\r\nand three.mp4\",12,102,202,\n"
                                                     "\"12\",\"13\",\"103\",\"203\",\"30\"\n"),
                                         "meta.csv");
  REQUIRE(m.table.size() == 4);
  CHECK(m.table[0].num_frames == 10);
  CHECK(m.table[1].num_frames == 11);
  CHECK(m.table[2].num_frames == 12);
  CHECK(std::isnan(m.table[2].fps));
  // Quoted numbers are numbers.
  CHECK(m.table[3].num_frames == 13);
  CHECK(m.table[3].fps == 30.0);
  // Row i starts on line lines[i]; the third path spans three lines.
  CHECK(m.lines == std::vector<std::uint64_t>{2, 3, 4, 7});
}

TEST_CASE("csv: CRLF, a UTF-8 BOM, no final newline, trailing blank lines") {
  SUBCASE("CRLF and BOM") {
    const auto t = vbucket::parse_meta_csv(
        "\xEF\xBB\xBFnum_frames,height,width,fps\r\n5,6,7,8\r\n9,10,11,\r\n", "meta.csv");
    REQUIRE(t.size() == 2);
    CHECK(t[0].num_frames == 5);
    CHECK(t[0].fps == 8.0);
    CHECK(std::isnan(t[1].fps));
  }
  SUBCASE("no final newline") {
    const auto t = vbucket::parse_meta_csv("num_frames,height,width,fps\n5,6,7,8", "meta.csv");
    REQUIRE(t.size() == 1);
    CHECK(t[0].fps == 8.0);
  }
  SUBCASE("no final newline, empty last field") {
    const auto t = vbucket::parse_meta_csv("num_frames,height,width,fps\n5,6,7,", "meta.csv");
    REQUIRE(t.size() == 1);
    CHECK(std::isnan(t[0].fps));
  }
  SUBCASE("trailing blank lines") {
    const auto t =
        vbucket::parse_meta_csv("num_frames,height,width,fps\n5,6,7,8\n\n\r\n\n", "meta.csv");
    CHECK(t.size() == 1);
  }
  SUBCASE("blank lines between rows are skipped, as pandas does, lines still count") {
    const auto m = vbucket::parse_meta_csv_with_lines(
        "num_frames,height,width,fps\n5,6,7,8\n\n9,10,11,12\n", "meta.csv");
    REQUIRE(m.table.size() == 2);
    CHECK(m.table[1].num_frames == 9);
    CHECK(m.lines == std::vector<std::uint64_t>{2, 4});
    check_error("num_frames,height,width,fps\n5,6,7,8\n\n9,0,11,12\n", {"row 2 (line 4)"});
  }
}

TEST_CASE("csv: a header-only file is an empty table") {
  CHECK(vbucket::parse_meta_csv("num_frames,height,width,fps\n", "meta.csv").empty());
  CHECK(vbucket::parse_meta_csv("num_frames,height,width,fps", "meta.csv").empty());
  CHECK(vbucket::parse_meta_csv(header, "meta.csv").empty());
}

TEST_CASE("csv: NaN fps in any spelling, sizes with surrounding blanks") {
  const auto t = vbucket::parse_meta_csv(
      with_header("a,1,2,3,nan\nb,1,2,3,NaN\nc,1,2,3,NAN\nd,1,2,3,\ne,1,2,3,  \nf, 4 ,5,6, 7.5\n"),
      "meta.csv");
  REQUIRE(t.size() == 6);
  for (std::size_t i = 0; i < 5; ++i) CHECK(std::isnan(t[i].fps));
  CHECK(t[5].num_frames == 4);
  CHECK(t[5].fps == 7.5);
}

TEST_CASE("csv: size limits") {
  const auto t =
      vbucket::parse_meta_csv(with_header("a,2147483648,16777216,16777216,1e-3\n"), "meta.csv");
  CHECK(t[0].num_frames == vbucket::max_meta_frames);
  CHECK(t[0].height == vbucket::detail::max_side);
  CHECK(t[0].fps == 0.001);
  check_error(with_header("a,2147483649,1,1,24\n"), {"column \"num_frames\"", "2147483648"});
  check_error(with_header("a,1,16777217,1,24\n"), {"column \"height\"", "16777216"});
  check_error(with_header("a,1,1,16777217,24\n"), {"column \"width\""});
}

TEST_CASE("csv errors: empty file") {
  check_error("", {"empty file"});
  check_error("\xEF\xBB\xBF", {"empty file"});
  check_error("\n\n", {"empty file"});
}

TEST_CASE("csv errors: missing required column") {
  check_error("path,num_frames,height,width\na,1,2,3\n", {"header (line 1)", "missing", "\"fps\""});
  check_error("path,frames,h,w,fps\n", {"\"num_frames\"", "\"height\"", "\"width\""});
  check_error("num_frames;height;width;fps\n", {"missing"});
}

TEST_CASE("csv errors: duplicate column") {
  check_error("num_frames,height,width,fps,width\n", {"header (line 1)", "duplicate", "\"width\""});
  // Duplicates of ignored columns are not ambiguous.
  CHECK(vbucket::parse_meta_csv("path,path,num_frames,height,width,fps\na,b,1,2,3,4\n", "meta.csv")
            .size() == 1);
}

TEST_CASE("csv errors: wrong field count") {
  check_error(with_header("a,1,2,3,4\nb,1,2,3\n"), {"row 2 (line 3)", "4 fields", "5 columns"});
  check_error(with_header("a,1,2,3,4,5\n"), {"row 1 (line 2)", "6 fields"});
  check_error(with_header("a,1,2,3,4\n \n"), {"row 2 (line 3)", "1 field,"});
}

TEST_CASE("csv errors: unterminated quote") {
  check_error(with_header("a,1,2,3,4\n\"b,1,2,3,4\n"),
              {"row 2 (line 3)", "column \"path\"", "unterminated"});
  check_error("num_frames,height,width,\"fps\n", {"header (line 1)", "unterminated"});
  // A bare quote inside an unquoted field is taken literally (pandas does the same).
  CHECK(vbucket::parse_meta_csv(with_header("a\"b,1,2,3,4\n"), "meta.csv").size() == 1);
}

TEST_CASE("csv errors: non-numeric sizes") {
  check_error(with_header("a,abc,2,3,4\n"), {"row 1 (line 2)", "column \"num_frames\"", "\"abc\""});
  check_error(with_header("a,12.5,2,3,4\n"),
              {"column \"num_frames\"", "\"12.5\"", "not an integer"});
  check_error(with_header("a,1,2e-3,3,4\n"), {"column \"height\"", "not an integer"});
  check_error(with_header("a,1,+2,3,4\n"), {"column \"height\""});
  check_error(with_header("a,1,,3,4\n"), {"column \"height\"", "empty"});
  check_error(with_header("a,1,2,\"3\"\"\",4\n"), {"column \"width\"", "not an integer"});
}

TEST_CASE("csv errors: NaN, inf, negative, zero and huge sizes") {
  check_error(with_header("a,1,nan,3,4\n"), {"column \"height\"", "\"nan\""});
  check_error(with_header("a,1,2,inf,4\n"), {"column \"width\"", "\"inf\""});
  check_error(with_header("a,-1,2,3,4\n"), {"row 1 (line 2)", "column \"num_frames\"", "-1"});
  check_error(with_header("a,1,0,3,4\n"), {"column \"height\"", "got 0"});
  check_error(with_header("a,1,2,99999999999999999999999,4\n"),
              {"column \"width\"", "99999999999999999999999"});
  check_error(with_header("a,1,2,-99999999999999999999999,4\n"), {"column \"width\""});
}

TEST_CASE("csv errors: bad fps") {
  check_error(with_header("a,1,2,3,-24\n"), {"row 1 (line 2)", "column \"fps\"", "-24"});
  check_error(with_header("a,1,2,3,-0.5\n"), {"column \"fps\"", "-0.5"});
  check_error(with_header("a,1,2,3,inf\n"), {"column \"fps\"", "inf"});
  check_error(with_header("a,1,2,3,-Infinity\n"), {"column \"fps\""});
  check_error(with_header("a,1,2,3,1e999\n"), {"column \"fps\""});
  check_error(with_header("a,1,2,3,24fps\n"), {"column \"fps\"", "\"24fps\"", "not a number"});
  check_error(with_header("a,1,2,3,null\n"), {"column \"fps\""});
}

TEST_CASE("csv errors: messages stay on one line and name the row of a multi-line record") {
  const std::string message =
      csv_error(with_header("\"a\nb\nc\",1,2,3,4\n\"d\ne\",1,2,\"x\ny\",4\n"));
  INFO(message);
  CHECK(message.find('\n') == std::string::npos);
  CHECK(contains(message, "row 2 (line 5)"));
  CHECK(contains(message, "\"x\\ny\""));  // the value's line break shown as an escape
}

TEST_CASE("csv: load_meta_csv reads a file and names it in errors") {
  namespace fs = std::filesystem;
  // A unique name: several test runs may share the temporary directory.
  const std::string tag = std::to_string(std::random_device{}());
  const fs::path dir = fs::temp_directory_path();
  const std::string good = (dir / ("vbucket_csv_test_good_" + tag + ".csv")).string();
  const std::string bad = (dir / ("vbucket_csv_test_bad_" + tag + ".csv")).string();
  {
    std::ofstream(good, std::ios::binary) << "num_frames,height,width,fps\r\n3,4,5,6\r\n";
    std::ofstream(bad, std::ios::binary) << "num_frames,height,width,fps\n3,4,5,6\n3,0,5,6\n";
  }
  const auto t = vbucket::load_meta_csv(good);
  REQUIRE(t.size() == 1);
  CHECK(t[0].width == 5);
  const auto m = vbucket::load_meta_csv_with_lines(good);
  CHECK(m.lines == std::vector<std::uint64_t>{2});

  try {
    (void)vbucket::load_meta_csv(bad);
    FAIL("no error");
  } catch (const vbucket::error& e) {
    CHECK(contains(e.what(), bad + ": row 2 (line 3), column \"height\""));
  }
  const std::string missing = (dir / ("vbucket_csv_test_missing_" + tag + ".csv")).string();
  try {
    (void)vbucket::load_meta_csv(missing);
    FAIL("no error");
  } catch (const vbucket::error& e) {
    CHECK(contains(e.what(), missing + ": cannot open"));
  }
  try {
    (void)vbucket::load_meta_csv(dir.string());
    FAIL("no error");
  } catch (const vbucket::error& e) {
    CHECK(contains(e.what(), dir.string() + ": cannot read"));
  }
  fs::remove(good);
  fs::remove(bad);
}

TEST_CASE("csv: random quoted paths of every length and offset parse back exactly") {
  // Exercises the word-at-a-time scanner: special bytes at every position of an 8-byte word,
  // fields ending at the very end of the text, and line counting inside quoted fields.
  std::mt19937 gen(12345);
  constexpr std::string_view alphabet = "ab,\"\n\r x";
  for (int trial = 0; trial < 200; ++trial) {
    std::string text = "path,num_frames,height,width,fps\n";
    std::vector<std::int64_t> frames;
    std::vector<std::uint64_t> lines;
    std::uint64_t line = 2;
    const int rows = static_cast<int>(gen() % 6);
    for (int r = 0; r < rows; ++r) {
      std::string path;
      const auto length = gen() % 20;
      for (std::uint32_t k = 0; k < length; ++k) path.push_back(alphabet[gen() % alphabet.size()]);
      lines.push_back(line);
      std::string quoted = "\"";
      for (std::size_t k = 0; k < path.size(); ++k) {
        quoted.push_back(path[k]);
        if (path[k] == '"') quoted.push_back('"');
        // LF, CRLF or a lone CR each end a line.
        if (path[k] == '\n' || (path[k] == '\r' && (k + 1 == path.size() || path[k + 1] != '\n')))
          ++line;
      }
      quoted.push_back('"');
      frames.push_back(static_cast<std::int64_t>(gen() % 100000) + 1);
      text += quoted + "," + std::to_string(frames.back()) + ",2,3,24";
      ++line;
      if (r + 1 < rows || gen() % 2 == 0) text += (gen() % 2 == 0) ? "\n" : "\r\n";
    }
    INFO("text: " << text);
    const auto m = vbucket::parse_meta_csv_with_lines(text, "meta.csv");
    CHECK(frames_of(m.table) == frames);
    CHECK(m.lines == lines);
  }
}

TEST_CASE("csv: rows with an error (vbucket scan's output) are unusable samples, in place") {
  const auto t = vbucket::parse_meta_csv(
      "path,num_frames,height,width,fps,duration,codec,error\n"
      "a.mp4,300,1080,1920,30,10,h264,\n"
      "bad.mp4,,,,,,,\"bad.mp4: cannot open: Invalid data found, sorry\"\n"
      "c.mp4,51,480,854,23.976,2.1,vp9,  \n",
      "meta.csv");
  REQUIRE(t.size() == 3);
  CHECK(t[0].num_frames == 300);
  CHECK(t[1].num_frames == 0);  // kept in place, unusable
  CHECK(t[1].height == 0);
  CHECK(t[1].width == 0);
  CHECK(std::isnan(t[1].fps));
  CHECK(t[2].num_frames == 51);  // a blank error is no error
  // The rules count it as invalid rather than dropping it.
  const auto config =
      vbucket::bucket_config(std::vector<vbucket::bucket_spec>{{"360p", 1, 1.0, std::nullopt, 4}},
                             vbucket::opensora_v2_tables{});
  CHECK(vbucket::opensora_v2_rule{}.assign(config, t[1], 1, vbucket::fast_source(1, 0)) ==
        vbucket::invalid_sample);
  // Without an error column, an empty size is still an error.
  CHECK_THROWS_AS(vbucket::parse_meta_csv("path,num_frames,height,width,fps\nx,,,,\n", "m.csv"),
                  vbucket::error);
}

namespace {

/// A file in the temporary directory with `text`, removed with the object.
class temp_csv {
 public:
  explicit temp_csv(std::string_view text) {
    // A unique name: several test runs may share the temporary directory.
    path_ = (std::filesystem::temp_directory_path() /
             ("vbucket_csv_test_" + std::to_string(std::random_device{}()) + ".csv"))
                .string();
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~temp_csv() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  temp_csv(const temp_csv&) = delete;
  temp_csv& operator=(const temp_csv&) = delete;
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

/// The table (with lines) read from `path` in chunks of `chunk` bytes, or the error message.
struct streamed {
  vbucket::meta_csv csv;
  std::string message;
};
streamed read_in_chunks(const std::string& path, std::size_t chunk) {
  streamed out;
  try {
    vbucket::detail::csv_reader reader(vbucket::detail::csv_file{path, chunk});
    out.csv.table = vbucket::detail::read_meta_csv(reader, &out.csv.lines);
  } catch (const vbucket::error& e) {
    out.message = e.what();
  }
  return out;
}

/// Equal tables, NaN fps equal to NaN fps.
bool same_table(const vbucket::meta_table& a, const vbucket::meta_table& b) { return a == b; }

/// The decoded fields of each record of `text`.
std::vector<std::vector<std::string>> records(std::string_view text) {
  vbucket::detail::csv_reader reader(text, "t.csv");
  std::vector<vbucket::detail::csv_field> fields;
  std::vector<std::vector<std::string>> out;
  while (reader.next(fields)) {
    out.emplace_back();
    for (const auto& f : fields) out.back().push_back(f.value());
  }
  return out;
}

}  // namespace

TEST_CASE("csv: pandas-style integers (a float with an integral value) are read exactly") {
  // pandas writes an integer column that once held a NaN as floats: 51.0, 720.0.
  const auto t = vbucket::parse_meta_csv(with_header("a,51.0,720.0,1280.0,30\n"
                                                     "b,51.,720.00,1280,24\n"
                                                     "c,5.1e1,7.2E2,12800e-1,25\n"
                                                     "d, 0.51e+2 ,\"720.0\",.128e4,25\n"
                                                     "e,2147483648.0,16777216.000,1.6777216e7,1\n"),
                                         "meta.csv");
  REQUIRE(t.size() == 5);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(t[i].num_frames == 51);
    CHECK(t[i].height == 720);
    CHECK(t[i].width == 1280);
  }
  CHECK(t[4].num_frames == std::int64_t{1} << 31);
  CHECK(t[4].height == std::int64_t{1} << 24);
  CHECK(t[4].width == std::int64_t{1} << 24);
}

TEST_CASE("csv errors: a float that is not an integer, or out of range, in an integer column") {
  check_error(with_header("a,51.5,2,3,4\n"),
              {"row 1 (line 2)", "column \"num_frames\"", "\"51.5\" is not an integer"});
  check_error(with_header("a,1,720.01,3,4\n"), {"column \"height\"", "\"720.01\" is not"});
  check_error(with_header("a,1,2,5e-1,4\n"), {"column \"width\"", "\"5e-1\" is not"});
  // No rounding through a double: 2^31 + 1e-7 is not an integer.
  check_error(with_header("a,2147483648.0000001,2,3,4\n"), {"column \"num_frames\"", "not an"});
  check_error(with_header("a,2147483649.0,2,3,4\n"), {"column \"num_frames\"", "2147483649.0"});
  check_error(with_header("a,1,1.6777217e7,3,4\n"), {"column \"height\"", "must be"});
  check_error(with_header("a,1,1e999999999999,3,4\n"), {"column \"height\"", "must be"});
  check_error(with_header("a,0.0,2,3,4\n"), {"column \"num_frames\"", "got 0.0"});
  check_error(with_header("a,1,-720.0,3,4\n"), {"column \"height\"", "got -720.0"});
  for (const std::string_view bad : {".", "1.0.0", "1e", "e5", "1e+", "0x10", "1.0f", "inf", "- 1"})
    check_error(with_header("a," + std::string(bad) + ",2,3,4\n"),
                {"column \"num_frames\"", "not an integer"});
}

TEST_CASE("csv: parse_integral reads integral decimals exactly") {
  using vbucket::detail::integral_kind;
  using vbucket::detail::parse_integral;
  constexpr std::int64_t max = 1000;
  CHECK(parse_integral("1000", max).value == 1000);
  CHECK(parse_integral("1e3", max).value == 1000);
  CHECK(parse_integral("10000e-1", max).value == 1000);
  CHECK(parse_integral("0.001e6", max).value == 1000);
  CHECK(parse_integral("000.5e1", max).value == 5);
  CHECK(parse_integral("-0.0", max).kind == integral_kind::integer);
  CHECK(parse_integral("0e999999999999999", max).value == 0);
  CHECK(parse_integral("1001", max).kind == integral_kind::out_of_range);
  CHECK(parse_integral("1.001e3", max).kind == integral_kind::out_of_range);
  CHECK(parse_integral("-1001.0", max).kind == integral_kind::out_of_range);
  CHECK(parse_integral("1e18", max).kind == integral_kind::out_of_range);
  CHECK(parse_integral("999.9", max).kind == integral_kind::not_integral);
  CHECK(parse_integral("1e-999999999999", max).kind == integral_kind::not_integral);
  CHECK(parse_integral("+5", max).kind == integral_kind::not_a_number);
  CHECK(parse_integral("", max).kind == integral_kind::not_a_number);
}

TEST_CASE("csv: fps 0 is unknown, as NaN (Open-Sora's rule gives it frame interval 1)") {
  const auto t =
      vbucket::parse_meta_csv(with_header("a,51,2,3,0\nb,51,2,3,0.0\nc,51,2,3,\"0\"\n"), "m.csv");
  REQUIRE(t.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(std::isnan(t[i].fps));
  // Open-Sora: 0 < fps_max, so interval 1 and all 51 frames count; NaN does the same here.
  CHECK(vbucket::opensora_v2_rule{}.effective_frames(51, t[0].fps) == 51);
  // Below zero is still an error.
  check_error(with_header("a,51,2,3,-1\n"), {"row 1 (line 2)", "column \"fps\"", "-1"});
}

TEST_CASE("csv: text after a closing quote is part of the field, as in Python's csv and pandas") {
  // Expected values: Python 3.11 `list(csv.reader(io.StringIO(s, newline="")))`.
  using rows = std::vector<std::vector<std::string>>;
  CHECK(records("\"hello, world\" ,x\n") == rows{{"hello, world ", "x"}});
  CHECK(records("\"a\"b\"c\",d\n") == rows{{"ab\"c\"", "d"}});
  CHECK(records("\"a\"\"b\" \"c\",d\n") == rows{{"a\"b \"c\"", "d"}});
  CHECK(records("\"1\"2,3\n") == rows{{"12", "3"}});
  CHECK(records("\"\" x,y\r\n") == rows{{" x", "y"}});
  CHECK(records("\"p\nq\" r\"\",s") == rows{{"p\nq r\"\"", "s"}});
  // In the metadata: a caption with a blank after its quote, numbers with one after theirs.
  const auto m = vbucket::parse_meta_csv_with_lines(
      "text,num_frames,height,width,fps\n\"hello, world\" ,\"51\" ,720,\"1\"280,\"24\" \n"
      "\"two\nlines\" x,1,2,3,\"0\" \n",
      "meta.csv");
  REQUIRE(m.table.size() == 2);
  CHECK(m.table[0].num_frames == 51);
  CHECK(m.table[0].width == 1280);  // "1"280 reads 1280, as pandas reads it
  CHECK(m.table[0].fps == 24.0);
  CHECK(std::isnan(m.table[1].fps));
  CHECK(m.lines == std::vector<std::uint64_t>{2, 3});
  check_error(with_header("a,\"5\"x,2,3,4\n"), {"column \"num_frames\"", "\"5x\" is not"});
}

TEST_CASE("csv errors: a NUL byte anywhere is malformed, naming row and column") {
  using namespace std::string_literals;
  check_error(with_header("a\0b,1,2,3,4\n"s),
              {"row 1 (line 2)", "column \"path\"", "NUL byte"});  // an ignored column
  check_error(with_header("a,1,2,3,4\n\"x\ny\0\",1,2,3,4\n"s),
              {"row 2 (line 3)", "column \"path\"", "NUL"});
  check_error(with_header("a,1,2\0,3,4\n"s), {"row 1 (line 2)", "column \"height\"", "NUL"});
  check_error("num_frames,height,width,fps,x\0\n"s, {"header (line 1)", "field 5", "NUL"});
  check_error("num_frames,height,width,fps,error\n1,2,3,4,\0\n"s, {"row 1", "\"error\"", "NUL"});
  check_error("\0\x01\x02\xff\xfe\n"s, {"header (line 1)", "NUL"});
}

TEST_CASE("csv: reading a file in chunks of any size gives the text's table, lines and errors") {
  using namespace std::string_literals;
  const std::string good =
      "\xEF\xBB\xBFpath,num_frames,height,width,fps,error\r\n"
      "\"a, \"\"b\"\"\r\nc.mp4\",51.0,720,1280,30,\r\n"
      "\n"
      "\"d\" x,33,480,854,0,\r"
      "e.mp4,1,2,3,,\"cannot open\nit\"\n"
      "\"\",\"7\",\"8\" ,9,23.976,\n"
      "last\"quote,5,6,7,,";  // no final newline
  const std::string bad[] = {
      good + "\nx,1,2,3,4,,extra\n",
      good + "\n\"unterminated,1,2,3,4,\n",
      good + "\ny\0y,1,2,3,4,\n"s,
      "num_frames,height,width,fps\n1,2,3,4\r\n1,2,3,4.5.6\r\n",
  };
  std::vector<std::string> texts = {good};
  texts.insert(texts.end(), std::begin(bad), std::end(bad));
  for (std::size_t t = 0; t < texts.size(); ++t) {
    const temp_csv file(texts[t]);
    vbucket::meta_csv expected;
    std::string expected_message;
    try {
      expected = vbucket::parse_meta_csv_with_lines(texts[t], file.path());
    } catch (const vbucket::error& e) {
      expected_message = e.what();
    }
    CHECK((t == 0) == expected_message.empty());
    for (std::size_t chunk = 1; chunk <= texts[t].size() + 1; ++chunk) {
      INFO("text " << t << ", chunk " << chunk);
      const streamed got = read_in_chunks(file.path(), chunk);
      CHECK(got.message == expected_message);
      if (!expected_message.empty()) continue;
      CHECK(same_table(got.csv.table, expected.table));
      CHECK(got.csv.lines == expected.lines);
    }
  }
  // What the good text holds (its rows, independently of the reader).
  const auto m = vbucket::parse_meta_csv_with_lines(good, "meta.csv");
  CHECK(frames_of(m.table) == std::vector<std::int64_t>{51, 33, 0, 7, 5});
  CHECK(m.lines == std::vector<std::uint64_t>{2, 5, 6, 8, 9});
}

TEST_CASE("csv: load_meta_csv holds one chunk of the file, not its text") {
  // 4 MiB of caption rows read in 64 KiB chunks: the buffer stays one chunk (records are far
  // shorter than half of it), whatever the file's size.
  std::string text = "path,num_frames,height,width,fps,text\n";
  const std::string caption(300, 'x');
  std::int64_t rows = 0;
  while (text.size() < (std::size_t{4} << 20)) {
    text += "v/" + std::to_string(rows) + ".mp4," + std::to_string(rows % 100 + 1) +
            ",720,1280,30,\"" + caption + ",\n" + caption + "\"\n";
    ++rows;
  }
  const temp_csv file(text);
  vbucket::detail::csv_reader reader(vbucket::detail::csv_file{file.path(), 64 << 10});
  const vbucket::meta_table t = vbucket::detail::read_meta_csv(reader, nullptr);
  CHECK(static_cast<std::int64_t>(t.size()) == rows);
  CHECK(t[t.size() - 1].num_frames == (rows - 1) % 100 + 1);
  CHECK(reader.buffer_bytes() == std::size_t{64} << 10);
  // One record longer than the chunk: the buffer grows to hold it, then no further.
  const std::string long_caption(200'000, 'y');
  const temp_csv long_file("path,num_frames,height,width,fps\n\"" + long_caption +
                           "\",1,2,3,4\nz,5,6,7,8\n");
  vbucket::detail::csv_reader long_reader(vbucket::detail::csv_file{long_file.path(), 64 << 10});
  CHECK(frames_of(vbucket::detail::read_meta_csv(long_reader, nullptr)) ==
        std::vector<std::int64_t>{1, 5});
  CHECK(long_reader.buffer_bytes() >= long_caption.size());
  CHECK(long_reader.buffer_bytes() <= 4 * long_caption.size());
}

TEST_CASE("csv: stream_hash64 depends on the bytes only, not on how they are cut") {
  std::string text;
  for (int i = 0; i < 300; ++i) text += static_cast<char>((i * 37 + 11) & 0xff);
  vbucket::detail::stream_hash64 whole;
  whole.update(text.data(), text.size());
  CHECK(whole.bytes() == text.size());
  for (std::size_t cut : {1u, 3u, 7u, 31u, 32u, 33u, 64u, 299u}) {
    vbucket::detail::stream_hash64 pieces;
    for (std::size_t at = 0; at < text.size(); at += cut)
      pieces.update(text.data() + at, std::min(cut, text.size() - at));
    CHECK(pieces.value() == whole.value());
  }
  // One byte changed, one byte more or less: another value (every length up to the text's).
  for (std::size_t n = 0; n < text.size(); ++n) {
    vbucket::detail::stream_hash64 a, b, c;
    a.update(text.data(), n);
    b.update(text.data(), n + 1);
    std::string edited = text.substr(0, n + 1);
    edited[n] = static_cast<char>(edited[n] ^ 1);
    c.update(edited.data(), edited.size());
    CHECK(a.value() != b.value());
    CHECK(b.value() != c.value());
  }
}

namespace {

/// Reads every row of `csv` (as a sampler does at each epoch); the row count.
std::uint64_t read_rows(const vbucket::streamed_meta_csv& csv) {
  return csv.for_each_chunk([](const vbucket::meta_chunk&) {});
}

/// The message of `read_rows(csv)`, or "" when it does not throw.
std::string read_error(const vbucket::streamed_meta_csv& csv) {
  try {
    read_rows(csv);
  } catch (const vbucket::error& e) {
    return e.what();
  }
  return "";
}

void write_text(const std::string& path, std::string_view text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace

TEST_CASE("csv: a streamed CSV refuses a file that changed since its first read") {
  std::string text = "num_frames,height,width,fps\n";
  for (int i = 0; i < 50; ++i) text += std::to_string(20 + i) + ",720,1280,24\n";
  const temp_csv file(text);
  auto fresh = [&] { return vbucket::streamed_meta_csv{file.path(), 7}; };
  auto restore = [&] { write_text(file.path(), text); };

  SUBCASE("unchanged: every read gives the same rows, a touched file too") {
    const auto csv = fresh();
    CHECK(read_rows(csv) == 50);
    CHECK(read_rows(csv) == 50);
    std::filesystem::last_write_time(
        file.path(), std::filesystem::last_write_time(file.path()) + std::chrono::seconds(5));
    CHECK(read_rows(csv) == 50);
  }
  SUBCASE("rows appended") {
    const auto csv = fresh();
    CHECK(read_rows(csv) == 50);
    write_text(file.path(), text + "30,720,1280,24\n31,720,1280,24\n");
    const std::string message = read_error(csv);
    CHECK(message.find(file.path() + ": the metadata file changed") == 0);
    CHECK(message.find("its size is " + std::to_string(text.size() + 30) + " bytes, it was " +
                       std::to_string(text.size()) + " bytes") != std::string::npos);
    CHECK(message.find("explicit new version") != std::string::npos);
    CHECK(message.find("epoch boundary") != std::string::npos);
    // A copy (a sampler keeps one) shares the record.
    const vbucket::streamed_meta_csv copy = csv;
    CHECK(!read_error(copy).empty());
    // A new source reads the new version.
    CHECK(read_rows(fresh()) == 52);
    restore();
  }
  SUBCASE("truncated") {
    const auto csv = fresh();
    CHECK(read_rows(csv) == 50);
    write_text(file.path(), text.substr(0, text.size() - 15));
    CHECK(read_error(csv).find("(truncated?)") != std::string::npos);
    restore();
  }
  SUBCASE("one row edited, the same size") {
    const auto csv = fresh();
    CHECK(read_rows(csv) == 50);
    std::string edited = text;
    edited[edited.find("25,720")] = '3';  // 25 frames -> 35
    write_text(file.path(), edited);
    const std::string message = read_error(csv);
    CHECK(message.find("same size, different content") != std::string::npos);
    restore();
  }
  SUBCASE("edited between the header check and the first read") {
    const auto csv = fresh();
    csv.check();
    write_text(file.path(), text + "30,720,1280,24\n");
    CHECK(read_error(csv).find("first opened it") != std::string::npos);
    restore();
  }
}
