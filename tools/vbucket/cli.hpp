#pragma once
/// Shared pieces of the `vbucket` command-line tool: the subcommands' entry points, a small
/// flag parser (`--flag value` and `--flag=value`), value parsers, an output file that
/// appears only when complete, and `run_main`, which turns every failure into exactly one
/// line `vbucket <cmd>: error: <message>` on stderr and an exit code.
///
/// Exit codes: 0 success, 1 bad data (unreadable or malformed config/metadata, write
/// failure), 2 bad usage (unknown or missing flag, bad flag value, unknown subcommand).

#include <algorithm>     // std::max
#include <cerrno>        // errno
#include <charconv>      // std::from_chars
#include <cmath>         // std::isfinite
#include <cstdint>       // std::uint64_t
#include <cstdio>        // std::FILE, std::fopen, std::fputs
#include <cstring>       // std::strerror
#include <exception>     // std::exception
#include <filesystem>    // std::filesystem::rename, status
#include <map>           // std::map
#include <new>           // std::bad_alloc
#include <random>        // std::random_device (temporary file names)
#include <span>          // std::span
#include <stdexcept>     // std::runtime_error
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc, std::error_code
#include <utility>       // std::move

#include "vbucket/error.hpp"
#include "vbucket/numpy_random.hpp"  // big_seed
#include "vbucket/seeding.hpp"       // rng_mode, check_seed

namespace vbucket::cli {

// ---------------------------------------------------------------------------------------------
// Subcommands. Each lives in tools/vbucket/<name>.cpp and is listed in main.cpp's table;
// argv[0] is the subcommand's name, and the function returns the process exit code.
// ---------------------------------------------------------------------------------------------
int cmd_assign(int argc, char** argv);
int cmd_plan(int argc, char** argv);
int cmd_stats(int argc, char** argv);
int cmd_scan(int argc, char** argv);    // tools/vbucket/ffmpeg/ (VBUCKET_CLI_HAS_FFMPEG)
int cmd_decode(int argc, char** argv);  // tools/vbucket/ffmpeg/ (VBUCKET_CLI_HAS_FFMPEG)
int cmd_fit_bs(int argc, char** argv);

inline constexpr int exit_ok = 0;
inline constexpr int exit_data_error = 1;
inline constexpr int exit_usage_error = 2;

/// A mistake on the command line (unknown or missing flag, bad flag value): exit code 2.
class usage_error : public std::runtime_error {
 public:
  explicit usage_error(const std::string& message) : std::runtime_error(message) {}
};

/// `s` on one line: line breaks and other control characters are written as escapes.
inline std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 && c != '\t') {
      constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

/// Runs a subcommand's body (a callable returning the exit code). Any exception becomes one
/// line on stderr, `vbucket <command>: error: <message>`, and exit code 2 for usage errors or
/// 1 for everything else. `command` empty means the top level (`vbucket: error: ...`).
template <class Body>
int run_main(std::string_view command, Body&& body) noexcept {
  const std::string name = command.empty() ? "vbucket" : "vbucket " + std::string(command);
  auto report = [&](std::string_view message, int code) noexcept {
    try {
      std::string line = name + ": error: " + one_line(message);
      if (code == exit_usage_error) line += " (see '" + name + " --help')";
      line += '\n';
      std::fflush(stdout);
      std::fputs(line.c_str(), stderr);
    } catch (...) {
      std::fputs("vbucket: error: out of memory\n", stderr);
    }
    return code;
  };
  try {
    return body();
  } catch (const usage_error& e) {
    return report(e.what(), exit_usage_error);
  } catch (const vbucket::error& e) {
    return report(e.what(), exit_data_error);
  } catch (const std::bad_alloc&) {
    return report("out of memory", exit_data_error);
  } catch (const std::exception& e) {
    return report(e.what(), exit_data_error);
  } catch (...) {
    return report("unknown error", exit_data_error);
  }
}

/// One flag a subcommand accepts.
struct flag {
  std::string_view name;        ///< without the leading "--"
  std::string_view value_name;  ///< empty: a switch, which takes no value
  bool required = false;
  std::string_view help;
};

/// The flags given to a subcommand. `--help`/`-h` are always accepted.
class args {
 public:
  /// Parses argv[1..argc) against `flags`; argv[0] is the subcommand's name. Throws
  /// `usage_error` on an unknown flag, a flag given twice, a missing value, a value given
  /// to a switch, a positional argument or (unless --help was given) a missing required flag.
  static args parse(int argc, char** argv, std::span<const flag> flags) {
    args a;
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        a.help_ = true;
        return a;
      }
      if (arg.size() < 3 || arg.substr(0, 2) != "--")
        throw usage_error("unexpected argument \"" + std::string(arg) +
                          "\" (flags are written --name value or --name=value)");
      std::string_view name = arg.substr(2);
      std::string_view value;
      const auto eq = name.find('=');
      const bool inline_value = eq != std::string_view::npos;
      if (inline_value) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      const flag* f = find(flags, name);
      if (f == nullptr) throw usage_error("unknown flag --" + std::string(name));
      if (a.values_.count(std::string(name)) != 0)
        throw usage_error("--" + std::string(name) + " is given more than once");
      if (f->value_name.empty()) {
        if (inline_value) throw usage_error("--" + std::string(name) + " takes no value");
      } else if (!inline_value) {
        if (i + 1 >= argc || std::string_view(argv[i + 1]).substr(0, 2) == "--")
          throw usage_error("--" + std::string(name) + " needs a value (" +
                            std::string(f->value_name) + ")");
        value = argv[++i];
      }
      a.values_.emplace(std::string(name), std::string(value));
    }
    std::string missing;
    for (const flag& f : flags)
      if (f.required && a.values_.count(std::string(f.name)) == 0)
        missing += (missing.empty() ? "--" : ", --") + std::string(f.name);
    if (!missing.empty())
      throw usage_error("missing required flag" +
                        std::string(missing.find(',') == std::string::npos ? " " : "s ") + missing);
    return a;
  }

  /// True when --help or -h was given (nothing else was checked then).
  [[nodiscard]] bool help() const noexcept { return help_; }
  [[nodiscard]] bool has(std::string_view name) const {
    return values_.count(std::string(name)) != 0;
  }
  /// The value of a flag that was given (a required flag, or one checked with `has`).
  [[nodiscard]] const std::string& value(std::string_view name) const {
    return values_.at(std::string(name));
  }
  [[nodiscard]] std::string value_or(std::string_view name, std::string_view fallback) const {
    const auto it = values_.find(std::string(name));
    return it == values_.end() ? std::string(fallback) : it->second;
  }

 private:
  static const flag* find(std::span<const flag> flags, std::string_view name) noexcept {
    for (const flag& f : flags)
      if (f.name == name) return &f;
    return nullptr;
  }

  bool help_ = false;
  std::map<std::string, std::string> values_;
};

