#pragma once
/// One positional argument before the flags (`vbucket scan DIR --out X`): split off so that
/// the shared flag parser sees only flags.

#include <string>       // std::string
#include <string_view>  // std::string_view

namespace vbucket::cli {

struct positional_args {
  std::string_view positional;  ///< empty when none was given
  int argc = 0;                 ///< the rest, with argv[0] the subcommand's name
  char** argv = nullptr;
};

/// argv[1] is the positional argument unless it starts with '-'.
inline positional_args split_positional(int argc, char** argv) {
  if (argc > 1 && argv[1][0] != '-' && argv[1][0] != '\0') {
    const std::string_view positional = argv[1];
    argv[1] = argv[0];  // the parser skips argv[0]
    return {positional, argc - 1, argv + 1};
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
