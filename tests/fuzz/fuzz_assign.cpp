/// Fuzzes bucket assignment with arbitrary metadata: NaN, ±inf, 0, negatives and values near
/// the integer limits, through both Open-Sora rules with both random sources, `assign_all`,
/// `assign_range` (over a user type with floating-point fields) and `group_by_bucket`, on the
/// bundled configs or a fuzzed user table. Checks that every id is in range and means what it
/// says, that results do not depend on the path taken, and that grouping loses nothing.

#include <algorithm>    // std::min
#include <cmath>        // std::isnan
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t, std::uint64_t
#include <limits>       // std::numeric_limits
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include <fuzzer/FuzzedDataProvider.h>

#include "fuzz_common.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/base/numpy_random.hpp"
#include "vbucket/base/random.hpp"
#include "vbucket/bucket/aspect.hpp"
#include "vbucket/bucket/assign.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/bucket/meta.hpp"
#include "vbucket/bucket/rules.hpp"
#include "vbucket/json/bucket_config.hpp"
#include "vbucket/plan/group.hpp"

namespace {

using limits64 = std::numeric_limits<std::int64_t>;
using dlimits = std::numeric_limits<double>;

constexpr std::string_view config_360p = R"({"360p": {"1": [0.2, 141], "51": [0.15, 8],
  "102": [[0.15, 0.33], 4], "204": [[0.15, 0.1], 2], "408": [[0.15, 0.1], 1]}})";
constexpr std::string_view config_v2 = R"({
  "256px": {"1": [1.0, 45], "5": [1.0, 12], "33": [1.0, 12], "65": [1.0, 6],
            "97": [[0.5, 0.5], 4], "129": [[0.5, 0.3], 3]},
  "768px": {"1": [0.5, 13], "33": [[0.5, 0.5], 2], "65": [[0.3, 0.5], 1], "129": [[0.2, 0.6], 1]},
  "1024px": {"1": [0.5, 7]}, "1024px_max": {"1": [1.0, 1], "2": [0.0, null]},
  "480p_ar16:9": {"16": [[1.0, 0.0], 3], "8": [[0.0, 1.0], 3]}})";
constexpr std::string_view config_v12 = R"({
  "144p": {"1": [1.0, 475], "51": [1.0, 51], "102": [1.0, 27], "204": [1.0, 13], "408": [1.0, 6]},
  "240p": {"1": [1.0, 297], "51": [0.5, 20], "102": [0.5, 10], "204": [0.5, 5],
           "408": [[0.5, 0.4], 2]},
  "480p": {"1": [1.0, 89], "51": [0.5, 5], "102": [0.5, 3], "204": [[0.5, 0.5], 1],
           "408": [0.0, null]},
  "720p": {"1": [0.3, 36], "51": [0.2, 2], "102": [0.1, 1], "204": [0.0, null]},
  "2048": {"1": [0.05, 5]}})";

/// A user's sample type whose sizes are floating point (as a pandas column with a NaN is).
struct float_clip {
  double num_frames, height, width;
  float fps;
};
static_assert(vbucket::video_meta<float_clip>);

std::int64_t pick_size(FuzzedDataProvider& in) {
  static constexpr std::int64_t special[] = {0,
                                             1,
                                             -1,
                                             2,
                                             limits64::min(),
                                             limits64::max(),
                                             limits64::max() - 1,
                                             std::int64_t{1} << 24,
                                             (std::int64_t{1} << 24) + 1,
                                             std::int64_t{1} << 31,
                                             std::int64_t{1} << 32,
                                             3037000500,  // sqrt(2^63)
                                             360,
                                             640,
                                             1080,
                                             1920};
  const auto sel = in.ConsumeIntegral<std::uint8_t>();
  if (sel < 2 * std::size(special)) return special[sel % std::size(special)];
  if (sel < 200) return in.ConsumeIntegralInRange<std::int64_t>(-4, 4096);
  return in.ConsumeIntegral<std::int64_t>();
}

double pick_double(FuzzedDataProvider& in) {
  static constexpr double special[] = {dlimits::quiet_NaN(),
                                       -dlimits::quiet_NaN(),
                                       dlimits::infinity(),
                                       -dlimits::infinity(),
                                       0.0,
                                       -0.0,
                                       16.0,
                                       15.999999999999998,
                                       16.000000000000004,
                                       23.976,
                                       29.97,
                                       1e308,
                                       dlimits::max(),
                                       dlimits::denorm_min(),
                                       dlimits::min(),
                                       -1.0,
                                       -16.0,
                                       9.2233720368547758e18,
                                       -9.2233720368547758e18,
                                       1.8446744073709552e19};
  const auto sel = in.ConsumeIntegral<std::uint8_t>();
  if (sel < 2 * std::size(special)) return special[sel % std::size(special)];
  if (sel < 200) return in.ConsumeFloatingPointInRange<double>(-1.0, 240.0);
  return in.ConsumeFloatingPoint<double>();
}

