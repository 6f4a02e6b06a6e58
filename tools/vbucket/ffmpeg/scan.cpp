/// `vbucket scan`: probes every media file under a directory (or listed in a text file), in
/// parallel, and writes META.csv (path,num_frames,height,width,fps,duration,codec,error,warning,
/// stored_height,stored_width,sar,rotation), the metadata table `vbucket assign` and `plan`
/// read (they read columns by name and ignore the extra ones).

#include <charconv>     // std::to_chars
#include <cmath>        // std::isfinite
#include <cstdint>      // std::uint64_t
#include <cstdio>       // std::fputs, std::fprintf
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include <unistd.h>  // isatty

#include "../cli.hpp"
#include "positional.hpp"
#include "vbucket/ffmpeg/scan.hpp"

namespace vbucket::cli {
namespace {

constexpr flag scan_flags[] = {
    {"out", "META.csv", true,
     "output CSV: path,num_frames,height,width,fps,duration,codec,error,warning,stored_height,"
     "stored_width,sar,rotation per file"},
    {"threads", "N", false, "files probed at once; 0 = one per core (0)"},
    {"decode-count", "", false, "count frames by decoding even when the container records them"},
    {"skip-failed", "", false, "leave files that fail out of META.csv (they are still counted)"},
    {"quiet", "", false, "no progress and no summary"},
};

constexpr std::string_view scan_description =
    "Probes every media file under DIR (recursive; files named .mp4, .mov, .mkv, .webm, .avi,\n"
    ".png, .jpg, ... ) or listed in LIST.txt (one path a line) with FFmpeg, in parallel, and\n"
    "writes META.csv in path order. A file that fails gets its error message in the error\n"
    "column and empty fields, and the scan goes on; assign and plan count such rows as\n"
    "invalid samples (--skip-failed leaves them out). height and width are display sizes: the\n"
    "stored width stretched by the sample aspect ratio (sar, e.g. 32:27 for 16:9 DVD video),\n"
    "then rotated; stored_height and stored_width are the frame as stored. num_frames counts\n"
    "the frames that decode: an MP4's edit list is applied, and a file cut short or damaged\n"
    "gets a warning saying what was counted. Images have 1 frame and an empty fps. Progress\n"
    "goes to stderr on a terminal, else a count to stdout.\n"
    "Exit codes: 0 success (also when some files fail), 1 bad data, 2 bad usage.";

std::string number(double v) {
  if (!std::isfinite(v)) return "";
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  return ec == std::errc{} ? std::string(text, end) : std::string();
}

}  // namespace

int cmd_scan(int argc, char** argv) {
  return run_main("scan", [&] {
    const positional_args p = split_positional(argc, argv);
    const args a = args::parse(p.argc, p.argv, scan_flags);
    if (a.help()) {
      std::fputs(usage_with_positional("scan", "DIR|LIST.txt",
                                       usage_text("scan", scan_description, scan_flags))
                     .c_str(),
                 stdout);
      return exit_ok;
    }
    if (p.positional.empty())
      throw usage_error("missing the input: vbucket scan DIR|LIST.txt --out META.csv");
    const std::string where(p.positional);
    const unsigned threads =
        a.has("threads")
            ? static_cast<unsigned>(parse_uint_flag("threads", a.value("threads"), 0, 4096))
            : 0u;
    const bool quiet = a.has("quiet");
    ffmpeg::quiet_logs();
    ffmpeg::cap_allocations(std::size_t{1} << 30);
    const std::vector<std::string> paths = ffmpeg::list_media(where);
    output_file out(a.value("out"));  // fails early for an unwritable path

    ffmpeg::probe_options opt;
    opt.always_decode_count = a.has("decode-count");
    const bool terminal = isatty(fileno(stderr)) != 0;
    const std::size_t step = paths.size() < 10 ? 1 : paths.size() / 10;
    auto progress = [&](std::size_t done, std::size_t total) {
      if (quiet) return;
      if (terminal) {
        constexpr int bar = 30;
        const int filled = static_cast<int>(bar * done / total);
        std::fprintf(stderr, "\rscanning [%.*s%*s] %zu/%zu", filled,
                     "##############################", bar - filled, "", done, total);
        if (done == total) std::fputs("\n", stderr);
      } else if (done % step == 0 || done == total) {
        std::printf("scanned %zu/%zu\n", done, total);
      }
    };
    const auto results = ffmpeg::probe_all(paths, threads, opt, progress);

    // New columns go at the end: pipelines read them by name, older ones by position.
    std::string text =
        "path,num_frames,height,width,fps,duration,codec,error,warning,stored_height,stored_width,"
        "sar,rotation\n";
    std::uint64_t failed = 0, warned = 0;
    for (std::size_t i = 0; i < paths.size(); ++i) {
      const auto& r = results[i];
      if (r && !r->warning.empty()) ++warned;
      if (!r) {
        ++failed;
        if (a.has("skip-failed")) continue;
        text += csv_field(paths[i]) + ",,,,,,," + csv_field(r.error()) + ",,,,,\n";
        continue;
      }
      text += csv_field(paths[i]) + "," + std::to_string(r->num_frames) + "," +
              std::to_string(r->height) + "," + std::to_string(r->width) + "," + number(r->fps) +
              "," + number(r->duration) + "," + csv_field(r->codec) + ",," + csv_field(r->warning) +
              "," + std::to_string(r->coded_height) + "," + std::to_string(r->coded_width) + "," +
              std::to_string(r->sar_num) + ":" + std::to_string(r->sar_den) + "," +
              std::to_string(r->rotation) + "\n";
      if (text.size() > (1u << 20)) {
        out.write(text);
        text.clear();
      }
    }
    out.write(text);
    out.commit();
    if (!quiet) {
      std::printf("%zu files: %llu probed, %llu failed%s%s; wrote %s\n", paths.size(),
                  static_cast<unsigned long long>(paths.size() - failed),
                  static_cast<unsigned long long>(failed),
                  failed > 0 && a.has("skip-failed") ? " (left out)" : "",
                  warned > 0 ? (", " + std::to_string(warned) + " with a warning").c_str() : "",
                  one_line(a.value("out")).c_str());
      std::fflush(stdout);
    }
    return exit_ok;
  });
}

}  // namespace vbucket::cli
