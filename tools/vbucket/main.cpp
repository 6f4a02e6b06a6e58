/// `vbucket`: the library's jobs from a shell. `vbucket <command> [flags]`; see --help.

#include <algorithm>    // std::max
#include <cstdio>       // std::fputs
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "cli.hpp"

namespace vbucket::cli {
int cmd_audit(int argc, char** argv);  // tools/vbucket/audit.cpp
}  // namespace vbucket::cli

namespace {

struct command {
  std::string_view name;
  int (*run)(int argc, char** argv);  // argv[0] is the command's name
  std::string_view summary;
};

// To add a subcommand: write `int cmd_<name>(int, char**)` in tools/vbucket/<name>.cpp (wrap
// its body in vbucket::cli::run_main), declare it in cli.hpp and add one line here.
constexpr command commands[] = {
    {"assign", vbucket::cli::cmd_assign, "assign every sample of a metadata CSV to a bucket"},
    {"audit", vbucket::cli::cmd_audit, "prove from ledgers: each epoch's samples once each"},
    {"cache-plan", vbucket::cli::cmd_cache_plan,
     "select the (sample, shape) latents to precompute, as a manifest"},
#if VBUCKET_CLI_HAS_FFMPEG
    {"decode", vbucket::cli::cmd_decode, "decode a clip of a video, resized and cropped, as RGB24"},
#endif
    {"fit-bs", vbucket::cli::cmd_fit_bs, "fit memory/time models, rescale a config's batch sizes"},
    {"layout", vbucket::cli::cmd_layout,
     "choose each bucket's sequence-parallel size and micro-batch; plan groups of ranks"},
    {"plan", vbucket::cli::cmd_plan, "plan an epoch: each rank's batches, as JSON lines"},
#if VBUCKET_CLI_HAS_FFMPEG
    {"scan", vbucket::cli::cmd_scan, "probe the videos of a directory or list into a metadata CSV"},
#endif
    {"stats", vbucket::cli::cmd_stats, "print an epoch plan's statistics per bucket, shape, ratio"},
};

const command* find_command(std::string_view name) noexcept {
  for (const command& c : commands)
    if (c.name == name) return &c;
  return nullptr;
}

std::string command_names() {
  std::string names;
  for (const command& c : commands) names += (names.empty() ? "" : ", ") + std::string(c.name);
  return names;
}

std::string usage() {
  std::string text =
      "usage: vbucket <command> [flags]\n"
      "       vbucket <command> --help\n\n"
      "Bucketing for variable-resolution video training (Open-Sora compatible).\n\n"
      "commands:\n";
  std::size_t width = 0;
  for (const command& c : commands) width = std::max(width, c.name.size());
  for (const command& c : commands)
    text += "  " + std::string(c.name) + std::string(width + 2 - c.name.size(), ' ') +
            std::string(c.summary) + "\n";
  text += "\nExit codes: 0 success, 1 bad data (config, metadata, files), 2 bad usage.\n";
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  using vbucket::cli::usage_error;
  const std::string_view first = argc > 1 ? std::string_view(argv[1]) : std::string_view();
  if (first == "--help" || first == "-h" || (first == "help" && argc == 2)) {
    std::fputs(usage().c_str(), stdout);
    return vbucket::cli::exit_ok;
  }
  // `vbucket help <command>` is `vbucket <command> --help`.
  const std::string_view name = first == "help" ? std::string_view(argv[2]) : first;
  const command* c = argc > 1 ? find_command(name) : nullptr;
  if (c == nullptr) {
    return vbucket::cli::run_main("", [&]() -> int {
      if (argc < 2) throw usage_error("no command given (commands: " + command_names() + ")");
      throw usage_error("unknown command \"" + std::string(name) +
                        "\" (commands: " + command_names() + ")");
    });
  }
  if (first == "help") {
    char help_flag[] = "--help";
    char* help_argv[] = {argv[2], help_flag, nullptr};
    return c->run(2, help_argv);
  }
  return c->run(argc - 1, argv + 1);
}