/// A user table config built from fuzz bytes; nullopt when it is (rightly) rejected.
std::optional<vbucket::bucket_config> user_config(FuzzedDataProvider& in) {
  try {
    vbucket::user_tables tables;
    std::vector<vbucket::bucket_spec> specs;
    const int resolutions = in.ConsumeIntegralInRange(1, 3);
    for (int r = 0; r < resolutions; ++r) {
      std::vector<vbucket::aspect_entry> entries;
      const int n = in.ConsumeIntegralInRange(1, 8);
      for (int e = 0; e < n; ++e) {
        const double ratio = pick_double(in);
        entries.push_back(
            {"r" + std::to_string(e), ratio, in.ConsumeIntegral<int>(), in.ConsumeIntegral<int>()});
      }
      const std::string name = "res" + std::to_string(r);
      tables.add(name, pick_size(in), vbucket::aspect_table(std::move(entries), name));
      const int keys = in.ConsumeIntegralInRange(1, 4);
      for (int k = 0; k < keys; ++k) {
        vbucket::bucket_spec s;
        s.resolution = name;
        s.frames = pick_size(in);
        s.p_resolution = pick_double(in);
        if (in.ConsumeBool()) s.p_frames = pick_double(in);
        if (in.ConsumeBool()) s.batch_size = pick_size(in);
        specs.push_back(s);
      }
    }
    return vbucket::bucket_config(specs, tables);
  } catch (const vbucket::error& e) {
    vbucket_fuzz::check_message(e.what(), "");
    return std::nullopt;
  }
}

std::optional<vbucket::bucket_config> pick_config(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0:
      return vbucket::json::parse_bucket_config(config_360p, vbucket::opensora_v2_tables{}, "c");
    case 1:
      return vbucket::json::parse_bucket_config(config_v2, vbucket::opensora_v2_tables{}, "c");
    case 2:
      return vbucket::json::parse_bucket_config(config_v12, vbucket::opensora_v12_tables{}, "c");
    default:
      return user_config(in);
  }
}

/// What an assigned id must mean, whatever the rule: the sample is valid and big enough for
/// the resolution, the frames key fits, and the ratio is the closest one.
void check_id(const vbucket::bucket_config& c, const vbucket::sample_meta& m, vbucket::bucket_id id,
              std::int64_t usable_frames) {
  VBUCKET_FUZZ_CHECK(id == vbucket::no_bucket || id == vbucket::invalid_sample ||
                     (id >= 0 && static_cast<std::size_t>(id) < c.num_buckets()));
  VBUCKET_FUZZ_CHECK((id == vbucket::invalid_sample) == !vbucket::detail::valid_meta(m));
  if (id < 0) return;
  const auto& res = c.resolution_of(id);
  VBUCKET_FUZZ_CHECK(static_cast<double>(m.height) * static_cast<double>(m.width) >=
                     res.min_pixels);
  const auto frames = c.frames_of(id).frames;
  VBUCKET_FUZZ_CHECK(frames <= usable_frames);
  VBUCKET_FUZZ_CHECK((frames == 1) == (usable_frames == 1));
  const auto ratio = static_cast<std::size_t>(c.key(id).ratio_index);
  VBUCKET_FUZZ_CHECK(ratio == res.info.table.closest(m.height, m.width));
  VBUCKET_FUZZ_CHECK(ratio == res.info.table.linear_closest(static_cast<double>(m.height) /
                                                            static_cast<double>(m.width)));
}