/// The text of `vbucket <command> --help`: a synopsis built from `flags`, the description,
/// then one line per flag.
inline std::string usage_text(std::string_view command, std::string_view description,
                              std::span<const flag> flags) {
  auto word = [](const flag& f) {
    std::string w = "--" + std::string(f.name);
    if (!f.value_name.empty()) w += " " + std::string(f.value_name);
    return w;
  };
  std::string text = "usage: vbucket " + std::string(command);
  std::string optional;
  std::size_t width = 6;  // "--help"
  for (const flag& f : flags) {
    if (f.required) {
      text += " " + word(f);
    } else {
      optional += " [" + word(f) + "]";
    }
    width = std::max(width, word(f).size());
  }
  text += optional + "\n\n" + std::string(description) + "\n\nflags:\n";
  for (const flag& f : flags)
    text +=
        "  " + word(f) + std::string(width + 2 - word(f).size(), ' ') + std::string(f.help) + "\n";
  text += "  --help" + std::string(width + 2 - 6, ' ') + "print this help and exit\n";
  return text;
}

/// An unsigned integer flag value in [min, max], plain decimal digits.
inline std::uint64_t parse_uint_flag(std::string_view flag_name, std::string_view text,
                                     std::uint64_t min, std::uint64_t max) {
  std::uint64_t v = 0;
  const char* const end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || p != end || v < min || v > max)
    throw usage_error("--" + std::string(flag_name) + ": expected an integer from " +
                      std::to_string(min) + " to " + std::to_string(max) + ", got \"" +
                      std::string(text) + "\"");
  return v;
}

/// A finite positive number flag value.
inline double parse_positive_flag(std::string_view flag_name, std::string_view text) {
  double v = 0.0;
  const char* const end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || p != end || !(v > 0.0) || !std::isfinite(v))
    throw usage_error("--" + std::string(flag_name) + ": expected a positive number, got \"" +
                      std::string(text) + "\"");
  return v;
}

/// A seed flag value: any non-negative decimal integer.
inline big_seed parse_seed_flag(std::string_view flag_name, std::string_view text) {
  try {
    return big_seed::parse(text);
  } catch (const vbucket::error& e) {
    throw usage_error("--" + std::string(flag_name) + ": " + e.what());
  }
}

