/// Fuzzes `vbucket::ffmpeg::decode_clip_memory`: the last bytes of the input choose the request
/// (start, frames, interval, target size, layout, padding; FuzzedDataProvider reads integers
/// from the end), the rest is the file. Bad input must come back as an error value with one
/// line naming the file; a clip that decodes must have filled every frame (converted or
/// padded), and no byte outside the buffer is touched (ASan).

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t, std::int64_t
#include <vector>   // std::vector

#include <fuzzer/FuzzedDataProvider.h>

#include "fuzz_common.hpp"
#include "fuzz_ffmpeg_common.hpp"
#include "vbucket/ffmpeg/decode.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  vbucket::ffmpeg::clip_request req;
  req.limits = vbucket_fuzz::fuzz_limits();
  req.start = in.ConsumeIntegralInRange<std::int64_t>(0, 40);
  req.frames = in.ConsumeIntegralInRange<std::int64_t>(1, 6);
  req.interval = in.ConsumeIntegralInRange<std::int64_t>(1, 4);
  req.height = in.ConsumeIntegralInRange<std::int64_t>(1, 48);
  req.width = in.ConsumeIntegralInRange<std::int64_t>(1, 48);
  req.layout = in.ConsumeBool() ? vbucket::ffmpeg::layout::cthw : vbucket::ffmpeg::layout::thwc;
  req.pad = in.ConsumeBool();
  const std::vector<std::uint8_t> file = in.ConsumeRemainingBytes<std::uint8_t>();
  std::vector<std::uint8_t> out(vbucket::ffmpeg::clip_bytes(req));
  VBUCKET_FUZZ_CHECK(out.size() ==
                     static_cast<std::size_t>(req.frames * req.height * req.width * 3));
  const auto r = vbucket::ffmpeg::decode_clip_memory(file, "fuzz.bin", req, out);
  if (!r.ok()) {
    vbucket_fuzz::check_message(r.error(), "fuzz.bin: ");
    return 0;
  }
  VBUCKET_FUZZ_CHECK(r->frames_converted + r->frames_padded == req.frames);
  VBUCKET_FUZZ_CHECK(r->frames_converted >= 1);
  VBUCKET_FUZZ_CHECK(req.pad || r->frames_padded == 0);
  VBUCKET_FUZZ_CHECK(r->frames_decoded >= r->frames_converted);
  return 0;
}