void check_groups(const std::vector<vbucket::bucket_id>& ids, std::size_t num_buckets) {
  const auto g = vbucket::group_by_bucket(ids, num_buckets);
  VBUCKET_FUZZ_CHECK(g.num_buckets() == num_buckets);
  VBUCKET_FUZZ_CHECK(g.assigned() + g.unassigned + g.invalid == ids.size());
  std::vector<bool> seen(ids.size(), false);
  for (std::size_t b = 0; b < num_buckets; ++b) {
    const auto members = g.bucket(static_cast<vbucket::bucket_id>(b));
    VBUCKET_FUZZ_CHECK(members.size() == g.count(static_cast<vbucket::bucket_id>(b)));
    for (std::size_t k = 0; k < members.size(); ++k) {
      const auto i = members[k];
      VBUCKET_FUZZ_CHECK(i < ids.size() && !seen[i]);
      VBUCKET_FUZZ_CHECK(ids[i] == static_cast<vbucket::bucket_id>(b));
      VBUCKET_FUZZ_CHECK(k == 0 || members[k - 1] < i);
      seen[i] = true;
    }
  }
}

template <class Rule, class Source>
void run_rule(const vbucket::bucket_config& c, const vbucket::meta_table& table,
              const std::vector<float_clip>& clips, const Rule& rule, const Source& source,
              bool rule_valid) {
  const auto ids = vbucket::assign_all(c, table, rule, source, 1);
  VBUCKET_FUZZ_CHECK(ids == vbucket::assign_all(c, table, rule, source, 3));
  std::vector<vbucket::sample_meta> rows;
  for (std::size_t i = 0; i < table.size(); ++i) rows.push_back(table[i]);
  VBUCKET_FUZZ_CHECK(ids == vbucket::assign_range(c, rows, rule, source, 2));
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto m = table[i];
    VBUCKET_FUZZ_CHECK(rule.assign(c, m, i, source) == ids[i]);
    if (!rule_valid) continue;
    std::int64_t usable = m.num_frames;
    if constexpr (requires { rule.fps_max; }) {
      usable = rule.effective_frames(m.num_frames, m.fps);
    } else if (m.num_frames > 1) {
      usable = (m.num_frames - 1) / rule.frame_interval;  // T > t · interval
    }
    check_id(c, m, ids[i], usable);
  }
  check_groups(ids, c.num_buckets());
  const auto float_ids = vbucket::assign_range(c, clips, rule, source, 1);
  VBUCKET_FUZZ_CHECK(float_ids.size() == clips.size());
  for (const auto id : float_ids)
    VBUCKET_FUZZ_CHECK(id == vbucket::no_bucket || id == vbucket::invalid_sample ||
                       (id >= 0 && static_cast<std::size_t>(id) < c.num_buckets()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const auto config = pick_config(in);
  if (!config) return 0;
  vbucket::opensora_v2_rule v2{.fps_max = pick_double(in)};
  vbucket::opensora_v12_rule v12{.frame_interval = pick_size(in)};
  bool v2_valid = true, v12_valid = true;
  try {
    v2.validate();
  } catch (const vbucket::error& e) {
    vbucket_fuzz::check_message(e.what(), "fps_max");
    v2_valid = false;
  }
  try {
    v12.validate();
  } catch (const vbucket::error& e) {
    vbucket_fuzz::check_message(e.what(), "frame_interval");
    v12_valid = false;
  }
  const auto seed = in.ConsumeIntegral<std::uint64_t>();
  const auto epoch = in.ConsumeIntegral<std::uint64_t>();

  vbucket::meta_table table;
  std::vector<float_clip> clips;
  while (in.remaining_bytes() > 0 && table.size() < 256) {
    vbucket::sample_meta m{pick_size(in), pick_size(in), pick_size(in), pick_double(in)};
    try {
      table.push_back(m);
    } catch (const vbucket::error& e) {
      // A size beyond 32 bits: refused with the row named, the table unchanged. The row goes in
      // with that size at the most a table holds (still a size the rules must handle).
      vbucket_fuzz::check_message(e.what(), "meta_table: row ");
      constexpr std::int64_t most = vbucket::meta_table::max_size;
      VBUCKET_FUZZ_CHECK(m.num_frames > most || m.height > most || m.width > most);
      m.num_frames = std::min(m.num_frames, most);
      m.height = std::min(m.height, most);
      m.width = std::min(m.width, most);
      table.push_back(m);
    }
    clips.push_back({pick_double(in), pick_double(in), pick_double(in),
                     static_cast<float>(in.ConsumeFloatingPoint<float>())});
  }

  const vbucket::fast_source fast(seed, epoch);
  const vbucket::numpy_source numpy(vbucket::big_seed(seed), config->num_buckets());
  run_rule(*config, table, clips, v2, fast, v2_valid);
  run_rule(*config, table, clips, v2, numpy, v2_valid);
  run_rule(*config, table, clips, v12, fast, v12_valid);
  run_rule(*config, table, clips, v12, numpy, v12_valid);
  return 0;
}
