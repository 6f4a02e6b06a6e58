/// The CUDA tests' main (vbucket_cuda_tests, vbucket_nvdec_tests): runs doctest when a CUDA device
/// is usable, otherwise says why and exits 77, which ctest reports as "Skipped" (SKIP_RETURN_CODE).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>  // std::printf
#include <string>  // std::string

#include "vbucket/cuda/pinned_backend.hpp"

int main(int argc, char** argv) {
  std::string why;
  if (!vbucket::cuda::device_available(&why)) {
    const std::string self = argc > 0 ? argv[0] : "vbucket_cuda_tests";
    std::printf("%s: skipped, no usable CUDA device (%s)\n",
                self.substr(self.find_last_of('/') + 1).c_str(), why.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
