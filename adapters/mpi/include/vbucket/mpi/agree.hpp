#pragma once
/// Plan agreement: every rank of a job computes the epoch plan alone (it is a pure function of
/// metadata, config, seed and epoch), so nothing is broadcast; instead the ranks compare a
/// 64-bit fingerprint of what they computed (`batch_sampler::fingerprint()`). One collective
/// call; on a mismatch, or when a rank could not compute its value at all, every rank throws
/// the same `vbucket::error` naming the ranks concerned: no rank is left waiting in a
/// collective that another rank never reaches.
///
///     vbucket::mpi::agree(comm, sampler.fingerprint());   // throws on every rank, or on none
///     // or, when computing the value itself may fail on some ranks:
///     auto fp = vbucket::mpi::agree_on(comm, [&] { return make_sampler().fingerprint(); });

#include <algorithm>    // std::sort
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t, std::uint32_t
#include <cstdio>       // std::snprintf
#include <exception>    // std::exception
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include <mpi.h>

#include "vbucket/base/error.hpp"
#include "vbucket/mpi/communicator.hpp"

namespace vbucket::mpi {

namespace detail {

/// "0-3,5,9-10": sorted ranks as ranges, at most `limit` ranges (then ", ... (N ranks)").
inline std::string rank_list(const std::vector<std::uint32_t>& ranks, std::size_t limit = 16) {
  std::string out;
  std::size_t ranges = 0, i = 0;
  while (i < ranks.size()) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (ranges == limit) {
      out += ",... (" + std::to_string(ranks.size()) + " ranks)";
      break;
    }
    if (ranges > 0) out += ",";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    ++ranges;
    i = j + 1;
  }
  return out;
}

inline std::string ranks_named(const std::vector<std::uint32_t>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks);
}

inline std::string hex64(std::uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(v));
  return text;
}

/// The longest message a failed rank contributes (the rest is cut).
inline constexpr std::size_t max_message = 1000;

