#pragma once
/// Paths of the data files the suites read: tests/data/ (`VBUCKET_TEST_DATA_DIR`, defined for
/// the test executables) and the examples' bundled metadata.

#include <string>  // std::string

namespace vbucket_test {

/// `file` in tests/data/.
[[nodiscard]] inline std::string test_data(const std::string& file) {
  return std::string(VBUCKET_TEST_DATA_DIR) + "/" + file;
}

/// examples/data/sample_meta.csv, the bundled sample metadata.
[[nodiscard]] inline std::string sample_meta_csv() {
  return test_data("../../examples/data/sample_meta.csv");
}

}  // namespace vbucket_test
