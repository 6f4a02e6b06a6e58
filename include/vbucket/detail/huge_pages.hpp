#pragma once
/// Transparent huge pages for the planner's large arrays (Linux; a no-op elsewhere). A keyed
/// shuffle or a counting sort's scatter touches a gigabyte array at random: with 4 KiB pages
/// nearly every access misses the TLB (a page walk per element), with 2 MiB pages the whole
/// array fits in it. The kernel's default ("madvise") gives huge pages only to memory advised
/// so; advice never changes what memory holds, so it is safe on any buffer, and a failure
/// (an old kernel, THP off) leaves the pages as they were.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uintptr_t

#if defined(__linux__)
#include <sys/mman.h>  // madvise, MADV_HUGEPAGE
#endif

namespace vbucket::detail {

/// Arrays smaller than this are left alone (they fit the TLB's reach with small pages).
inline constexpr std::size_t huge_pages_from = std::size_t{16} << 20;

/// How huge pages are asked for.
enum class huge_advice {
  /// Memory not yet touched gets huge pages when first written (MADV_HUGEPAGE).
  before_touch,
  /// As above, and memory already written is moved to huge pages now (MADV_COLLAPSE, Linux
  /// 6.1 on; a copy of the array, worth it before random access to all of it).
  collapse,
};

/// Asks for huge pages over the whole 2 MiB pages inside [p, p + bytes), when bytes ≥
/// `huge_pages_from`.
inline void advise_huge_pages(const void* p, std::size_t bytes,
                              huge_advice how = huge_advice::before_touch) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p == nullptr || bytes < huge_pages_from) return;
  constexpr std::uintptr_t huge = std::uintptr_t{2} << 20;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t begin = (at + huge - 1) & ~(huge - 1);
  const std::uintptr_t end = (at + bytes) & ~(huge - 1);
  if (end <= begin) return;
  // NOLINTNEXTLINE(performance-no-int-to-ptr): an address range for the kernel
  void* const range = reinterpret_cast<void*>(begin);
  (void)madvise(range, end - begin, MADV_HUGEPAGE);
  if (how == huge_advice::collapse) {
    constexpr int madv_collapse = 25;  // MADV_COLLAPSE (Linux 6.1), absent from older headers
    (void)madvise(range, end - begin, madv_collapse);
  }
#else
  (void)p;
  (void)bytes;
  (void)how;
#endif
}

}  // namespace vbucket::detail
