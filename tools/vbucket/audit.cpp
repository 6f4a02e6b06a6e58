/// `vbucket audit LOG...`: reads the ledgers of every rank of a run (files, or directories of
/// *.ledger files) and proves, per epoch, that each drawn sample was delivered exactly once
/// apart from counted pads, repeats and drops, and each source's share met its weight; prints a
/// table per epoch and every deviation. Exit codes: 0 clean, 1 deviations (or a file that is
/// not a ledger), 2 bad usage.

#include <algorithm>     // std::sort
#include <charconv>      // std::from_chars
#include <cstdint>       // std::uint64_t
#include <cstdio>        // std::fputs, std::printf
#include <filesystem>    // std::filesystem::directory_iterator, is_directory, exists
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::error_code, std::errc
#include <vector>        // std::vector

#include "cli.hpp"
#include "vbucket/run/audit.hpp"
#include "vbucket/run/ledger.hpp"  // ledger_reader, ledger_text_of (--dump)

namespace vbucket::cli {
namespace {

constexpr std::string_view audit_usage =
    "usage: vbucket audit LOG... [--max-named N] [--max-places N] [--share-tolerance T] "
    "[--quiet] [--dump]\n"
    "\n"
    "Reads the ledgers of a run (one file per rank, written by vbucket::ledger_writer; a\n"
    "directory stands for its *.ledger files) and proves, per epoch: each sample drawn for the\n"
    "epoch was delivered exactly once, apart from counted pads (the tail of a bucket's last\n"
    "batch), rank-alignment repeats and drops (X lines: unassigned, disabled, policy,\n"
    "drop_last); each source's share of the drawn samples is within the tolerance of its weight\n"
    "(or equals its count). Every deviation is named: the sample (missing, duplicated,\n"
    "unexpected) with the files, lines, ranks and steps where it appeared, and every truncated,\n"
    "corrupt or out-of-order line and header contradiction. Streamed: one bit per sample of an\n"
    "epoch drawn whole (9 bits with listed draws), one epoch at a time.\n"
    "\n"
    "flags:\n"
    "  --max-named N          deviating samples named per epoch (100; all are counted)\n"
    "  --max-places N         places listed per named sample (8)\n"
    "  --share-tolerance T    largest |drawn share - weight share| of a source (0.01)\n"
    "  --quiet                print the deviations and the verdict only, not the table\n"
    "  --dump                 print the records as text (version 1 lines, binary ones too)\n"
    "                         instead of auditing: a comment line names each file\n"
    "  --help                 this text\n"
    "\n"
    "Exit codes: 0 clean, 1 deviations (or a file that is not a ledger), 2 bad usage.\n";

std::uint64_t count_value(std::string_view flag_name, std::string_view v) {
  std::uint64_t out = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), out);
  if (r.ec != std::errc{} || r.ptr != v.data() + v.size() || v.empty())
    throw usage_error("--" + std::string(flag_name) + ": expected a whole number, got \"" +
                      std::string(v) + "\"");
  return out;
}

double fraction_value(std::string_view flag_name, std::string_view v) {
  double out = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), out);
  if (r.ec != std::errc{} || r.ptr != v.data() + v.size() || v.empty() || !(out >= 0.0) ||
      !(out <= 1.0))
    throw usage_error("--" + std::string(flag_name) + ": expected a number from 0 to 1, got \"" +
                      std::string(v) + "\"");
  return out;
}

/// A directory's *.ledger files in name order.
std::vector<std::string> ledgers_in(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().extension() == ".ledger") out.push_back(entry.path().string());
  if (ec) throw usage_error("cannot list the directory \"" + dir.string() + "\": " + ec.message());
  std::sort(out.begin(), out.end());
  if (out.empty())
    throw usage_error("the directory \"" + dir.string() + "\" has no *.ledger files");
  return out;
}

/// `--dump`: every file's records as text lines.
void dump(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    ledger_reader r(path);
    std::printf("# %s\n%s\n", path.c_str(), std::string(ledger_magic).c_str());
    ledger_line l;
    while (r.next(l)) {
      if (l.truncated) {
        std::printf("# record %llu: cut short (%zu bytes)\n",
                    static_cast<unsigned long long>(l.number), l.text.size());
        continue;
      }
      try {
        std::printf("%s\n", ledger_text_of(l, {path, l.number}).c_str());
      } catch (const error& e) {
        std::printf("# %s\n", e.what());
      }
    }
  }
  std::fflush(stdout);
}

}  // namespace

int cmd_audit(int argc, char** argv) {
  return run_main("audit", [&] {
    audit_options options;
    bool quiet = false, dump_only = false;
    std::vector<std::string> paths;
    bool flags_done = false;
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg = argv[i];
      if (!flags_done && (arg == "--help" || arg == "-h")) {
        std::fputs(std::string(audit_usage).c_str(), stdout);
        return exit_ok;
      }
      if (!flags_done && arg == "--") {
        flags_done = true;
        continue;
      }
      if (flags_done || arg.substr(0, 2) != "--") {
        std::error_code ec;
        if (std::filesystem::is_directory(arg, ec)) {
          for (std::string& p : ledgers_in(std::filesystem::path(arg))) paths.push_back(p);
        } else if (std::filesystem::exists(arg, ec)) {
          paths.emplace_back(arg);
        } else {
          throw usage_error("no such file or directory: \"" + std::string(arg) + "\"");
        }
        continue;
      }
      std::string_view name = arg.substr(2), value;
      bool has_value = false;
      if (const std::size_t eq = name.find('='); eq != std::string_view::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      const auto take = [&]() -> std::string_view {
        if (has_value) return value;
        if (i + 1 >= argc) throw usage_error("--" + std::string(name) + " needs a value");
        return argv[++i];
      };
      if (name == "max-named") {
        options.max_named = static_cast<std::size_t>(count_value(name, take()));
      } else if (name == "max-places") {
        options.max_places = static_cast<std::size_t>(count_value(name, take()));
      } else if (name == "share-tolerance") {
        options.share_tolerance = fraction_value(name, take());
      } else if (name == "quiet") {
        if (has_value) throw usage_error("--quiet takes no value");
        quiet = true;
      } else if (name == "dump") {
        if (has_value) throw usage_error("--dump takes no value");
        dump_only = true;
      } else {
        throw usage_error("unknown flag --" + std::string(name));
      }
    }
    if (paths.empty()) throw usage_error("no ledger given (vbucket audit LOG...)");
    if (dump_only) {
      dump(paths);
      return exit_ok;
    }
    const audit_report report = audit_ledgers(paths, options);
    if (quiet) {
      for (const audit_deviation& d : report.deviations)
        std::printf("%s\n", format_audit_deviation(d).c_str());
      const std::string all = format_audit_report(report);
      const std::size_t last = all.rfind('\n', all.size() - 2);
      std::fputs(all.substr(last == std::string::npos ? 0 : last + 1).c_str(), stdout);
    } else {
      std::fputs(format_audit_report(report).c_str(), stdout);
    }
    std::fflush(stdout);
    return report.clean() ? exit_ok : exit_data_error;
  });
}

}  // namespace vbucket::cli
