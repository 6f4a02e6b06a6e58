/// `vbucket scan`: probes every media file under a directory (or listed in a text file), the
/// members of tar shards (WebDataset) and URLs, in parallel, and writes META.csv (path,
/// num_frames,height,width,fps,duration,codec,error,warning,stored_height,stored_width,sar,
/// rotation; with shards also shard,member,member_offset,member_size and the sidecar fields),
/// the metadata table `vbucket assign` and `plan` read (they read columns by name and ignore
/// the extra ones).

#include <algorithm>    // std::find
#include <charconv>     // std::to_chars
#include <cmath>        // std::isfinite
#include <cstdint>      // std::uint64_t
#include <cstdio>       // std::fputs, std::fprintf
#include <exception>    // std::exception
#include <functional>   // std::function
#include <memory>       // std::unique_ptr
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include <unistd.h>  // isatty

#include "../cli.hpp"
#include "../mpi_job.hpp"
#include "network_flags.hpp"
#include "positional.hpp"
#include "vbucket/ffmpeg/decode.hpp"  // index_video
#include "vbucket/ffmpeg/scan.hpp"
#include "vbucket/ffmpeg/sources.hpp"
#if VBUCKET_CLI_HAS_MPI
#include "vbucket/mpi/scan.hpp"
#endif