/// A random-mode flag value: fast or numpy.
inline rng_mode parse_rng_flag(std::string_view flag_name, std::string_view text) {
  if (const auto mode = parse_rng_mode(text)) return *mode;
  throw usage_error("--" + std::string(flag_name) + ": unknown random source \"" +
                    std::string(text) + "\" (expected fast or numpy)");
}

/// A seed flag value for `mode` (the library's rule, `check_seed`): any non-negative decimal
/// integer, below 2^64 in fast mode.
inline big_seed parse_seed_flag(std::string_view flag_name, std::string_view text, rng_mode mode) {
  big_seed seed = parse_seed_flag(flag_name, text);
  try {
    check_seed(mode, seed);
  } catch (const vbucket::error& e) {
    throw usage_error("--" + std::string(flag_name) + ": " + e.what());
  }
  return seed;
}

/// `text` as one CSV field: quoted (quotes doubled) when it holds a comma, quote, line break
/// or surrounding blanks.
inline std::string csv_field(std::string_view text) {
  bool quote = !text.empty() && (text.front() == ' ' || text.back() == ' ');
  for (char c : text) quote = quote || c == ',' || c == '"' || c == '\n' || c == '\r';
  if (!quote) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    out.push_back(c);
    if (c == '"') out.push_back('"');
  }
  return out + "\"";
}

/// An output file that appears only when complete: it is written to a temporary file next
/// to the target and renamed over it by `commit()`, so a failure never leaves a half-written
/// file (an existing one is kept). A target that exists and is not a regular file (a device
/// such as /dev/null, a pipe) is written in place. Errors throw `vbucket::error` naming the
/// target.
class output_file {
 public:
  explicit output_file(std::string path) : path_(std::move(path)) {
    namespace fs = std::filesystem;
    if (path_.empty()) throw vbucket::error("output file name is empty");
    std::error_code ec;
    const fs::file_status st = fs::status(path_, ec);  // follows symlinks
    if (!ec && fs::exists(st) && !fs::is_regular_file(st)) {
      if (fs::is_directory(st)) throw vbucket::error(path_ + ": cannot write, it is a directory");
      open_checked(path_, "wb");
      return;
    }
    // Replace a symlink's target, not the link.
    target_ = path_;
    if (fs::is_symlink(fs::symlink_status(path_, ec))) {
      const fs::path resolved = fs::canonical(path_, ec);
      if (!ec) target_ = resolved.string();
    }
    std::random_device rd;
    for (int attempt = 0;; ++attempt) {
      const std::uint64_t tag = (std::uint64_t{rd()} << 32) ^ rd();
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(tag));
      temp_ = target_ + ".tmp-" + hex;
      errno = 0;
      file_ = std::fopen(temp_.c_str(), "wbx");
      if (file_ != nullptr) break;
      if (errno != EEXIST || attempt > 8) {
        const int err = errno;
        temp_.clear();
        throw vbucket::error(path_ + ": cannot create output file (" + describe(err) + ")");
      }
    }
  }
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;
  ~output_file() {
    if (file_ != nullptr) std::fclose(file_);
    if (!temp_.empty()) std::remove(temp_.c_str());
  }

  /// Appends bytes.
  void write(std::string_view bytes) {
    if (bytes.empty()) return;
    if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
      const int err = errno;
      throw vbucket::error(path_ + ": write failed (" + describe(err) + ")");
    }
  }

  /// Flushes, closes and (for a regular file) renames the temporary file over the target.
  void commit() {
    errno = 0;
    const bool write_failed = std::fflush(file_) != 0 || std::ferror(file_) != 0;
    int err = errno;
    const bool close_failed = std::fclose(file_) != 0;
    if (!write_failed && close_failed) err = errno;
    file_ = nullptr;
    if (write_failed || close_failed)
      throw vbucket::error(path_ + ": write failed (" + describe(err) + ")");
    if (temp_.empty()) return;
    std::error_code ec;
    std::filesystem::rename(temp_, target_, ec);
    if (ec) throw vbucket::error(path_ + ": cannot replace the file (" + ec.message() + ")");
    temp_.clear();
  }

 private:
  static std::string describe(int err) {
    return err != 0 ? std::string(std::strerror(err)) : std::string("I/O error");
  }
  void open_checked(const std::string& name, const char* mode) {
    errno = 0;
    file_ = std::fopen(name.c_str(), mode);
    if (file_ == nullptr) {
      const int err = errno;
      throw vbucket::error(path_ + ": cannot open output file (" + describe(err) + ")");
    }
  }

  std::string path_;
  std::string target_;
  std::string temp_;  // empty: written in place, or already renamed
  std::FILE* file_ = nullptr;
};

}  // namespace vbucket::cli
