#pragma once
/// Shared pieces of the `vbucket` command-line tool: the subcommands' entry points, a small
/// flag parser (`--flag value` and `--flag=value`), value parsers, an output file that
/// appears only when complete, and `run_main`, which turns every failure into exactly one
/// line `vbucket <cmd>: error: <message>` on stderr and an exit code.
///
/// Exit codes: 0 success, 1 bad data (unreadable or malformed config/metadata, write
/// failure), 2 bad usage (unknown or missing flag, bad flag value, unknown subcommand).

#include <fcntl.h>     // open, O_TMPFILE, AT_FDCWD
#include <signal.h>    // sigaction, raise (temporary files removed on SIGINT/SIGTERM)
#include <sys/stat.h>  // stat, fchmod
#include <unistd.h>    // access, dup, dup2, linkat, unlink

#include <algorithm>     // std::max
#include <atomic>        // std::atomic (the signal handler's table)
#include <cerrno>        // errno
#include <cstdint>       // std::uint64_t
#include <cstdio>        // std::FILE, std::fopen, std::fputs
#include <cstdlib>       // std::getenv
#include <cstring>       // std::strerror, std::memcpy
#include <exception>     // std::exception
#include <filesystem>    // std::filesystem::rename, status
#include <map>           // std::map
#include <new>           // std::bad_alloc
#include <random>        // std::random_device (temporary file names)
#include <span>          // std::span
#include <stdexcept>     // std::runtime_error
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::error_code
#include <utility>       // std::move
#include <vector>        // std::vector

#include "vbucket/base/error.hpp"           // vbucket::error, escape_control
#include "vbucket/detail/parse_number.hpp"  // parse_uint_in, parse_positive

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
int cmd_cache_plan(int argc, char** argv);
int cmd_layout(int argc, char** argv);

inline constexpr int exit_ok = 0;
inline constexpr int exit_data_error = 1;
inline constexpr int exit_usage_error = 2;

/// A mistake on the command line (unknown or missing flag, bad flag value): exit code 2.
class usage_error : public std::runtime_error {
 public:
  explicit usage_error(const std::string& message) : std::runtime_error(message) {}
};

