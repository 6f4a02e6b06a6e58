/// Fuzzes bucket-config loading: `vbucket::json::parse_bucket_config` on arbitrary text with
/// both table generations (Open-Sora 2.0's formula at two spatial compressions, and v1.2's
/// fixed tables). Bad input must throw `vbucket::error` with one line naming the file (any
/// other exception escapes and counts as a crash); a config that loads must be consistent and
/// survive a write-and-reload round trip unchanged.

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint8_t
#include <string>       // std::string
#include <string_view>  // std::string_view

#include <nlohmann/json.hpp>

#include "fuzz_common.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/bucket/aspect.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/json/bucket_config.hpp"

namespace {

constexpr std::string_view file_name = "fuzz.json";

/// The config as Open-Sora's dict, in the validated order (which reloads to the same order).
nlohmann::ordered_json to_json(const vbucket::bucket_config& c) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& r : c.resolutions()) {
    auto& frames = j[r.info.name];
    frames = nlohmann::ordered_json::object();
    for (const auto& f : r.frames) {
      nlohmann::ordered_json p = f.pair
                                     ? nlohmann::ordered_json::array({f.p_resolution, f.p_frames})
                                     : nlohmann::ordered_json(f.p_resolution);
      nlohmann::ordered_json bs =
          f.batch_size > 0 ? nlohmann::ordered_json(f.batch_size) : nlohmann::ordered_json();
      frames[std::to_string(f.frames)] = nlohmann::ordered_json::array({p, bs});
    }
  }
  return j;
}

void check_consistent(const vbucket::bucket_config& c) {
  std::size_t buckets = 0;
  std::int32_t pairs = 0;
  const auto& rs = c.resolutions();
  VBUCKET_FUZZ_CHECK(!rs.empty());
  for (std::size_t r = 0; r < rs.size(); ++r) {
    const auto& res = rs[r];
    VBUCKET_FUZZ_CHECK(res.info.pixels > 0 && res.info.table.size() > 0);
    VBUCKET_FUZZ_CHECK(r == 0 || rs[r - 1].info.pixels >= res.info.pixels);
    VBUCKET_FUZZ_CHECK(res.first_bucket == static_cast<vbucket::bucket_id>(buckets));
    VBUCKET_FUZZ_CHECK(res.first_pair == pairs);
    VBUCKET_FUZZ_CHECK(!res.frames.empty());
    std::int32_t image = -1;
    for (std::size_t k = 0; k < res.frames.size(); ++k) {
      const auto& f = res.frames[k];
      VBUCKET_FUZZ_CHECK(f.frames >= 1 && f.frames <= vbucket::bucket_config::max_frames);
      VBUCKET_FUZZ_CHECK(k == 0 || res.frames[k - 1].frames > f.frames);
      VBUCKET_FUZZ_CHECK(f.p_resolution >= 0.0 && f.p_resolution <= 1.0);
      VBUCKET_FUZZ_CHECK(f.p_frames >= 0.0 && f.p_frames <= 1.0);
      VBUCKET_FUZZ_CHECK(f.batch_size >= 0 && f.batch_size <= vbucket::bucket_config::max_batch);
      VBUCKET_FUZZ_CHECK(f.batch_size > 0 || f.p_resolution == 0.0);
      if (f.frames == 1) image = static_cast<std::int32_t>(k);
    }
    VBUCKET_FUZZ_CHECK(res.image_index == image);
    for (const auto& e : res.info.table.entries())
      VBUCKET_FUZZ_CHECK(e.height > 0 && e.width > 0 && e.ratio > 0.0);
    buckets += res.frames.size() * res.info.table.size();
    pairs += static_cast<std::int32_t>(res.frames.size());
  }
  VBUCKET_FUZZ_CHECK(c.num_buckets() == buckets);
  for (std::size_t i = 0; i < buckets; ++i) {
    const auto id = static_cast<vbucket::bucket_id>(i);
    const auto k = c.key(id);
    VBUCKET_FUZZ_CHECK(c.id_of(static_cast<std::size_t>(k.resolution),
                               static_cast<std::size_t>(k.frames_index),
                               static_cast<std::size_t>(k.ratio_index)) == id);
    VBUCKET_FUZZ_CHECK(c.enabled(id) == (c.batch_size(id) > 0));
    const auto found =
        c.find(c.resolution_of(id).info.name, c.frames_of(id).frames, c.ratio_of(id).key);
    VBUCKET_FUZZ_CHECK(found >= 0 && c.ratio_of(found).key == c.ratio_of(id).key &&
                       c.frames_of(found).frames == c.frames_of(id).frames);
  }
}

template <class Tables>
void load(std::string_view text, const Tables& tables) {
  vbucket::bucket_config config;
  try {
    config = vbucket::json::parse_bucket_config(text, tables, std::string(file_name));
  } catch (const vbucket::error& e) {
    vbucket_fuzz::check_message(e.what(), file_name);
    return;
  }
  check_consistent(config);
  const std::string again = to_json(config).dump();
  const auto reloaded = vbucket::json::parse_bucket_config(again, tables, "reloaded.json");
  VBUCKET_FUZZ_CHECK(to_json(reloaded).dump() == again);
  VBUCKET_FUZZ_CHECK(reloaded.num_buckets() == config.num_buckets());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  load(text, vbucket::opensora_v2_tables{});
  load(text, vbucket::opensora_v2_tables{.spatial_compression = 8});
  load(text, vbucket::opensora_v12_tables{});
  return 0;
}
