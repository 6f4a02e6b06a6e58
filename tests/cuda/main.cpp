/// The CUDA tests' main: runs doctest when a CUDA device is usable, otherwise says why and
/// exits 77, which ctest reports as "Skipped" (SKIP_RETURN_CODE).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>  // std::printf
#include <string>  // std::string

#include "vbucket/cuda/pinned_backend.hpp"

int main(int argc, char** argv) {
  std::string why;
  if (!vbucket::cuda::device_available(&why)) {
    std::printf("vbucket_cuda_tests: skipped, no usable CUDA device (%s)\n", why.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
