#pragma once
/// `vbucket::u128`, the unsigned 128-bit integer of NumPy's seed arithmetic and of exact
/// products of sizes (a GCC/Clang extension; `__extension__` keeps -Wpedantic quiet).

namespace vbucket {

/// Unsigned 128-bit integer.
__extension__ typedef unsigned __int128 u128;

}  // namespace vbucket
