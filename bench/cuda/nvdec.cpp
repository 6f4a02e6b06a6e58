/// NVDEC against the CPU decoder: samples/s of random clips (Open-Sora's temporal_random_crop
/// starts) from the given videos, decoded at the bucket size by `threads` workers, each with
/// its own decoder: vbucket::ffmpeg::decode_clip into host memory (the CPU path, 1 decoder
/// thread per worker) and vbucket::cuda::nvdec_decoder into device memory (uint8, and float32
/// normalised). Without a CUDA device it says so and exits 0 (nothing to measure).
///
///   vbucket_nvdec_bench [--clips 200] [--frames 33] [--interval 2] [--height 256]
///                       [--width 256] [--threads 1] VIDEO...
#include <atomic>   // std::atomic
#include <chrono>   // std::chrono::steady_clock
#include <cstdint>  // std::int64_t, std::uint8_t
#include <cstdio>   // std::printf, std::fprintf
#include <cstdlib>  // std::strtoll, std::exit
#include <memory>   // std::unique_ptr
#include <string>   // std::string
#include <thread>   // std::thread
#include <vector>   // std::vector

#include "vbucket/cuda/nvdec.hpp"
#include "vbucket/cuda/pinned_backend.hpp"
#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/ffmpeg/probe.hpp"

namespace ff = vbucket::ffmpeg;
namespace vc = vbucket::cuda;

