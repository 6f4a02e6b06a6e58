#pragma once
/// One positional argument before the flags (`vbucket scan DIR --out X`): split off so that
/// the shared flag parser sees only flags.

#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "../cli.hpp"  // flag

namespace vbucket::cli {

struct positional_args {
  std::string_view positional;  ///< empty when none was given
  int argc = 0;                 ///< the rest, with argv[0] the subcommand's name
  char** argv = nullptr;
};

/// The first argument that is neither a flag nor a flag's value (`flags` says which take one)
/// is the positional argument: `scan DIR --out X` and `scan --timeout 3 DIR --out X` alike.
inline positional_args split_positional(int argc, char** argv, std::span<const flag> flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.empty()) break;
    if (arg[0] != '-') {
      // Move it out: argv[1..i) shift up one place and argv[0] (the name) goes before them.
      for (int k = i; k > 1; --k) argv[k] = argv[k - 1];
      argv[1] = argv[0];
      return {arg, argc - 1, argv + 1};
    }
    if (!arg.starts_with("--") || arg.find('=') != std::string_view::npos) continue;
    for (const flag& f : flags)
      if (f.name == arg.substr(2) && !f.value_name.empty()) ++i;  // its value
  }
  return {std::string_view(), argc, argv};
}

/// `usage: vbucket CMD --flags` becomes `usage: vbucket CMD WORD --flags`.
inline std::string usage_with_positional(std::string_view command, std::string_view word,
                                         std::string text) {
  const std::string head = "usage: vbucket " + std::string(command);
  if (text.compare(0, head.size(), head) == 0) text.insert(head.size(), " " + std::string(word));
  return text;
}

}  // namespace vbucket::cli