/// Runs a subcommand's body (a callable returning the exit code). Any exception becomes one
/// line on stderr, `vbucket <command>: error: <message>`, and exit code 2 for usage errors or
/// 1 for everything else. `command` empty means the top level (`vbucket: error: ...`).
template <class Body>
int run_main(std::string_view command, Body&& body) noexcept {
  const std::string name = command.empty() ? "vbucket" : "vbucket " + std::string(command);
  auto report = [&](std::string_view message, int code) noexcept {
    try {
      std::string line = name + ": error: " + escape_control(message);
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
  /// to a switch, a positional argument or (unless --help or --run was given) a missing
  /// required flag. With --run (a run file, read by `read_run_flags`) the command checks its
  /// required flags itself, as the file may give them (`check_required`).
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
    if (!a.has("run")) a.check_required(flags, [](std::string_view) { return false; });
    return a;
  }

  /// Throws `usage_error` naming the required flags that were not given and that
  /// `elsewhere(name)` does not supply.
  template <class Given>
  void check_required(std::span<const flag> flags, Given&& elsewhere) const {
    std::string missing;
    for (const flag& f : flags)
      if (f.required && values_.count(std::string(f.name)) == 0 && !elsewhere(f.name))
        missing += (missing.empty() ? "--" : ", --") + std::string(f.name);
    if (!missing.empty())
      throw usage_error("missing required flag" +
                        std::string(missing.find(',') == std::string::npos ? " " : "s ") + missing);
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

/// Prints `rows` to stdout as columns padded to the widest cell, each left- or right-aligned by
/// `align` ('l' or 'r' per column), two spaces apart, no trailing spaces.
inline void print_table(const std::vector<std::vector<std::string>>& rows, std::string_view align) {
  std::vector<std::size_t> width(align.size(), 0);
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      if (c > 0) line += "  ";
      line += align[c] == 'r' ? pad + row[c] : row[c] + pad;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    line += '\n';
    std::fputs(line.c_str(), stdout);
  }
}

/// An unsigned integer flag value in [min, max], plain decimal digits.
inline std::uint64_t parse_uint_flag(std::string_view flag_name, std::string_view text,
                                     std::uint64_t min, std::uint64_t max) {
  if (const auto v = detail::parse_uint_in(text, min, max)) return *v;
  throw usage_error("--" + std::string(flag_name) + ": expected an integer from " +
                    std::to_string(min) + " to " + std::to_string(max) + ", got \"" +
                    std::string(text) + "\"");
}

/// A finite positive number flag value.
inline double parse_positive_flag(std::string_view flag_name, std::string_view text) {
  if (const auto v = detail::parse_positive(text)) return *v;
  throw usage_error("--" + std::string(flag_name) + ": expected a positive number, got \"" +
                    std::string(text) + "\"");
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

namespace output_detail {

/// Named temporary files to remove when the process is ended by SIGINT, SIGTERM or SIGHUP:
/// a fixed table the signal handler reads without locks or allocation (async-signal-safe).
/// A slot is filled before its file exists and cleared after the file is renamed or removed.
struct temp_file_slots {
  static constexpr int count = 8;
  static constexpr std::size_t max_path = 4096;
  struct slot {
    std::atomic<bool> used{false};   // the slot is taken by an output_file
    std::atomic<bool> armed{false};  // the handler unlinks `path`
    char path[max_path] = {};
  };
  slot slots[count];
};
inline temp_file_slots& temp_files() noexcept {
  static temp_file_slots t;
  return t;
}

/// Unlinks every armed temporary file, then ends the process with the signal's default action.
extern "C" inline void remove_temp_files_on_signal(int sig) {
  temp_file_slots& t = temp_files();
  for (auto& s : t.slots)
    if (s.armed.load()) ::unlink(s.path);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

/// Installs `remove_temp_files_on_signal` for SIGINT, SIGTERM and SIGHUP once, except for a
/// signal the process ignores (started with nohup, or in the background of a shell without job
/// control) or already handles.
inline void install_temp_file_handlers() {
  static const bool installed = [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
      struct sigaction act {};
      act.sa_handler = remove_temp_files_on_signal;
      ::sigemptyset(&act.sa_mask);
      ::sigaction(sig, &act, nullptr);
    }
    return true;
  }();
  (void)installed;
}

/// A slot of `temp_files()` that an output_file holds while it may leave a named file behind.
class temp_file_slot {
 public:
  temp_file_slot() {
    for (auto& s : temp_files().slots) {
      bool expected = false;
      if (s.used.compare_exchange_strong(expected, true)) {
        slot_ = &s;
        break;
      }
    }
    if (slot_ != nullptr) install_temp_file_handlers();
  }
  temp_file_slot(const temp_file_slot&) = delete;
  temp_file_slot& operator=(const temp_file_slot&) = delete;
  ~temp_file_slot() {
    if (slot_ == nullptr) return;
    disarm();
    slot_->used.store(false);
  }
  /// From now on a signal unlinks `path` (too long a path is not recorded).
  void arm(const std::string& path) noexcept {
    if (slot_ == nullptr || path.size() >= temp_file_slots::max_path) return;
    slot_->armed.store(false);
    std::memcpy(slot_->path, path.c_str(), path.size() + 1);
    slot_->armed.store(true);
  }
  void disarm() noexcept {
    if (slot_ != nullptr) slot_->armed.store(false);
  }

 private:
  temp_file_slots::slot* slot_ = nullptr;
};

/// Whether an unnamed (O_TMPFILE) file may be used: /proc/self/fd must name an open file, so
/// that it can be linked into a directory once complete, and VBUCKET_NO_O_TMPFILE must not be
/// set (it selects the named temporary file, for tests and for filesystems that misbehave).
inline bool unnamed_files_usable() {
  static const bool ok =
      ::access("/proc/self/fd", X_OK) == 0 && std::getenv("VBUCKET_NO_O_TMPFILE") == nullptr;
  return ok;
}

}  // namespace output_detail

/// An output file that appears only when complete, and never leaves a partial file or a
/// temporary one behind: it is written to an unnamed file in the target's directory
/// (`O_TMPFILE`, where the filesystem has it), which `commit()` links under a temporary name and
/// renames over the target, so even `kill -9` leaves nothing; elsewhere to a named temporary
/// file `TARGET.tmp-<hex>`, which SIGINT, SIGTERM and SIGHUP remove before the process ends. A
/// failure keeps an existing target as it was; a replaced target keeps its permission bits, and
/// one that is not writable (no write permission, or `access` refuses) is refused, not
/// replaced. A target that exists and is not a regular file (a device such as /dev/null, a pipe)
/// is written in place. `-` is standard output: the process's other standard output lines
/// (summaries) then go to standard error, and only one output may be `-`. Errors throw
/// `vbucket::error` naming the target.
class output_file {
 public:
  explicit output_file(std::string path) : path_(std::move(path)) {
    namespace fs = std::filesystem;
    if (path_.empty()) throw vbucket::error("output file name is empty");
    if (path_ == "-") {
      open_stdout();
      return;
    }
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
    struct stat existing {};
    const bool exists = ::stat(target_.c_str(), &existing) == 0 && S_ISREG(existing.st_mode);
    if (exists) {
      const bool no_write_bit = (existing.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0;
      if (no_write_bit || ::access(target_.c_str(), W_OK) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(existing.st_mode & 07777));
        throw vbucket::error(path_ + ": cannot replace the existing file: it is not writable " +
                             "(mode " + mode + "); make it writable or remove it first");
      }
    }
    const mode_t mode = exists ? (existing.st_mode & 07777) : mode_t{0};
    if (!open_unnamed(mode)) open_named(mode);
  }
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;
  ~output_file() {
    if (file_ != nullptr) std::fclose(file_);
    if (!temp_.empty()) ::unlink(temp_.c_str());
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
    if (is_stdout_) {
      const bool close_failed = std::fclose(file_) != 0;
      if (!write_failed && close_failed) err = errno;
      file_ = nullptr;
      if (write_failed || close_failed)
        throw vbucket::error("--out -: write to standard output failed (" + describe(err) + ")");
      return;
    }
    // The complete unnamed file gets its temporary name while its descriptor is open.
    if (!write_failed && unnamed_fd_ >= 0) link_unnamed();
    const bool close_failed = std::fclose(file_) != 0;
    if (!write_failed && close_failed) err = errno;
    file_ = nullptr;
    unnamed_fd_ = -1;
    if (write_failed || close_failed)
      throw vbucket::error(path_ + ": write failed (" + describe(err) + ")");
    if (temp_.empty()) return;  // written in place
    std::error_code ec;
    std::filesystem::rename(temp_, target_, ec);
    if (ec) throw vbucket::error(path_ + ": cannot replace the file (" + ec.message() + ")");
    slot_.disarm();
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

  // Standard output takes the data; what the process prints on it from now on goes to
  // standard error (file descriptor 1 becomes a copy of 2), so a summary cannot mix with it.
  void open_stdout() {
    static bool taken = false;
    if (taken) throw vbucket::error("--out -: only one output can be standard output");
    std::fflush(stdout);
    const int data = ::dup(STDOUT_FILENO);
    if (data < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      const int err = errno;
      throw vbucket::error("--out -: cannot use standard output (" + describe(err) + ")");
    }
    file_ = ::fdopen(data, "wb");
    if (file_ == nullptr) {
      const int err = errno;
      ::close(data);
      throw vbucket::error("--out -: cannot use standard output (" + describe(err) + ")");
    }
    taken = true;
    is_stdout_ = true;
  }

  std::string directory() const {
    const std::filesystem::path dir = std::filesystem::path(target_).parent_path();
    return dir.empty() ? std::string(".") : dir.string();
  }

  // An unnamed file in the target's directory; false where the kernel or the filesystem has
  // none (the named temporary file is used then).
  bool open_unnamed(mode_t mode) {
#ifdef O_TMPFILE
    if (!output_detail::unnamed_files_usable()) return false;
    const int fd = ::open(directory().c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0) return false;
    if (mode != 0) (void)::fchmod(fd, mode);
    file_ = ::fdopen(fd, "wb");
    if (file_ == nullptr) {
      ::close(fd);
      return false;
    }
    unnamed_fd_ = fd;
    return true;
#else
    (void)mode;
    return false;
#endif
  }

  // A new temporary name next to the target.
  std::string temp_name() const {
    static std::random_device rd;
    const std::uint64_t tag = (std::uint64_t{rd()} << 32) ^ rd();
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(tag));
    return target_ + ".tmp-" + hex;
  }

  void open_named(mode_t mode) {
    for (int attempt = 0;; ++attempt) {
      temp_ = temp_name();
      slot_.arm(temp_);  // before the file exists: a signal from here on removes it
      errno = 0;
      const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd >= 0) {
        if (mode != 0) (void)::fchmod(fd, mode);
        file_ = ::fdopen(fd, "wb");
        if (file_ != nullptr) break;
        ::close(fd);
      }
      const int err = errno;
      slot_.disarm();
      if (fd >= 0) ::unlink(temp_.c_str());
      temp_.clear();
      if (err != EEXIST || attempt > 8)
        throw vbucket::error(path_ + ": cannot create output file (" + describe(err) + ")");
    }
  }

  // Gives the complete unnamed file a temporary name next to the target (then renamed).
  void link_unnamed() {
    const std::string proc = "/proc/self/fd/" + std::to_string(unnamed_fd_);
    for (int attempt = 0;; ++attempt) {
      temp_ = temp_name();
      slot_.arm(temp_);
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, temp_.c_str(), AT_SYMLINK_FOLLOW) == 0) return;
      const int err = errno;
      slot_.disarm();
      temp_.clear();
      if (err != EEXIST || attempt > 8)
        throw vbucket::error(path_ + ": cannot create output file (" + describe(err) + ")");
    }
  }

  std::string path_;
  std::string target_;
  std::string temp_;  // empty: unnamed, written in place, or already renamed
  std::FILE* file_ = nullptr;
  int unnamed_fd_ = -1;  // the O_TMPFILE file's descriptor until it is linked
  bool is_stdout_ = false;
  output_detail::temp_file_slot slot_;
};

}  // namespace vbucket::cli