namespace {

struct job {
  std::string path;
  std::int64_t start = 0;
};

struct outcome {
  double seconds = 0;
  std::int64_t failed = 0, fallbacks = 0, on_device = 0;
};

/// Runs `body(worker, job)` over the jobs with `threads` workers; the wall time.
template <class Body>
outcome run(const std::vector<job>& jobs, int threads, Body&& body) {
  std::atomic<std::size_t> next{0};
  std::atomic<std::int64_t> failed{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w)
    workers.emplace_back([&, w] {
      for (std::size_t i = next++; i < jobs.size(); i = next++)
        if (!body(w, jobs[i])) ++failed;
    });
  for (auto& t : workers) t.join();
  outcome o;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  o.failed = failed;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t clips = 200, frames = 33, interval = 2, height = 256, width = 256, threads = 1;
  std::vector<std::string> videos;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::int64_t& v) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "vbucket_nvdec_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      v = std::strtoll(argv[++i], nullptr, 10);
    };
    if (a == "--clips")
      value(clips);
    else if (a == "--frames")
      value(frames);
    else if (a == "--interval")
      value(interval);
    else if (a == "--height")
      value(height);
    else if (a == "--width")
      value(width);
    else if (a == "--threads")
      value(threads);
    else
      videos.push_back(a);
  }
  std::string why;
  if (!vc::device_available(&why)) {
    std::printf("vbucket_nvdec_bench: skipped, no usable CUDA device (%s)\n", why.c_str());
    return 0;
  }
  if (videos.empty() || clips < 1 || threads < 1) {
    std::fprintf(stderr,
                 "usage: vbucket_nvdec_bench [--clips N] [--frames N] [--interval N] "
                 "[--height H] [--width W] [--threads N] VIDEO...\n");
    return 2;
  }
  // Random starts, the same for both paths.
  std::vector<job> jobs;
  std::vector<std::int64_t> totals;
  for (const auto& v : videos) {
    const auto info = ff::probe(v);
    if (!info) {
      std::fprintf(stderr, "vbucket_nvdec_bench: %s\n", info.error().c_str());
      return 1;
    }
    totals.push_back(info->num_frames);
  }
  for (std::int64_t i = 0; static_cast<std::int64_t>(jobs.size()) < clips && i < 100 * clips; ++i) {
    const auto k = static_cast<std::size_t>(i) % videos.size();
    const auto s =
        ff::temporal_random_crop(totals[k], frames, interval, static_cast<std::uint64_t>(i));
    if (s) jobs.push_back({videos[k], *s});
  }
  if (jobs.empty()) {
    std::fprintf(stderr, "vbucket_nvdec_bench: the videos are too short for the clips\n");
    return 1;
  }
  ff::clip_request base{.frames = frames, .interval = interval, .height = height, .width = width};
  const std::size_t bytes = ff::clip_bytes(base);
  const int n = static_cast<int>(threads);

  std::vector<std::vector<std::uint8_t>> host(static_cast<std::size_t>(n),
                                              std::vector<std::uint8_t>(bytes));
  const outcome cpu = run(jobs, n, [&](int w, const job& j) {
    ff::clip_request req = base;
    req.start = j.start;
    return ff::decode_clip(j.path, req, host[static_cast<std::size_t>(w)]).ok();
  });

  std::vector<std::unique_ptr<vc::nvdec_decoder>> decoders;
  std::vector<vc::device_buffer> u8, f32;
  for (int w = 0; w < n; ++w) {
    decoders.push_back(std::make_unique<vc::nvdec_decoder>());
    u8.emplace_back(bytes);
    f32.emplace_back(bytes * sizeof(float));
  }
  if (!decoders[0]->on_device())
    std::printf("note: NVDEC not usable (%s): the GPU rows are CPU fallbacks\n",
                decoders[0]->why_not().c_str());
  // Warm-up: the device context, the decoders' first sessions.
  for (int w = 0; w < n; ++w) {
    ff::clip_request req = base;
    req.start = jobs[0].start;
    (void)decoders[static_cast<std::size_t>(w)]->decode(
        jobs[0].path, req, u8[static_cast<std::size_t>(w)].as<std::uint8_t>());
  }
  auto counts = [&](outcome& o, std::int64_t on_device0, std::int64_t fallbacks0) {
    std::int64_t on = 0, fb = 0;
    for (auto& d : decoders) {
      on += d->stats().on_device;
      fb += d->stats().fallbacks;
    }
    o.on_device = on - on_device0;
    o.fallbacks = fb - fallbacks0;
  };
  auto totals_now = [&](bool on) {
    std::int64_t t = 0;
    for (auto& d : decoders) t += on ? d->stats().on_device : d->stats().fallbacks;
    return t;
  };
  std::int64_t on0 = totals_now(true), fb0 = totals_now(false);
  outcome gpu = run(jobs, n, [&](int w, const job& j) {
    ff::clip_request req = base;
    req.start = j.start;
    const auto ws = static_cast<std::size_t>(w);
    return decoders[ws]->decode(j.path, req, u8[ws].as<std::uint8_t>()).ok();
  });
  counts(gpu, on0, fb0);
  on0 = totals_now(true);
  fb0 = totals_now(false);
  vbucket::normalization norm;
  outcome gpu_norm = run(jobs, n, [&](int w, const job& j) {
    ff::clip_request req = base;
    req.start = j.start;
    const auto ws = static_cast<std::size_t>(w);
    return decoders[ws]->decode_normalized(j.path, req, f32[ws].as<float>(), norm).ok();
  });
  counts(gpu_norm, on0, fb0);

  const auto count = static_cast<double>(jobs.size());
  std::printf(
      "clips: %zu of %lld frames (interval %lld) at %lldx%lld, %d worker(s), %zu video(s)\n",
      jobs.size(), static_cast<long long>(frames), static_cast<long long>(interval),
      static_cast<long long>(height), static_cast<long long>(width), n, videos.size());
  std::printf("%-28s %10s %10s %8s %10s %10s\n", "path", "samples/s", "frames/s", "failed",
              "on device", "fallbacks");
  auto row = [&](const char* name, const outcome& o, bool device) {
    std::printf("%-28s %10.1f %10.1f %8lld", name, count / o.seconds,
                count * static_cast<double>(frames) / o.seconds, static_cast<long long>(o.failed));
    if (device)
      std::printf(" %10lld %10lld\n", static_cast<long long>(o.on_device),
                  static_cast<long long>(o.fallbacks));
    else
      std::printf(" %10s %10s\n", "-", "-");
  };
  row("cpu decode_clip (host)", cpu, false);
  row("nvdec uint8 (device)", gpu, true);
  row("nvdec float32 norm (device)", gpu_norm, true);
  std::printf("speed-up (nvdec uint8 / cpu): %.2fx\n", cpu.seconds / gpu.seconds);
  return cpu.failed + gpu.failed + gpu_norm.failed == 0 ? 0 : 1;
}
