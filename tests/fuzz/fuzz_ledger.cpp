/// Fuzzes the ledger reader and the audit (`vbucket::audit_ledgers`) on arbitrary files: the
/// input, split at NUL bytes, is up to 4 ranks' files (rank-00000.ledger, ...). Bad input must
/// either throw `vbucket::error` with one line naming its file, or be reported (deviations);
/// never a crash, a hang or an allocation past the audit's table limit. A report that says
/// clean must account for every drawn sample: delivered + dropped = drawn in every epoch, and
/// the epochs follow one another. Every line also goes through the record parser of its tag.

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint8_t, std::uint64_t
#include <cstdio>       // std::fopen, std::fwrite, std::fclose
#include <filesystem>   // std::filesystem::temp_directory_path
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "fuzz_common.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/run/audit.hpp"
#include "vbucket/run/ledger.hpp"

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>  // getpid (a directory no concurrent run shares)
#endif

namespace {

/// One line, no line break, naming `path`.
void check_names(std::string_view message, const std::string& path) {
  VBUCKET_FUZZ_CHECK(!message.empty() && message.find(path) != std::string_view::npos);
  for (const char c : message) VBUCKET_FUZZ_CHECK(c != '\n');
}

/// Every record parser on one line: a record, or an error naming the place.
void parse_any(std::string_view text) {
  const vbucket::ledger_where here(std::string_view("f"), 7);
  try {
    switch (text.empty() ? '\0' : text[0]) {
      case 'E': {
        vbucket::ledger_epoch r;
        vbucket::parse_ledger_line(text, here, r);
        break;
      }
      case 'S': {
        vbucket::ledger_source r;
        vbucket::parse_ledger_line(text, here, r);
        break;
      }
      case 'D':
      case 'X': {
        vbucket::ledger_ids r;
        vbucket::parse_ledger_line(text, here, r);
        break;
      }
      case 'B': {
        vbucket::ledger_batch r;
        vbucket::parse_ledger_line(text, here, r);
        VBUCKET_FUZZ_CHECK(r.pads <= r.ids.size());
        // Written again, it reads back the same.
        std::string again;
        vbucket::append_ledger_line(again, r);
        vbucket::ledger_batch back;
        vbucket::parse_ledger_line(std::string_view(again).substr(0, again.size() - 1), "g", back);
        VBUCKET_FUZZ_CHECK(back.ids == r.ids && back.step == r.step && back.pads == r.pads &&
                           back.substitutions.size() == r.substitutions.size());
        break;
      }
      default:
        break;
    }
  } catch (const vbucket::error& e) {
    VBUCKET_FUZZ_CHECK(std::string_view(e.what()).substr(0, 4) == "f:7:");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
#if defined(__unix__) || defined(__APPLE__)
  const std::string tag = std::to_string(static_cast<long>(getpid()));
#else
  const std::string tag = "0";
#endif
  static const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("vbucket_fuzz_ledger_" + tag);
  std::filesystem::create_directories(dir);
  std::vector<std::string> paths;
  std::size_t at = 0;
  while (paths.size() < 4) {
    std::size_t end = input.find('\0', at);
    if (end == std::string_view::npos) end = input.size();
    const std::string_view part = input.substr(at, end - at);
    paths.push_back(
        (dir / vbucket::ledger_file_name(static_cast<std::uint32_t>(paths.size()))).string());
    std::FILE* f = std::fopen(paths.back().c_str(), "wb");
    VBUCKET_FUZZ_CHECK(f != nullptr);
    VBUCKET_FUZZ_CHECK(std::fwrite(part.data(), 1, part.size(), f) == part.size());
    VBUCKET_FUZZ_CHECK(std::fclose(f) == 0);
    std::size_t pos = 0;
    while (pos < part.size()) {
      std::size_t nl = part.find('\n', pos);
      if (nl == std::string_view::npos) nl = part.size();
      parse_any(part.substr(pos, nl - pos));
      pos = nl + 1;
    }
    if (end == input.size()) break;
    at = end + 1;
  }
  vbucket::audit_options o;
  o.max_table_bytes = std::uint64_t{1} << 22;  // small tables: large id spaces are refused
  o.max_named = 20;
  try {
    const vbucket::audit_report r = vbucket::audit_ledgers(paths, o);
    for (std::size_t i = 0; i < r.epochs.size(); ++i) {
      const vbucket::audit_epoch& e = r.epochs[i];
      for (std::size_t j = 0; j < i; ++j) VBUCKET_FUZZ_CHECK(e.epoch != r.epochs[j].epoch);
      if (!r.clean()) continue;
      VBUCKET_FUZZ_CHECK(e.header && e.delivered + e.dropped == e.drawn);
      if (i > 0) VBUCKET_FUZZ_CHECK(e.epoch == r.epochs[i - 1].epoch + 1);
    }
    (void)vbucket::format_audit_report(r);
  } catch (const vbucket::error& e) {
    bool named = false;
    for (const std::string& p : paths)
      named = named || std::string_view(e.what()).find(p) != std::string_view::npos;
    VBUCKET_FUZZ_CHECK(named);
    check_names(e.what(), std::string(dir.string()));
  }
  // A resumed writer on the first file: it refuses a file that is no ledger (naming it), or
  // leaves every earlier line whole and appends a record that reads back (in the file's
  // format: text or binary, binary for a new file).
  try {
    vbucket::ledger_writer w(paths[0]);
    w.write(vbucket::ledger_batch{.epoch = 0, .step = 0, .ids = {1}});
  } catch (const vbucket::error& e) {
    check_names(e.what(), paths[0]);
    return 0;
  }
  vbucket::ledger_reader r(paths[0]);
  vbucket::ledger_line l;
  std::string last;
  while (r.next(l)) {
    VBUCKET_FUZZ_CHECK(!l.truncated);
    try {  // (an earlier record may be corrupt: the writer keeps it, the audit names it)
      last = vbucket::ledger_text_of(l, {paths[0], l.number});
    } catch (const vbucket::error&) {
      last.clear();
    }
  }
  VBUCKET_FUZZ_CHECK(last == "B e=0 s=0 st=0 r=0 w=1 ids=1");
  return 0;
}