/// The one collective of an agreement: every rank contributes `value`, or (failed) its error
/// message. Returns on every rank when all succeeded with equal values; else throws the same
/// error on every rank.
inline void exchange(const communicator& comm, std::uint64_t value, bool failed,
                     std::string message, std::string_view what) {
  const std::uint32_t world = comm.size();
  if (message.size() > max_message) message.resize(max_message);
  // Per rank: the value, then (failed << 32 | message length).
  const std::uint64_t mine[2] = {value, (std::uint64_t{failed} << 32) | message.size()};
  std::vector<std::uint64_t> all(2 * std::size_t{world});
  check(MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, comm.get()),
        "MPI_Allgather");
  std::vector<std::uint32_t> failed_ranks;
  for (std::uint32_t r = 0; r < world; ++r)
    if ((all[2 * r + 1] >> 32) != 0) failed_ranks.push_back(r);

  if (!failed_ranks.empty()) {
    // Every rank needs the messages to throw the same error: a second collective, reached by
    // every rank because every rank saw the same flags.
    std::vector<int> counts(world), displs(world);
    int total = 0;
    for (std::uint32_t r = 0; r < world; ++r) {
      counts[r] = static_cast<int>(all[2 * r + 1] & 0xffffffffu);
      displs[r] = total;
      total += counts[r];
    }
    std::string text(static_cast<std::size_t>(total), '\0');
    check(MPI_Allgatherv(message.data(), static_cast<int>(message.size()), MPI_CHAR, text.data(),
                         counts.data(), displs.data(), MPI_CHAR, comm.get()),
          "MPI_Allgatherv");
    auto message_of = [&](std::uint32_t r) {
      return text.substr(static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(counts[r]));
    };
    const std::uint32_t first = failed_ranks.front();
    // One process, or every rank failing the same way (the same bad flag given to all): the
    // message alone says it.
    if (world == 1) throw vbucket::error(message_of(first));
    bool same = failed_ranks.size() == world;
    for (std::uint32_t r = 1; same && r < world; ++r) same = message_of(r) == message_of(0);
    if (same)
      throw vbucket::error("vbucket::mpi: all " + std::to_string(world) +
                           " ranks failed before agreeing on the " + std::string(what) + ": " +
                           message_of(0));
    throw vbucket::error("vbucket::mpi: " + ranks_named(failed_ranks) + " of " +
                         std::to_string(world) + " failed before agreeing on the " +
                         std::string(what) + "; rank " + std::to_string(first) + ": " +
                         message_of(first));
  }

  // Group the ranks by value; the reference is the most common value (ties: the one of the
  // lowest rank), and every other rank disagrees.
  std::vector<std::uint64_t> values;
  std::vector<std::vector<std::uint32_t>> holders;
  for (std::uint32_t r = 0; r < world; ++r) {
    const std::uint64_t v = all[2 * r];
    std::size_t g = 0;
    while (g < values.size() && values[g] != v) ++g;
    if (g == values.size()) {
      if (values.size() == 8) {  // enough to say what is wrong; the rest share the last group
        g = values.size() - 1;
      } else {
        values.push_back(v);
        holders.emplace_back();
      }
    }
    holders[g].push_back(r);
  }
  if (values.size() == 1) return;
  std::size_t ref = 0;
  for (std::size_t g = 1; g < values.size(); ++g)
    if (holders[g].size() > holders[ref].size()) ref = g;
  std::vector<std::uint32_t> disagreeing;
  for (std::size_t g = 0; g < values.size(); ++g)
    if (g != ref) disagreeing.insert(disagreeing.end(), holders[g].begin(), holders[g].end());
  std::sort(disagreeing.begin(), disagreeing.end());
  std::string line = "vbucket::mpi: " + ranks_named(disagreeing) + " of " + std::to_string(world) +
                     " disagree on the " + std::string(what) + ": ";
  for (std::size_t g = 0; g < values.size(); ++g) {
    if (g == ref) continue;
    line += hex64(values[g]) + " on " + ranks_named(holders[g]) + ", ";
  }
  line += hex64(values[ref]) + " on " + ranks_named(holders[ref]) +
          (holders[ref].size() > 1 ? " (the most common)" : "");
  throw vbucket::error(line);
}

}  // namespace detail

/// Compares `fingerprint` across the ranks of `comm` (collective: every rank calls it once).
/// Returns when all are equal; otherwise throws `vbucket::error` on every rank, naming the
/// ranks that differ from the most common value and the values. `what` names the value in
/// the message.
inline void agree(const communicator& comm, std::uint64_t fingerprint,
                  std::string_view what = "plan fingerprint") {
  detail::exchange(comm, fingerprint, false, {}, what);
}

/// This rank's side of an agreement when it could not compute its value: the other ranks'
/// `agree` (or `agree_failed`) calls return instead of waiting, and every rank, this one too,
/// throws one `vbucket::error` naming the failed ranks and the first one's `message`.
[[noreturn]] inline void agree_failed(const communicator& comm, std::string_view message,
                                      std::string_view what = "plan fingerprint") {
  detail::exchange(comm, 0, true, std::string(message), what);
  // exchange returns only when no rank failed, and this one did.
  throw vbucket::error("vbucket::mpi: unreachable");
}

/// Computes the value with `compute()` and agrees on it; an exception from `compute` on any
/// rank becomes the error every rank throws. Returns the agreed value.
template <class Compute>
std::uint64_t agree_on(const communicator& comm, Compute&& compute,
                       std::string_view what = "plan fingerprint") {
  std::uint64_t value = 0;
  std::string message;
  bool failed = false;
  try {
    value = static_cast<std::uint64_t>(compute());
  } catch (const std::exception& e) {
    failed = true;
    message = e.what();
  } catch (...) {
    failed = true;
    message = "an exception that is not a std::exception";
  }
  detail::exchange(comm, value, failed, std::move(message), what);
  return value;
}

}  // namespace vbucket::mpi
