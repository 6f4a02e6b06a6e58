#pragma once
/// Reading a profile of training steps (`vbucket fit-bs --profile PROFILE.csv`): one row per
/// profiled step, columns resolution, frames, batch_size, peak_memory_gib (or "oom") and
/// step_seconds in any order, as `profile_point`s for `fit_memory_model`,
/// `fit_time_model` and `rescale_batch_sizes`. Errors name the file, the row and the column.
///
///     auto buckets = vbucket::batch_buckets(config);
///     auto profile = vbucket::eigen::read_profile("profile.csv", buckets,
///                                                 vbucket::opensora_v2_tables{}, {});

#include <charconv>      // std::from_chars
#include <cmath>         // std::isfinite
#include <cstddef>       // std::size_t
#include <cstdint>       // std::int64_t
#include <span>          // std::span
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <vector>        // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/bucket/aspect.hpp"
#include "vbucket/bucket/batch_size.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/bucket/csv.hpp"
#include "vbucket/eigen/cost_model.hpp"

namespace vbucket::eigen {

namespace detail {

/// A number field of the profile: finite and positive.
inline double positive_number(const vbucket::detail::csv_reader& reader, std::size_t column,
                              const vbucket::detail::csv_field& f, std::string_view unit) {
  const std::string_view s = vbucket::detail::trim_blanks(f.text);
  double v = 0.0;
  const char* const end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, v);
  if (s.empty())
    reader.fail(column, "is empty (expected a positive number of " + std::string(unit) + ")");
  if (ec != std::errc{} || p != end || f.escaped || !std::isfinite(v) || !(v > 0.0))
    reader.fail(column, vbucket::detail::quote_for_message(f.escaped ? f.value() : std::string(s)) +
                            " is not a positive number of " + std::string(unit));
  return v;
}

inline bool is_oom(std::string_view s) {
  s = vbucket::detail::trim_blanks(s);
  if (s.size() != 3) return false;
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return lower(s[0]) == 'o' && lower(s[1]) == 'o' && lower(s[2]) == 'm';
}

}  // namespace detail

/// Reads PROFILE.csv. Tokens of a row come from the config's bucket when it has one, else
/// from the resolution tables (a profile may measure buckets the config does not hold).
template <class Tables>
std::vector<profile_point> read_profile(const std::string& path,
                                        std::span<const batch_bucket> buckets, const Tables& tables,
                                        latent_compression c) {
  const std::string text = vbucket::detail::read_whole_file(path);
  vbucket::detail::csv_reader reader(text, path);
  std::vector<vbucket::detail::csv_field> fields;
  constexpr std::string_view required[] = {"resolution", "frames", "batch_size", "peak_memory_gib",
                                           "step_seconds"};
  constexpr std::size_t n_required = 5;
  if (!reader.next(fields))
    throw error(path +
                ": empty file: expected a header row naming resolution, frames, "
                "batch_size, peak_memory_gib and step_seconds");
  constexpr std::size_t npos = static_cast<std::size_t>(-1);
  std::size_t column_of[n_required] = {npos, npos, npos, npos, npos};
  std::vector<std::string> names;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    names.push_back(std::string(vbucket::detail::trim_blanks(fields[i].value())));
    for (std::size_t r = 0; r < n_required; ++r) {
      if (names.back() != required[r]) continue;
      if (column_of[r] != npos)
        reader.fail("duplicate column \"" + std::string(required[r]) + "\"");
      column_of[r] = i;
    }
  }
  std::string missing;
  for (std::size_t r = 0; r < n_required; ++r)
    if (column_of[r] == npos)
      missing += (missing.empty() ? "\"" : ", \"") + std::string(required[r]) + "\"";
  if (!missing.empty())
    reader.fail("missing required column" +
                std::string(missing.find(',') == std::string::npos ? " " : "s ") + missing +
                " (needed: resolution,frames,batch_size,peak_memory_gib,step_seconds in any "
                "order)");
  reader.set_columns(names);

  std::vector<profile_point> profile;
  while (reader.next(fields)) {
    if (fields.size() != names.size())
      reader.fail(std::to_string(fields.size()) + (fields.size() == 1 ? " field" : " fields") +
                  ", but the header has " + std::to_string(names.size()) + " columns");
    const std::size_t res_col = column_of[0];
    const std::string resolution(vbucket::detail::trim_blanks(fields[res_col].value()));
    if (resolution.empty()) reader.fail(res_col, "is empty (expected a resolution name)");
    profile_point p;
    const std::int64_t frames = vbucket::detail::csv_size(
        reader, column_of[1], fields[column_of[1]], bucket_config::max_frames);
    p.batch_size = vbucket::detail::csv_size(reader, column_of[2], fields[column_of[2]],
                                             bucket_config::max_batch);
    const auto known = find_batch_bucket(buckets, resolution, frames);
    try {
      if (known < buckets.size()) {
        p.tokens = buckets[known].tokens;
      } else {
        const resolution_info info = tables.resolve(resolution);
        const auto& largest = info.table[info.table.largest()];
        p.tokens = token_count(frames, largest.height, largest.width, c);
      }
    } catch (const error& e) {
      reader.fail(res_col, e.what());
    }
    const auto& memory = fields[column_of[3]];
    const auto& step = fields[column_of[4]];
    if (detail::is_oom(memory.text)) {
      p.oom = true;  // the step time of an OOM row is ignored
    } else {
      p.peak_memory_gib = detail::positive_number(reader, column_of[3], memory, "GiB (or \"oom\")");
      p.step_seconds = detail::positive_number(reader, column_of[4], step, "seconds");
    }
    profile.push_back(p);
  }
  if (profile.empty()) throw error(path + ": no data rows (a fit needs profiled steps)");
  return profile;
}

}  // namespace vbucket::eigen
