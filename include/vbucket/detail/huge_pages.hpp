#pragma once
/// Transparent huge pages for the planner's large arrays (Linux; a no-op elsewhere). A keyed
/// shuffle or a counting sort's scatter touches a gigabyte array at random: with 4 KiB pages
/// nearly every access misses the TLB (a page walk per element), with 2 MiB pages the whole
/// array fits in it. The kernel's default ("madvise") gives huge pages only to memory advised
/// so; advice never changes what memory holds, so it is safe on any buffer, and a failure
/// (an old kernel, THP off) leaves the pages as they were.
///
/// Not used by the planner for now: advising the counting sort's destination before it is
/// written and the keyed shuffles' arrays gave plan/scale/10^8 about 10 % (1.12 against 1.25 s,
/// medians of 5 and 4 runs), but plan/scale/10^9 lost (36.9 and 46.2 s against 27.4 and 30.1 s,
/// two runs each, loaded 2-core machine), and MADV_COLLAPSE before a shuffle lost at 10^8 (2.5 to
/// 2.8 s against 1.1 to 1.25). Measure on a quiet machine before wiring it in.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uintptr_t

#if defined(__linux__)
#include <sys/mman.h>  // madvise, MADV_HUGEPAGE
#endif

namespace vbucket::detail {

/// Arrays smaller than this are left alone (they fit the TLB's reach with small pages).
inline constexpr std::size_t huge_pages_from = std::size_t{16} << 20;

/// Asks for huge pages over the whole 2 MiB pages inside [p, p + bytes), when bytes ≥
/// `huge_pages_from` (MADV_HUGEPAGE). Memory not yet touched then gets huge pages when first
/// written; memory already written keeps its pages until the kernel's background collapse.
/// (Collapsing it on the spot, MADV_COLLAPSE, copies the array: measured, it cost the planner
/// more than the walks it saves.)
inline void advise_huge_pages(const void* p, std::size_t bytes) noexcept {
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
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace vbucket::detail
