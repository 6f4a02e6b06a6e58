/// Fuzzes the frame index reader (`vbucket::ffmpeg::frame_index::parse`, the sidecar of
/// `vbucket scan --index`) on arbitrary bytes. Bad input must throw `vbucket::error` with one
/// line naming the file; an index that parses must hold only what the format allows (keyframes
/// in order and below the frame count, positive sizes, one packet per frame in output order)
/// and write back to the same bytes.

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint8_t, std::int64_t
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "fuzz_common.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/ffmpeg/frame_index.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace ff = vbucket::ffmpeg;
  const std::span<const std::uint8_t> bytes(data, size);
  try {
    const ff::frame_index idx = ff::frame_index::parse(bytes, "fuzz.vbidx");
    for (const ff::file_index& f : idx.files()) {
      VBUCKET_FUZZ_CHECK(!f.path.empty() && f.time_num > 0 && f.time_den > 0 && f.frames >= 0);
      VBUCKET_FUZZ_CHECK(idx.find(f.path) == &f);
      if (f.output_order) {
        VBUCKET_FUZZ_CHECK(f.keys.empty() && f.no_pts_from < f.frames);
        VBUCKET_FUZZ_CHECK(static_cast<std::int64_t>(f.packets.size()) == f.frames);
        for (const ff::index_packet& p : f.packets) VBUCKET_FUZZ_CHECK(p.size > 0);
      } else {
        VBUCKET_FUZZ_CHECK(f.packets.empty() && f.no_pts_from == f.frames);
        std::int64_t last = -1;
        for (const ff::index_key& k : f.keys) {
          VBUCKET_FUZZ_CHECK(k.frame > last && k.frame < f.frames && k.size > 0);
          last = k.frame;
        }
      }
    }
    // What parses is exactly what writing it back gives.
    const std::string back = idx.serialize();
    VBUCKET_FUZZ_CHECK(back == std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const vbucket::error& e) {
    const std::string_view what = e.what();
    VBUCKET_FUZZ_CHECK(what.find("fuzz.vbidx") != std::string_view::npos);
    VBUCKET_FUZZ_CHECK(what.find('\n') == std::string_view::npos);
  }
  return 0;
}
