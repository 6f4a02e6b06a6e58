#pragma once
/// A temporary directory for a test's files, removed with everything in it at the end of the test.

#include <cstdint>       // std::uintptr_t
#include <filesystem>    // std::filesystem
#include <fstream>       // std::ofstream
#include <random>        // std::random_device
#include <string>        // std::string
#include <system_error>  // std::error_code

namespace vbucket_test {

/// `name` in the system's temporary directory behind a prefix no other process picks (test
/// binaries of several builds may run at once and share the directory).
[[nodiscard]] inline std::string unique_temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("vbucket_" + std::to_string(std::random_device{}()) + "_" + name))
      .string();
}

struct temp_dir {
  std::filesystem::path path;

  /// A fresh directory under the system's temporary directory; `tag` names the suite.
  explicit temp_dir(const std::string& tag) {
    path = std::filesystem::temp_directory_path() /
           ("vbucket_" + tag + "_" + std::to_string(std::random_device{}()) + "_" +
            std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    std::filesystem::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  /// Writes `text` to `name` in the directory and returns its path.
  [[nodiscard]] std::string write(const std::string& name, const std::string& text) const {
    const std::filesystem::path p = path / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
};

}  // namespace vbucket_test
