/// `vbucket decode`: one clip of a video (frames start, start + interval, ...), resized and
/// center-cropped to HxW as Open-Sora does, written as raw RGB24 (THWC or CTHW).

#include <charconv>     // std::from_chars
#include <cstdint>      // std::int64_t, std::uint8_t
#include <cstdio>       // std::fputs, std::printf
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "../cli.hpp"
#include "network_flags.hpp"
#include "positional.hpp"
#include "vbucket/ffmpeg/decode.hpp"

namespace vbucket::cli {
namespace {

/// Not constexpr: the media fields' flags take their help from the run spec's table.
const flag decode_flags[] = {
    {"start", "S", true, "first frame (0-based, presentation order)"},
    {"frames", "N", true, "number of frames"},
    {"interval", "I", true, "frame interval: N frames out of the N*I from S (--frame-choice)"},
    {"frame-choice", "C", false,
     "stride: frames S, S+I, ..., S+(N-1)*I; opensora: Open-Sora's np.linspace(S, S+N*I-1, N, "
     "dtype=int) (stride)"},
    {"size", "HxW", true, "output height x width, e.g. 192x336"},
    {"out", "OUT.rgb", true, "raw RGB24 output, N*H*W*3 bytes"},
    {"threads", "T", false, "decoder threads; 0 = FFmpeg's choice (1)"},
    {"layout", "L", false, "thwc (frame, row, column, RGB) or cthw (R, G, B planes) (thwc)"},
    {"filter", "F", false, "resampling: bilinear, bicubic, area or nearest (bilinear)"},
    {"pad", "", false, "a video that ends early: repeat its last frame instead of failing"},
    {"index", "META.vbidx", false,
     "frame index from scan --index: start at a keyframe without demuxing from the start"},
    timeout_flag,
    io_timeout_flag,
    retries_flag,
    media_run_flag,
};

constexpr std::string_view decode_description =
    "Decodes frames S, S+I, ..., S+(N-1)*I of FILE (presentation order; with --frame-choice\n"
    "opensora the N frames Open-Sora's linspace takes from S to S+N*I-1), scales each so that\n"
    "HxW is covered keeping the display aspect ratio (anamorphic video stretched by its sample\n"
    "aspect ratio in the same pass), crops the middle (Open-Sora's resize-crop), honouring the\n"
    "display rotation, and writes raw RGB24 to OUT.rgb. Seeks to the keyframe\n"
    "before S and decodes only up to the last frame needed.\n"
    "Exit codes: 0 success, 1 bad data (unreadable, corrupt or too short video), 2 bad usage.";

/// "HxW", each side an integer from 1 to 16384.
void parse_size(std::string_view text, std::int64_t& h, std::int64_t& w) {
  const auto x = text.find('x');
  auto side = [&](std::string_view s, std::int64_t& v) {
    const char* end = s.data() + s.size();
    const auto [p, ec] = std::from_chars(s.data(), end, v);
    return !s.empty() && ec == std::errc{} && p == end && v >= 1 && v <= 16384;
  };
  if (x == std::string_view::npos || !side(text.substr(0, x), h) || !side(text.substr(x + 1), w))
    throw usage_error("--size: expected HxW with sides from 1 to 16384 (e.g. 192x336), got \"" +
                      std::string(text) + "\"");
}

}  // namespace

int cmd_decode(int argc, char** argv) {
  return run_main("decode", [&] {
    const positional_args p = split_positional(argc, argv, decode_flags);
    const args a = args::parse(p.argc, p.argv, decode_flags);
    if (a.help()) {
      std::fputs(usage_with_positional("decode", "FILE",
                                       usage_text("decode", decode_description, decode_flags))
                     .c_str(),
                 stdout);
      return exit_ok;
    }
    a.check_required(decode_flags, [](std::string_view) { return false; });  // also with --run
    if (p.positional.empty())
      throw usage_error(
          "missing the input: vbucket decode FILE --start S --frames N --interval I --size HxW "
          "--out OUT.rgb");
    ffmpeg::clip_request req;
    req.start = static_cast<std::int64_t>(
        parse_uint_flag("start", a.value("start"), 0, std::uint64_t{1} << 40));
    req.frames =
        static_cast<std::int64_t>(parse_uint_flag("frames", a.value("frames"), 1, 1u << 16));
    req.interval = static_cast<std::int64_t>(
        parse_uint_flag("interval", a.value("interval"), 1, std::uint64_t{1} << 20));
    if (a.has("frame-choice")) {
      const auto choice = parse_frame_choice(a.value("frame-choice"));
      if (!choice)
        throw usage_error("--frame-choice: expected stride or opensora, got \"" +
                          std::string(a.value("frame-choice")) + "\"");
      req.choice = *choice;
    }
    parse_size(a.value("size"), req.height, req.width);
    if (a.has("threads"))
      req.threads = static_cast<int>(parse_uint_flag("threads", a.value("threads"), 0, 256));
    const std::string layout = a.value_or("layout", "thwc");
    if (layout == "thwc") {
      req.layout = ffmpeg::layout::thwc;
    } else if (layout == "cthw") {
      req.layout = ffmpeg::layout::cthw;
    } else {
      throw usage_error("--layout: expected thwc or cthw, got \"" + layout + "\"");
    }
    const std::string filter = a.value_or("filter", "bilinear");
    if (filter == "bilinear") {
      req.filter = ffmpeg::resize_filter::bilinear;
    } else if (filter == "bicubic") {
      req.filter = ffmpeg::resize_filter::bicubic;
    } else if (filter == "area") {
      req.filter = ffmpeg::resize_filter::area;
    } else if (filter == "nearest") {
      req.filter = ffmpeg::resize_filter::nearest;
    } else {
      throw usage_error("--filter: expected bilinear, bicubic, area or nearest, got \"" + filter +
                        "\"");
    }
    req.pad = a.has("pad");
    req.limits = read_network_flags(a, req.limits);
    const std::size_t bytes = ffmpeg::clip_bytes(req);
    if (bytes > (std::size_t{1} << 34))
      throw usage_error("--frames x --size: the clip would take " + std::to_string(bytes) +
                        " bytes (more than 16 GiB)");
    ffmpeg::quiet_logs();
    ffmpeg::cap_allocations(std::size_t{1} << 30);
    ffmpeg::frame_index index;
    if (a.has("index")) {
      index = ffmpeg::frame_index::load(a.value("index"));  // throws naming the file
      req.index = &index;
    }
    output_file out(a.value("out"));  // fails early for an unwritable path
    std::vector<std::uint8_t> buffer(bytes);
    const std::string path(p.positional);
    const auto info = ffmpeg::decode_clip(path, req, buffer).value();  // throws on error
    out.write(std::string_view(reinterpret_cast<const char*>(buffer.data()), buffer.size()));
    out.commit();
    if (info.index_stale)
      std::fprintf(stderr,
                   "vbucket decode: warning: %s: its entry in %s is stale (size or mtime changed "
                   "since the scan); decoded without it\n",
                   escape_control(path).c_str(), escape_control(a.value("index")).c_str());
    else if (req.index != nullptr && index.find(path) == nullptr)
      std::fprintf(stderr,
                   "vbucket decode: warning: %s: no entry in the frame index %s (under any "
                   "spelling of its path: %s); decoded without it\n",
                   escape_control(path).c_str(), escape_control(a.value("index")).c_str(),
                   escape_control(ffmpeg::canonical_media_path(path)).c_str());
    std::printf(
        "%lld frames %lldx%lld (%s) from %s: %lld decoded, %lld padded%s%s%s%s%s\n",
        static_cast<long long>(req.frames), static_cast<long long>(req.height),
        static_cast<long long>(req.width), layout.c_str(), escape_control(path).c_str(),
        static_cast<long long>(info.frames_decoded), static_cast<long long>(info.frames_padded),
        info.indexed ? ", timestamps from the sample table" : "",
        info.index_used ? ", frame index used" : "", info.seeked ? ", seeked" : "",
        info.rotation != 0 ? (", rotated " + std::to_string(info.rotation)).c_str() : "",
        info.sar_num != info.sar_den ? (", sample aspect ratio " + std::to_string(info.sar_num) +
                                        ":" + std::to_string(info.sar_den))
                                           .c_str()
                                     : "");
    std::fflush(stdout);
    return exit_ok;
  });
}

}  // namespace vbucket::cli
