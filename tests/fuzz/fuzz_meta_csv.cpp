/// Fuzzes the metadata CSV reader (`vbucket::parse_meta_csv`) on arbitrary text. Bad input
/// must throw `vbucket::error` with one line naming the file; a table that loads must hold only
/// values the rules accept, agree between the two entry points and with the file reader (which
/// streams the text in chunks of 1 to 16 bytes here, so records cross chunk borders), and
/// survive a write-and-reload round trip.

#include <cmath>        // std::isnan, std::isfinite
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint8_t, std::uint64_t
#include <cstdio>       // std::snprintf, std::fopen, std::fwrite
#include <filesystem>   // std::filesystem::temp_directory_path
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "fuzz_common.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/bucket/csv.hpp"
#include "vbucket/bucket/meta.hpp"

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>  // getpid (a file name no concurrent run shares)
#endif

namespace {

constexpr std::string_view file_name = "fuzz.csv";

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

/// A row kept as an unusable sample (`error` column not empty): 0 frames, 0 × 0, NaN fps.
bool unusable(const vbucket::meta_table& t, std::size_t i) {
  return t[i].num_frames == 0 && t[i].height == 0 && t[i].width == 0 && std::isnan(t[i].fps);
}

void check_table(const vbucket::meta_table& t) {
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (unusable(t, i)) continue;  // a row with a non-empty `error` column
    VBUCKET_FUZZ_CHECK(t[i].num_frames >= 1 && t[i].num_frames <= vbucket::max_meta_frames);
    VBUCKET_FUZZ_CHECK(t[i].height >= 1 && t[i].height <= vbucket::max_meta_side);
    VBUCKET_FUZZ_CHECK(t[i].width >= 1 && t[i].width <= vbucket::max_meta_side);
    VBUCKET_FUZZ_CHECK(std::isnan(t[i].fps) || (t[i].fps > 0.0 && std::isfinite(t[i].fps)));
  }
}

/// The table as a CSV the reader must read back to the same values.
std::string to_csv(const vbucket::meta_table& t) {
  std::string out = "fps,width,path,height,error,num_frames\r\n";
  char buf[64];
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (std::isnan(t[i].fps)) {
      out += i % 2 == 0 ? "" : "NaN";
    } else {
      std::snprintf(buf, sizeof buf, "%.17g", t[i].fps);
      out += buf;
    }
    out += "," + std::to_string(t[i].width) + ",\"a,\"\"b\"\"\n\"," + std::to_string(t[i].height) +
           (unusable(t, i) ? ",\"bad, file\"," : ", ,") + std::to_string(t[i].num_frames) +
           (i % 3 == 0 ? "\n" : "\r\n");
  }
  return out;
}

/// What the file reader makes of `text`: the message after the file name when it throws
/// (`error`), else the table.
struct streamed {
  vbucket::meta_csv csv;
  std::string error;
};
streamed read_streamed(std::string_view text) {
#if defined(__unix__) || defined(__APPLE__)
  const std::string tag = std::to_string(static_cast<long>(getpid()));
#else
  const std::string tag = "0";
#endif
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("vbucket_fuzz_meta_csv_" + tag + ".csv")).string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  VBUCKET_FUZZ_CHECK(f != nullptr);
  VBUCKET_FUZZ_CHECK(std::fwrite(text.data(), 1, text.size(), f) == text.size());
  VBUCKET_FUZZ_CHECK(std::fclose(f) == 0);
  streamed out;
  try {
    vbucket::detail::csv_reader reader(vbucket::detail::csv_file{path, 1 + text.size() % 16});
    out.csv.table = vbucket::detail::read_meta_csv(reader, &out.csv.lines);
  } catch (const vbucket::error& e) {
    const std::string_view message = e.what();
    VBUCKET_FUZZ_CHECK(message.substr(0, path.size()) == path);
    out.error = std::string(message.substr(path.size()));
  }
  // In chunks of rows (as a sampler over streamed_meta_csv reads it): the same rows in order,
  // or the same error.
  vbucket::meta_table rows;
  std::uint64_t next = 0;
  try {
    const vbucket::streamed_meta_csv file{path, 1 + text.size() % 5};
    const std::uint64_t n = file.for_each_chunk([&](const vbucket::meta_chunk& c) {
      VBUCKET_FUZZ_CHECK(c.first == next && !c.rows.empty() && c.rows.size() <= file.chunk_rows);
      for (std::size_t i = 0; i < c.rows.size(); ++i) rows.push_back(c.rows[i]);
      next += c.rows.size();
    });
    VBUCKET_FUZZ_CHECK(out.error.empty() && n == next && rows == out.csv.table);
  } catch (const vbucket::error& e) {
    VBUCKET_FUZZ_CHECK(std::string_view(e.what()).substr(0, path.size()) == path);
    VBUCKET_FUZZ_CHECK(std::string_view(e.what()).substr(path.size()) == out.error);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  vbucket::meta_csv parsed;
  try {
    parsed = vbucket::parse_meta_csv_with_lines(text, std::string(file_name));
  } catch (const vbucket::error& e) {
    vbucket_fuzz::check_message(e.what(), file_name);
    // The file reader fails with the same message.
    VBUCKET_FUZZ_CHECK(read_streamed(text).error ==
                       std::string_view(e.what()).substr(file_name.size()));
    // The other entry point fails too, with the same message.
    try {
      (void)vbucket::parse_meta_csv(text, std::string(file_name));
      vbucket_fuzz::fail("parse_meta_csv accepted what parse_meta_csv_with_lines rejected",
                         __FILE__, __LINE__);
    } catch (const vbucket::error& e2) {
      VBUCKET_FUZZ_CHECK(std::string_view(e.what()) == e2.what());
    }
    return 0;
  }
  const auto& t = parsed.table;
  check_table(t);
  VBUCKET_FUZZ_CHECK(parsed.lines.size() == t.size());
  for (std::size_t i = 0; i < parsed.lines.size(); ++i)
    VBUCKET_FUZZ_CHECK(parsed.lines[i] >= 2 && (i == 0 || parsed.lines[i - 1] < parsed.lines[i]));

  const auto plain = vbucket::parse_meta_csv(text, std::string(file_name));
  VBUCKET_FUZZ_CHECK(plain.size() == t.size());
  const streamed from_file = read_streamed(text);
  VBUCKET_FUZZ_CHECK(from_file.error.empty() && from_file.csv.table.size() == t.size());
  VBUCKET_FUZZ_CHECK(from_file.csv.lines == parsed.lines);
  for (std::size_t i = 0; i < t.size(); ++i) {
    const auto& u = from_file.csv.table;
    VBUCKET_FUZZ_CHECK(u[i].num_frames == t[i].num_frames && u[i].height == t[i].height &&
                       u[i].width == t[i].width && same(u[i].fps, t[i].fps));
  }
  const auto again = vbucket::parse_meta_csv(to_csv(t), "again.csv");
  VBUCKET_FUZZ_CHECK(again.size() == t.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    VBUCKET_FUZZ_CHECK(plain[i].num_frames == t[i].num_frames && plain[i].height == t[i].height &&
                       plain[i].width == t[i].width && same(plain[i].fps, t[i].fps));
    VBUCKET_FUZZ_CHECK(again[i].num_frames == t[i].num_frames && again[i].height == t[i].height &&
                       again[i].width == t[i].width && same(again[i].fps, t[i].fps));
  }
  return 0;
}
