#pragma once
/// Run-time dispatch to vbucket's AVX2 paths: whether the build has them
/// (`VBUCKET_AVX2_DISPATCH`), whether this CPU runs them (`detail::cpu_has_avx2`), and which
/// path a caller asks for (`simd_path`; tests and benchmarks force one to compare them).

/// 1 where vbucket has its AVX2 paths (x86 with GCC or Clang), chosen at run time by the CPU,
/// so the library still builds for baseline x86-64 and for other architectures. Define
/// VBUCKET_NO_SIMD to leave them out.
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDACC__) && !defined(VBUCKET_NO_SIMD)
#define VBUCKET_AVX2_DISPATCH 1
#else
#define VBUCKET_AVX2_DISPATCH 0
#endif

namespace vbucket {

/// Which code a vectorised routine runs (`compiled_v2_rule::assign_rows`,
/// `numpy_source::seed_streams`): the vector path where the CPU has it (`automatic`), or one
/// forced (tests and benchmarks compare them).
enum class simd_path { automatic, scalar, avx2 };

namespace detail {
/// Whether this CPU runs AVX2 code (false where vbucket has no AVX2 path).
inline bool cpu_has_avx2() noexcept {
#if VBUCKET_AVX2_DISPATCH
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
#else
  return false;
#endif
}

/// Whether a routine asked for `path` takes its AVX2 code.
inline bool use_avx2(simd_path path) noexcept {
  return path != simd_path::scalar && cpu_has_avx2();
}
}  // namespace detail

}  // namespace vbucket