namespace vbucket::cli {
namespace {

/// Not constexpr: the media fields' flags take their help from the run spec's table.
const flag scan_flags[] = {
    {"out", "META.csv", true,
     "output CSV: path,num_frames,height,width,fps,duration,codec,error,warning,stored_height,"
     "stored_width,sar,rotation per file"},
    {"threads", "N", false, "files probed at once; 0 = one per core (0)"},
    {"decode-count", "", false, "count frames by decoding even when the container records them"},
    {"skip-failed", "", false, "leave files that fail out of META.csv (they are still counted)"},
    {"index", "", false,
     "also write a frame index next to META.csv (META.vbidx) for decode --index and loaders"},
    timeout_flag,
    io_timeout_flag,
    retries_flag,
    media_run_flag,
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
    "Tar shards (WebDataset; a .tar under DIR, given as the input, or a line of LIST.txt, local\n"
    "or http(s)://): one row per media member, its path SHARD#MEMBER@OFFSET+SIZE (decode,\n"
    "assign, plan and the loaders open it in place), with the columns shard, member,\n"
    "member_offset, member_size and its key's sidecars (key.txt -> column txt, key.json -> one\n"
    "column per top-level field). URLs (http://, https://) are probed over ranged HTTP, --threads\n"
    "at once, each within --timeout (shards over HTTP are listed within it too). A line of\n"
    "LIST.txt may name a file, a URL, a shard, a directory or another list (.txt, .list, .lst).\n"
    "Under mpirun (or srun), the files are shared out over the processes, balanced by size,\n"
    "and rank 0 writes the same META.csv and prints one progress line.\n"
    "Exit codes: 0 success (also when some files fail), 1 bad data, 2 bad usage.";

std::string number(double v) {
  if (!std::isfinite(v)) return "";
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  return ec == std::errc{} ? std::string(text, end) : std::string();
}

}  // namespace

namespace {

/// What a scan needs before probing; everything here may fail on one rank only.
struct scan_job {
  bool help = false;
  std::string out_path;
  unsigned threads = 0;
  bool quiet = false;
  bool skip_failed = false;
  bool index = false;
  ffmpeg::probe_options opt;
  std::vector<std::string> paths;
  ffmpeg::media_listing listing;     // paths, with shards' columns and sidecar fields
  std::unique_ptr<output_file> out;  // not movable itself
  std::unique_ptr<output_file> index_out;
};

/// Parses the flags, lists the files and (when `writer`) opens the output, so that an
/// unwritable path fails before the probes.
scan_job prepare_scan(int argc, char** argv, bool writer) {
  scan_job job;
  const positional_args p = split_positional(argc, argv, scan_flags);
  const args a = args::parse(p.argc, p.argv, scan_flags);
  if (a.help()) {
    std::fputs(usage_with_positional("scan", "DIR|LIST.txt",
                                     usage_text("scan", scan_description, scan_flags))
                   .c_str(),
               stdout);
    job.help = true;
    return job;
  }
  a.check_required(scan_flags, [](std::string_view) { return false; });  // also with --run
  if (p.positional.empty())
    throw usage_error("missing the input: vbucket scan DIR|LIST.txt --out META.csv");
  const std::string where(p.positional);
  if (a.has("threads"))
    job.threads = static_cast<unsigned>(parse_uint_flag("threads", a.value("threads"), 0, 4096));
  job.quiet = a.has("quiet");
  job.skip_failed = a.has("skip-failed");
  job.index = a.has("index");
  job.opt.always_decode_count = a.has("decode-count");
  job.opt.limits = read_network_flags(a, job.opt.limits);
  job.out_path = a.value("out");
  if (job.index && job.out_path == "-")
    throw usage_error(
        "--index writes META.vbidx next to --out META.csv: give --out a file name, "
        "not - (standard output)");
  ffmpeg::quiet_logs();
  ffmpeg::cap_allocations(std::size_t{1} << 30);
  job.listing = ffmpeg::list_sources(where, job.threads, job.opt.limits);
  job.paths = job.listing.paths;
  if (writer) {
    job.out = std::make_unique<output_file>(job.out_path);
    if (job.index)
      job.index_out = std::make_unique<output_file>(ffmpeg::index_path_for(job.out_path));
  }
  return job;
}

/// Writes META.csv from the probe results (results[i] for job.paths[i]) and the summary.
void write_scan(scan_job& job, const std::vector<ffmpeg::result<ffmpeg::video_info>>& results) {
  const std::vector<std::string>& paths = job.paths;
  const ffmpeg::media_listing& l = job.listing;
  // New columns go at the end: pipelines read them by name, older ones by position.
  std::string text =
      "path,num_frames,height,width,fps,duration,codec,error,warning,stored_height,stored_width,"
      "sar,rotation";
  // Shards: where each member lies, and its key's sidecar fields (a name taken by a column
  // above gets the prefix "sidecar.").
  const bool shards = l.from_shards && l.paths.size() == paths.size();
  if (shards) {
    constexpr std::string_view taken[] = {
        "path",     "num_frames", "height",  "width",         "fps",          "duration",
        "codec",    "error",      "warning", "stored_height", "stored_width", "sar",
        "rotation", "shard",      "member",  "member_offset", "member_size"};
    text += ",shard,member,member_offset,member_size";
    for (const std::string& name : l.field_names) {
      const bool clash = std::find(std::begin(taken), std::end(taken), name) != std::end(taken);
      text += "," + csv_field(clash ? "sidecar." + name : name);
    }
  }
  text += "\n";
  auto shard_columns = [&](std::size_t i) {
    if (!shards) return std::string();
    std::string c = "," + csv_field(l.shard[i]) + "," + csv_field(l.member[i]) + "," +
                    (l.offset[i] >= 0 ? std::to_string(l.offset[i]) : "") + "," +
                    (l.size[i] >= 0 ? std::to_string(l.size[i]) : "");
    for (const auto& f : l.fields) c += "," + csv_field(f[i]);
    return c;
  };
  std::uint64_t failed = 0, warned = 0;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const auto& r = results[i];
    if (r && !r->warning.empty()) ++warned;
    if (!r) {
      ++failed;
      if (job.skip_failed) continue;
      text += csv_field(paths[i]) + ",,,,,,," + csv_field(r.error()) + ",,,,," + shard_columns(i) +
              "\n";
      continue;
    }
    text += csv_field(paths[i]) + "," + std::to_string(r->num_frames) + "," +
            std::to_string(r->height) + "," + std::to_string(r->width) + "," + number(r->fps) +
            "," + number(r->duration) + "," + csv_field(r->codec) + ",," + csv_field(r->warning) +
            "," + std::to_string(r->coded_height) + "," + std::to_string(r->coded_width) + "," +
            std::to_string(r->sar_num) + ":" + std::to_string(r->sar_den) + "," +
            std::to_string(r->rotation) + shard_columns(i) + "\n";
    if (text.size() > (1u << 20)) {
      job.out->write(text);
      text.clear();
    }
  }
  job.out->write(text);
  job.out->commit();
  std::string indexed;
  if (job.index_out) {
    std::vector<std::string> videos;  // the files that probed, images left out
    // Local files and members of local shards (stamped with the shard's size and mtime); a URL
    // has no size and mtime to check an entry against.
    for (std::size_t i = 0; i < paths.size(); ++i)
      if (results[i] && std::isfinite(results[i]->fps) && !ffmpeg::parse_media_path(paths[i]).url())
        videos.push_back(paths[i]);
    const auto entries = ffmpeg::index_all(videos, job.threads);
    ffmpeg::frame_index index;
    std::size_t failed_index = 0;
    for (const auto& e : entries) {
      if (e) {
        index.add(*e);
      } else {
        ++failed_index;
        if (!job.quiet)
          std::fprintf(stderr, "warning: not indexed: %s\n", escape_control(e.error()).c_str());
      }
    }
    job.index_out->write(index.serialize());
    job.index_out->commit();
    indexed = "; indexed " + std::to_string(index.size()) + " videos" +
              (failed_index > 0 ? " (" + std::to_string(failed_index) + " could not be)" : "") +
              " into " + escape_control(ffmpeg::index_path_for(job.out_path));
  }
  if (!job.quiet) {
    std::printf("%zu files: %llu probed, %llu failed%s%s; wrote %s%s\n", paths.size(),
                static_cast<unsigned long long>(paths.size() - failed),
                static_cast<unsigned long long>(failed),
                failed > 0 && job.skip_failed ? " (left out)" : "",
                warned > 0 ? (", " + std::to_string(warned) + " with a warning").c_str() : "",
                escape_control(job.out_path).c_str(), indexed.c_str());
    std::fflush(stdout);
  }
}

/// Probes the listed paths; a shard that could not be listed keeps its reason, unprobed.
std::vector<ffmpeg::result<ffmpeg::video_info>> probe_listed(
    const scan_job& job, const std::function<void(std::size_t, std::size_t)>& progress) {
  const ffmpeg::media_listing& l = job.listing;
  std::vector<std::string> probed;
  std::vector<std::size_t> where;
  for (std::size_t i = 0; i < job.paths.size(); ++i) {
    if (i < l.errors.size() && !l.errors[i].empty()) continue;
    probed.push_back(job.paths[i]);
    where.push_back(i);
  }
  if (probed.size() == job.paths.size())
    return ffmpeg::probe_all(job.paths, job.threads, job.opt, progress);
  const std::size_t skipped = job.paths.size() - probed.size();
  auto part =
      ffmpeg::probe_all(probed, job.threads, job.opt, [&](std::size_t done, std::size_t total) {
        if (progress) progress(done + skipped, total + skipped);
      });
  std::vector<ffmpeg::result<ffmpeg::video_info>> results;
  results.reserve(job.paths.size());
  for (std::size_t i = 0; i < job.paths.size(); ++i)
    results.push_back(ffmpeg::result<ffmpeg::video_info>::failure(l.errors[i]));
  for (std::size_t k = 0; k < where.size(); ++k) results[where[k]] = std::move(part[k]);
  return results;
}

/// One process probes every file, with a progress bar (terminal) or count.
int scan_alone(int argc, char** argv) {
  scan_job job = prepare_scan(argc, argv, true);
  if (job.help) return exit_ok;
  const bool terminal = isatty(fileno(stderr)) != 0;
  const std::size_t step = job.paths.size() < 10 ? 1 : job.paths.size() / 10;
  auto progress = [&](std::size_t done, std::size_t total) {
    if (job.quiet) return;
    if (terminal) {
      constexpr int bar = 30;
      const int filled = static_cast<int>(bar * done / total);
      std::fprintf(stderr, "\rscanning [%.*s%*s] %zu/%zu", filled, "##############################",
                   bar - filled, "", done, total);
      if (done == total) std::fputs("\n", stderr);
    } else if (done % step == 0 || done == total) {
      std::printf("scanned %zu/%zu\n", done, total);
    }
  };
  const auto results = probe_listed(job, progress);
  write_scan(job, results);
  return exit_ok;
}

#if VBUCKET_CLI_HAS_MPI
/// Under mpirun: every rank lists the files (the lists are compared), probes its share, and
/// rank 0 writes META.csv and one progress line. A rank that fails before the probes (flags,
/// listing, rank 0's output) joins the comparison as failed, so every rank stops.
int scan_mpi(int argc, char** argv, const mpi::communicator& comm) {
  const bool root = comm.rank() == 0;
  scan_job job;
  try {
    job = prepare_scan(argc, argv, root);
  } catch (const std::exception& e) {
    const bool usage = dynamic_cast<const usage_error*>(&e) != nullptr;
    try {
      mpi::agree_failed(comm, e.what(), "list of files to scan");
    } catch (const vbucket::error& all) {
      if (usage) throw usage_error(all.what());
      throw;
    }
  }
  if (job.help) return exit_ok;  // every rank was given --help (else the lists differ)
  const auto results = mpi::scan_sharded(comm, job.paths, job.threads, job.opt);
  if (!root) return exit_ok;
  if (!job.quiet) {
    std::FILE* to = isatty(fileno(stderr)) != 0 ? stderr : stdout;
    std::fprintf(to, "scanned %zu/%zu on %u ranks\n", job.paths.size(), job.paths.size(),
                 comm.size());
    std::fflush(to);
  }
  write_scan(job, results);
  return exit_ok;
}
#endif

}  // namespace

int cmd_scan(int argc, char** argv) {
  const std::uint32_t launched = launcher_world_size();
#if VBUCKET_CLI_HAS_MPI
  if (launched > 0) {
    // MPI ends (MPI_Finalize, a barrier) only once every rank has printed its error line: the
    // launcher may end the whole job as soon as one process exits non-zero.
    const mpi::environment env;
    const mpi::communicator comm;
    if (comm.size() > 1) return run_main("scan", [&] { return scan_mpi(argc, argv, comm); });
    return run_main("scan", [&] { return scan_alone(argc, argv); });
  }
#endif
  return run_main("scan", [&]() -> int {
    if (launched > 1)
      throw usage_error("started by an MPI launcher with " + std::to_string(launched) +
                        " processes, but this vbucket was built without MPI (VBUCKET_MPI=OFF; "
                        "Debian: libopenmpi-dev): every process would scan every file");
    return scan_alone(argc, argv);
  });
}

}  // namespace vbucket::cli
