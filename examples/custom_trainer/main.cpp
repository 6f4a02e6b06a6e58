// custom_trainer: the whole data path of a trainer, in one file to copy. Scan a folder of
// videos and images into the trainer's own records, bucket them with Open-Sora 2.0's rule in a
// batch_sampler for rank R of W, and load the rank's batches (FFmpeg decoding on worker threads,
// straight into staging slots) into a stand-in training step that checks every batch's shape.
//
//   custom_trainer DIR [--rank R] [--world W] [--workers N] [--seed S] [--f32] [--compare]
//
// --f32 asks for the model's input, float32 CTHW normalised to [-1, 1], made on the worker
// threads as each clip is decoded (the default is the decoder's uint8 THWC). --compare also
// decodes the same clips one by one on this thread and reports how close the loader runs to
// decode-bound (the sum of the decode times divided by the workers).
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <vbucket/ffmpeg/ffmpeg.hpp>
#include <vbucket/ffmpeg/file_decoder.hpp>
#include <vbucket/vbucket.hpp>

namespace {

struct args {
  std::string dir;
  std::uint32_t rank = 0, world = 1;
  unsigned workers = 2;
  std::uint64_t seed = 42;
  bool f32 = false;
  bool compare = false;
};

args parse(int argc, char** argv) {
  args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const auto value = [&] {
      if (i + 1 >= argc) throw vbucket::error(k + " needs a value");
      return std::stoull(argv[++i]);
    };
    if (k == "--rank")
      a.rank = static_cast<std::uint32_t>(value());
    else if (k == "--world")
      a.world = static_cast<std::uint32_t>(value());
    else if (k == "--workers")
      a.workers = static_cast<unsigned>(value());
    else if (k == "--seed")
      a.seed = value();
    else if (k == "--f32")
      a.f32 = true;
    else if (k == "--compare")
      a.compare = true;
    else if (a.dir.empty() && k.rfind("--", 0) != 0)
      a.dir = k;
    else
      throw vbucket::error("unknown argument " + k);
  }
  if (a.dir.empty()) throw vbucket::error("usage: custom_trainer DIR [--rank R] [--world W] ...");
  return a;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) try {
  const args a = parse(argc, argv);
  vbucket::ffmpeg::quiet_logs();  // bad files are reported through the loader, not stderr

  // 1. Scan: probe every media file (in parallel); unreadable files are reported and skipped.
  //    The records are the trainer's own type: vbucket reads num_frames, height, width, fps and
  //    path (or whatever a meta_traits specialisation says).
  struct clip {
    std::int64_t num_frames, height, width;
    double fps;
    std::string path;
  };
  const auto files = vbucket::ffmpeg::list_media(a.dir);
  const auto probed = vbucket::ffmpeg::probe_all(files, 0);
  std::vector<clip> clips;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (!probed[i]) {
      std::printf("scan: skipped %s\n", probed[i].error().c_str());
      continue;
    }
    const auto& p = *probed[i];
    clips.push_back({p.num_frames, p.height, p.width, p.fps, files[i]});
  }

  // 2. Buckets and this rank's batches (the same plan on every rank, no communication).
  const vbucket::bucket_config config(std::vector<vbucket::bucket_spec>{{"256px", 1, 1.0, {}, 6},
                                                                        {"256px", 5, 1.0, {}, 4},
                                                                        {"256px", 9, 0.5, {}, 3},
                                                                        {"256px", 17, 1.0, {}, 2}},
                                      vbucket::opensora_v2_tables{});
  const vbucket::opensora_v2_rule rule{.fps_max = 16};
  const std::uint64_t epoch = 0;
  vbucket::batch_sampler sampler(clips, config, rule,
                                 {.seed = a.seed, .world = a.world, .rank = a.rank});
  sampler.set_epoch(epoch);
  std::printf("%zu files, %zu usable; %llu batches in the epoch, %zu steps per rank\n",
              files.size(), clips.size(),
              static_cast<unsigned long long>(sampler.plan().num_batches()), sampler.size());

  // 3. The loader: FFmpeg decoding into a staging ring sized from the config (and the element
  //    type: a float32 batch takes four times the bytes of the uint8 one).
  const vbucket::ffmpeg::file_decoder decoder(clips, {.fps_max = rule.fps_max});
  const auto element = a.f32 ? vbucket::element_type::f32 : vbucket::element_type::u8;
  const auto layout = a.f32 ? vbucket::clip_layout::cthw : vbucket::clip_layout::thwc;
  vbucket::host_backend backend;  // vbucket::cuda::pinned_backend on a GPU machine
  vbucket::staging_ring<vbucket::host_backend> ring(backend, {.slots = 4});
  ring.reserve_for(config, 3 * vbucket::element_size(element));
  const auto t0 = std::chrono::steady_clock::now();
  vbucket::loader loader(
      sampler, decoder, ring,
      {.workers = a.workers, .prefetch = 2, .layout = layout, .element = element});

  // 4. The stand-in training step.
  std::uint64_t steps = 0, samples = 0;
  for (const auto& batch : loader) {
    const auto& shape = batch.tensor.view.shape;
    const std::int64_t b = config.batch_size(batch.info.bucket);
    const auto [t, h, w] = std::array{batch.info.frames, batch.info.height, batch.info.width};
    const std::array<std::int64_t, 5> want = a.f32 ? std::array<std::int64_t, 5>{b, 3, t, h, w}
                                                   : std::array<std::int64_t, 5>{b, t, h, w, 3};
    if (shape != want || batch.tensor.view.type != element) {
      std::fprintf(stderr, "custom_trainer: batch %llu has the wrong shape\n",
                   static_cast<unsigned long long>(steps));
      return 1;
    }
    for (const auto& s : batch.substitutions)
      std::printf("step %llu: %s replaced by %s (%s)\n", static_cast<unsigned long long>(steps),
                  clips[s.failed].path.c_str(), clips[s.replacement].path.c_str(), s.error.c_str());
    samples += static_cast<std::uint64_t>(shape[0]);
    ++steps;
  }
  const double wall = seconds_since(t0);
  const auto stats = loader.stats();
  std::printf("rank %u of %u: %llu steps, %llu samples in %.3f s (%.1f samples/s)\n%s", a.rank,
              a.world, static_cast<unsigned long long>(steps),
              static_cast<unsigned long long>(samples), wall, static_cast<double>(samples) / wall,
              vbucket::format_loader_stats(stats).c_str());
  if (steps != sampler.size()) return 1;

  if (a.compare) {
    // The same clips decoded alone, one after another, on this thread.
    std::vector<std::uint8_t> buffer;
    double alone = 0;
    std::uint64_t decoded = 0;
    for (const vbucket::batch& b : sampler) {
      for (const auto sample : b.indices) {
        const vbucket::clip_task task{sample,
                                      b.frames,
                                      b.height,
                                      b.width,
                                      vbucket::clip_layout::thwc,
                                      vbucket::crop_seed(a.seed, epoch, sample)};
        buffer.resize(task.bytes());
        const auto c0 = std::chrono::steady_clock::now();
        (void)decoder.decode(task, buffer);
        alone += seconds_since(c0);
        ++decoded;
      }
    }
    const double bound = alone / a.workers;
    std::printf(
        "decode alone: %llu clips in %.3f s; decode-bound with %u workers: %.3f s; "
        "loader: %.3f s = %.2fx the bound\n",
        static_cast<unsigned long long>(decoded), alone, a.workers, bound, wall, wall / bound);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "custom_trainer: error: %s\n", e.what());
  return 1;
}
