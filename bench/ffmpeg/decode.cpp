/// Benchmarks of clip decoding (vbucket::ffmpeg), single-threaded, on the clips that
/// scripts/bench_decode.sh makes (10 s H.264, 30 fps, GOP 60, 720p and 1080p) in
/// $VBUCKET_BENCH_VIDEO_DIR:
///  - `decode/clip/<height>p/start:<S>`: `decode_clip`, 33 frames from S at interval 2,
///    192x336 (seek, decode up to the last wanted frame, convert only the wanted frames).
///  - `decode/random_clips/<height>p/skip:<0|1>`: eight such clips at seeded random starts,
///    with clip_request::skip_unwanted and without; frames decoded per frame delivered.
///  - `decode/cost_balance/mode:<M>`: step balance with decode cost, simulated on a skewed
///    corpus across 8 ranks (BM_decode_cost_balance; needs no video);
///    `decode/cost_balance_plan/costs:<0|1>`: the planner's time on 1 M samples without and
///    with per-sample costs.
///  - `decode/deep_clip/container:<C>/start:<S>`: the same clip at frame S of a 5-minute 360p
///    video in MP4, MPEG-TS, AVI and MPEG-PS (see BM_decode_deep_clip).
///  - `decode/long_video_index/container:<C>/index:<0|1>`: a clip at frame 8900 of the
///    5-minute video in nine containers, without and with the frame index (scan --index).
///  - `decode/whole_clip_first/<height>p/start:<S>`: the same clip the way a loader that reads
///    the whole video first does (Open-Sora's read_video, then temporal crop): every frame
///    decoded and converted to full-size RGB, then the 33 frames resized and cropped.
///
///     VBUCKET_BENCH_VIDEO_DIR=build-bench-media ./vbucket_bench --benchmark_filter=decode/

#include <benchmark/benchmark.h>

#include <algorithm>   // std::copy_n, std::sort, std::max
#include <cstddef>     // std::size_t
#include <cstdint>     // std::int64_t, std::uint8_t, std::uint64_t
#include <cstdlib>     // std::getenv
#include <filesystem>  // std::filesystem::exists
#include <optional>    // std::optional
#include <span>        // std::span
#include <string>      // std::string
#include <utility>     // std::move
#include <vector>      // std::vector

#include "vbucket/base/random.hpp"
#include "vbucket/bucket/assign.hpp"
#include "vbucket/bucket/rules.hpp"
#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/ffmpeg/decode_cost.hpp"
#include "vbucket/ffmpeg/detail/libav.hpp"  // the libav wrappers the raw-decode baseline uses
#include "vbucket/ffmpeg/probe.hpp"
#include "vbucket/plan/epoch_plan.hpp"

namespace {

namespace ff = vbucket::ffmpeg;
namespace av = vbucket::ffmpeg::detail;

constexpr std::int64_t clip_frames = 33, clip_interval = 2, clip_h = 192, clip_w = 336;

/// `name` in $VBUCKET_BENCH_VIDEO_DIR, or "" when it is not there.
std::string bench_file(const std::string& name) {
  const char* dir = std::getenv("VBUCKET_BENCH_VIDEO_DIR");
  if (dir == nullptr) return "";
  const std::string path = std::string(dir) + "/" + name;
  return std::filesystem::exists(path) ? path : "";
}

std::string video(std::int64_t height) {
  return bench_file("h264_" + std::to_string(height) + "p_10s.mp4");
}

/// `path` (a `bench_file`; FFmpeg's logs quieted), or empty with the benchmark skipped when the
/// file is not there.
std::string found_or_skip(benchmark::State& state, std::string path) {
  ff::quiet_logs();
  if (path.empty())
    state.SkipWithError("no video: run scripts/bench_decode.sh (sets VBUCKET_BENCH_VIDEO_DIR)");
  return path;
}

ff::clip_request bench_request(std::int64_t start) {
  ff::clip_request r;
  r.start = start;
  r.frames = clip_frames;
  r.interval = clip_interval;
  r.height = clip_h;
  r.width = clip_w;
  r.threads = 1;
  return r;
}

/// The timed loop of decode_clip(path, req); the last clip's info, or none after an error
/// (reported to `state`).
std::optional<ff::clip_info> time_decode_clip(benchmark::State& state, const std::string& path,
                                              const ff::clip_request& req) {
  std::vector<std::uint8_t> out(ff::clip_bytes(req));
  std::optional<ff::clip_info> info;
  for (auto _ : state) {
    const auto r = ff::decode_clip(path, req, out);
    if (!r.ok()) {
      state.SkipWithError(r.error().c_str());
      return std::nullopt;
    }
    info = *r;
    benchmark::DoNotOptimize(out.data());
  }
  return info;
}

void BM_decode_clip(benchmark::State& state) {
  const std::string path = found_or_skip(state, video(state.range(0)));
  if (path.empty()) return;
  const auto info = time_decode_clip(state, path, bench_request(state.range(1)));
  if (info) state.counters["frames_decoded"] = static_cast<double>(info->frames_decoded);
}

/// Every frame decoded and converted to full-size RGB24 (as torchvision's read_video), then the
/// wanted frames resized and cropped.
void BM_decode_whole_clip_first(benchmark::State& state) {
  const std::string path = found_or_skip(state, video(state.range(0)));
  if (path.empty()) return;
  const ff::clip_request req = bench_request(state.range(1));
  std::vector<std::uint8_t> out(ff::clip_bytes(req));
  std::int64_t decoded = 0;
  for (auto _ : state) {
    av::input in(av::source{path, {}, false}, req.limits);
    const int index = in.video_stream();
    in.discard_others(index);
    av::codec_ptr ctx = av::open_decoder(in, in.format()->streams[index], 1, req.limits);
    av::packet_ptr pkt = av::make_packet();
    av::frame_ptr frame = av::make_frame();
    av::sws_ptr to_rgb, resize;
    std::vector<std::vector<std::uint8_t>> frames;  // the whole video, full-size RGB24
    auto drain = [&] {
      while (avcodec_receive_frame(ctx.get(), frame.get()) == 0) {
        const int w = frame->width, h = frame->height;
        to_rgb.reset(
            sws_getCachedContext(to_rgb.release(), w, h, static_cast<AVPixelFormat>(frame->format),
                                 w, h, AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr));
        std::vector<std::uint8_t>& rgb = frames.emplace_back(static_cast<std::size_t>(w * h * 3));
        std::uint8_t* dst[4] = {rgb.data()};
        int stride[4] = {w * 3};
        sws_scale(to_rgb.get(), frame->data, frame->linesize, 0, h, dst, stride);
        av_frame_unref(frame.get());
      }
    };
    while (av_read_frame(in.format(), pkt.get()) >= 0) {
      if (pkt->stream_index == index) avcodec_send_packet(ctx.get(), pkt.get());
      av_packet_unref(pkt.get());
      drain();
    }
    avcodec_send_packet(ctx.get(), nullptr);
    drain();
    decoded = static_cast<std::int64_t>(frames.size());
    // Temporal crop, then resize-crop each kept frame from RGB.
    const int w = ctx->width, h = ctx->height;
    const auto g = ff::resize_crop_geometry(h, w, clip_h, clip_w);
    resize.reset(sws_getContext(w, h, AV_PIX_FMT_RGB24, static_cast<int>(g.scaled_width),
                                static_cast<int>(g.scaled_height), AV_PIX_FMT_RGB24, SWS_BILINEAR,
                                nullptr, nullptr, nullptr));
    std::vector<std::uint8_t> scaled(
        static_cast<std::size_t>(g.scaled_width * g.scaled_height * 3));
    for (std::int64_t j = 0; j < clip_frames; ++j) {
      const auto& src = frames.at(static_cast<std::size_t>(req.start + j * clip_interval));
      const std::uint8_t* sp[4] = {src.data()};
      const int ss[4] = {w * 3};
      std::uint8_t* dp[4] = {scaled.data()};
      const int ds[4] = {static_cast<int>(g.scaled_width * 3)};
      sws_scale(resize.get(), sp, ss, 0, h, dp, ds);
      for (std::int64_t y = 0; y < clip_h; ++y)
        std::copy_n(scaled.data() + ((g.top + y) * g.scaled_width + g.left) * 3, clip_w * 3,
                    out.data() + (j * clip_h + y) * clip_w * 3);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["frames_decoded"] = static_cast<double>(decoded);
}

/// Clips at seeded random starts (Open-Sora's temporal_random_crop: 33 frames at interval 2),
/// eight an iteration, with clip_request::skip_unwanted (skip:1: unwanted non-reference frames
/// not decoded, the decoder drained after the last wanted packet) and without (skip:0: every
/// frame from the keyframe). Counter: frames decoded per frame delivered.
void BM_decode_random_clips(benchmark::State& state) {
  const std::string path = found_or_skip(state, video(state.range(0)));
  if (path.empty()) return;
  const auto probed = ff::probe(path);
  if (!probed.ok()) {
    state.SkipWithError(probed.error().c_str());
    return;
  }
  constexpr int clips = 8;
  std::vector<ff::clip_request> reqs;
  for (std::uint64_t seed = 0; seed < clips; ++seed) {
    const auto start =
        ff::temporal_random_crop(probed->num_frames, clip_frames, clip_interval, seed);
    if (!start) {
      state.SkipWithError("the clip is too short");
      return;
    }
    ff::clip_request req = bench_request(*start);
    req.skip_unwanted = state.range(1) != 0;
    reqs.push_back(req);
  }
  std::vector<std::uint8_t> out(ff::clip_bytes(reqs.front()));
  std::int64_t decoded = 0, delivered = 0;
  for (auto _ : state) {
    for (const ff::clip_request& req : reqs) {
      const auto r = ff::decode_clip(path, req, out);
      if (!r.ok()) {
        state.SkipWithError(r.error().c_str());
        return;
      }
      decoded += r->frames_decoded;
      delivered += r->frames_converted;
      benchmark::DoNotOptimize(out.data());
    }
  }
  state.counters["decoded_per_delivered"] =
      delivered > 0 ? static_cast<double>(decoded) / static_cast<double>(delivered) : 0.0;
}

/// A skewed corpus for step balance with decode cost (issue 33 item 4): `n` videos (360p/720p/
/// 1080p sources, GOP 30 or 250, 3-20 s at 30 fps, H.264/HEVC/VP9/AV1) assigned by the
/// Open-Sora 2.0 rule (interval 2) to 256px and 768px buckets of 33-129 frames. Per sample: its
/// expected decode seconds (`expected_frames_from_keyframe` × coded megapixels × the codec's
/// seconds per megapixel-frame: what a plan can know) and its simulated decode seconds (the
/// same from a seeded random start: the truth a loader meets).
struct cost_corpus {
  vbucket::bucket_config config;
  std::vector<vbucket::bucket_id> ids;
  std::vector<double> expected, actual;
};

cost_corpus make_cost_corpus(std::size_t n) {
  using vbucket::bucket_spec;
  const std::vector<bucket_spec> specs = {{"256px", 33, 1.0, 0.5, 24}, {"256px", 65, 1.0, 0.5, 12},
                                          {"256px", 97, 1.0, 0.5, 8},  {"256px", 129, 1.0, 0.5, 6},
                                          {"768px", 33, 0.5, 0.5, 4},  {"768px", 65, 0.5, 0.5, 2},
                                          {"768px", 97, 0.5, 0.5, 1},  {"768px", 129, 0.5, 0.5, 1}};
  cost_corpus out{vbucket::bucket_config(specs, vbucket::opensora_v2_tables{}), {}, {}, {}};
  const vbucket::bucket_config& config = out.config;
  // Seconds per coded megapixel-frame (vbucket, one thread; compare_decoders.py on 720p).
  const ff::decode_cost_model model{
      {{"h264", 0.0016}, {"hevc", 0.0020}, {"vp9", 0.0020}, {"av1", 0.0024}}, 0.002};
  const char* const codecs[] = {"h264", "h264", "h264", "hevc", "vp9", "av1"};
  constexpr std::int64_t interval = 2;  // 30 fps, fps_max 16
  vbucket::meta_table table;
  table.reserve(n);
  std::vector<std::int64_t> gop(n), pixels(n);
  std::vector<const char*> codec(n);
  std::uint64_t x = 12345;
  const auto next = [&x] { return x = vbucket::detail::mix64(x + vbucket::detail::golden_gamma); };
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t u = next();
    const int res = static_cast<int>(u % 10);  // 30% 360p, 40% 720p, 30% 1080p
    const std::int64_t h = res < 3 ? 360 : res < 7 ? 720 : 1080;
    const std::int64_t frames = 90 + static_cast<std::int64_t>((u >> 8) % 511);
    table.push_back({frames, h, h * 16 / 9, 30.0});
    gop[i] = ((u >> 20) & 1) != 0 ? 250 : 30;
    pixels[i] = h * (h * 16 / 9);
    codec[i] = codecs[(u >> 24) % 6];
  }
  out.ids =
      vbucket::assign_all(config, table, vbucket::opensora_v2_rule{}, vbucket::fast_source(7, 0));
  out.expected.assign(n, 0.0);
  out.actual.assign(n, 0.0);
  std::vector<std::int64_t> keys;
  for (std::size_t i = 0; i < n; ++i) {
    const vbucket::bucket_id b = out.ids[i];
    if (b < 0) continue;
    const std::int64_t t = config.frames_of(b).frames;
    const std::int64_t total = table[i].num_frames;
    keys.clear();
    for (std::int64_t k = 0; k < total; k += gop[i]) keys.push_back(k);
    out.expected[i] = model.seconds(codec[i], pixels[i],
                                    ff::expected_frames_from_keyframe(keys, total, t, interval));
    const auto start = ff::temporal_random_crop(total, t, interval, vbucket::detail::mix64(i));
    if (start)
      out.actual[i] =
          model.seconds(codec[i], pixels[i],
                        static_cast<double>(ff::frames_from_keyframe(keys, *start, t, interval)));
  }
  return out;
}

/// Step balance with decode cost, simulated on `make_cost_corpus(40000)` planned and dealt to 8
/// ranks. A rank's loader time for a step is the simulated decode time of its batch's clips.
/// mode:0 no balance; mode:1 balance (group 960) by the default cost (latent tokens); mode:2
/// balance by decode_aware_cost (each bucket's mean expected decode cost, from the keyframes);
/// mode:3 balance by per-sample costs (`make_epoch_plan(..., no_batch_cost{}, expected)`: each
/// batch's own Σ expected decode seconds); mode:4 (a bound, not achievable) as mode 3 with the
/// simulated seconds themselves as the costs, which shows what the expected cost leaves to the
/// spread of random starts. Counters: the mean and the 95th percentile over steps of max/mean
/// rank loader time, and Σ max / Σ mean.
void BM_decode_cost_balance(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const cost_corpus corpus = make_cost_corpus(40000);
  const vbucket::bucket_config& config = corpus.config;
  const std::span<const vbucket::bucket_id> ids(corpus.ids);
  constexpr std::uint32_t world = 8, group = 960;
  double mean_ratio = 0, sum_max = 0, sum_mean = 0, p95 = 0;
  std::uint64_t steps = 0;
  for (auto _ : state) {
    const vbucket::plan_options o{.seed = 1, .epoch = 0, .balance_group = mode == 0 ? 0u : group};
    const ff::decode_aware_cost decode_cost(config, ids, corpus.expected, 1e9);
    const auto plan =
        mode == 2   ? vbucket::make_epoch_plan(ids, config, o, decode_cost)
        : mode == 3 ? vbucket::make_epoch_plan(ids, config, o, ff::no_batch_cost{}, corpus.expected)
        : mode == 4 ? vbucket::make_epoch_plan(ids, config, o, ff::no_batch_cost{}, corpus.actual)
                    : vbucket::make_epoch_plan(ids, config, o);
    // Dealt: position p goes to step p / world, rank p % world.
    const vbucket::epoch_schedule schedule = plan.deal(world, 0, /*drop_last=*/true);
    std::vector<double> ratios;
    for (std::uint64_t k = 0; k < schedule.steps(); ++k) {
      double mx = 0, sum = 0;
      for (std::uint32_t r = 0; r < world; ++r) {
        double t = 0;
        for (const std::uint32_t i : schedule.at(k, r).indices) t += corpus.actual[i];
        mx = std::max(mx, t);
        sum += t;
      }
      if (sum <= 0) continue;
      ratios.push_back(mx / (sum / world));
      sum_max += mx;
      sum_mean += sum / world;
    }
    steps = ratios.size();
    for (double r : ratios) mean_ratio += r;
    mean_ratio /= static_cast<double>(std::max<std::size_t>(1, ratios.size()));
    std::sort(ratios.begin(), ratios.end());
    if (!ratios.empty()) p95 = ratios[ratios.size() * 95 / 100];
  }
  state.counters["steps"] = static_cast<double>(steps);
  state.counters["max_over_mean"] = mean_ratio;
  state.counters["p95_max_over_mean"] = p95;
  state.counters["sum_max_over_sum_mean"] = sum_mean > 0 ? sum_max / sum_mean : 0.0;
}

/// The planner's time for one epoch of `make_cost_corpus(1000000)` (balance group 960, latent
/// tokens): costs:0 without per-sample costs, costs:1 with them (each sample's expected decode
/// seconds × 2e5 tokens per second: the batch costs summed, hashed, and the batches sorted by
/// them).
void BM_decode_cost_balance_plan(benchmark::State& state) {
  const bool costs = state.range(0) != 0;
  static const cost_corpus corpus = make_cost_corpus(1000000);
  std::vector<double> weighted(corpus.expected);
  for (double& c : weighted) c *= 2e5;
  const std::span<const vbucket::bucket_id> ids(corpus.ids);
  const vbucket::plan_options o{.seed = 1, .epoch = 0, .balance_group = 960};
  for (auto _ : state) {
    const auto plan = costs ? vbucket::make_epoch_plan(ids, corpus.config, o,
                                                       vbucket::latent_tokens_cost{}, weighted)
                            : vbucket::make_epoch_plan(ids, corpus.config, o);
    benchmark::DoNotOptimize(plan.num_batches());
    state.counters["batches"] = static_cast<double>(plan.num_batches());
  }
  state.counters["samples"] = static_cast<double>(corpus.ids.size());
}

/// A clip far into a long video (5 min, 360p, 30 fps, GOP 60: h264_360p_300s.mp4 from
/// scripts/bench_decode.sh), with frame timestamps from the MP4 sample table (index:1) or by
/// demuxing from the file's start (index:0). The gap is what the sample table saves.
void BM_decode_long_video(benchmark::State& state) {
  const std::string path = found_or_skip(state, bench_file("h264_360p_300s.mp4"));
  if (path.empty()) return;
  ff::clip_request req = bench_request(state.range(0));
  req.use_index = state.range(1) != 0;
  const auto info = time_decode_clip(state, path, req);
  if (info) state.counters["indexed"] = info->indexed ? 1 : 0;
}

/// A clip deep into the same 5-minute stream in different containers (scripts/bench_decode.sh
/// makes them): H.264 in MP4 (container:0), MPEG-TS (1) and AVI (2); MPEG-2 in MP4 (3) and
/// an MPEG program stream (4) (ffmpeg's PS muxer writes H.264 that its demuxer cannot read).
/// Each container's figure is compared with the MP4 of the same stream.
void BM_decode_deep_clip(benchmark::State& state) {
  static const char* const files[] = {"h264_360p_300s.mp4", "h264_360p_300s.ts",
                                      "h264_360p_300s.avi", "mpeg2_360p_300s.mp4",
                                      "mpeg2_360p_300s.mpg"};
  const char* name = files[state.range(0)];
  state.SetLabel(name);
  const std::string path = found_or_skip(state, bench_file(name));
  if (path.empty()) return;
  const auto info = time_decode_clip(state, path, bench_request(state.range(1)));
  if (info) {
    state.counters["frames_decoded"] = static_cast<double>(info->frames_decoded);
    state.counters["seeked"] = info->seeked ? 1 : 0;
  }
}

/// The same deep clip (33 frames from frame 8900 of the 5-minute 360p stream) in each
/// container, with the frame index (`index_video`, built once before timing: what
/// `vbucket scan --index` records) and without: H.264 in MP4 (container:0), Matroska (1),
/// fragmented MP4 (2), MPEG-TS (3), AVI (4); MPEG-2 in MP4 (5) and an MPEG program stream (6);
/// VP9 in MP4 (7) and WebM (8). Each is compared with the MP4 of the same stream.
void BM_decode_long_video_index(benchmark::State& state) {
  static const char* const files[] = {
      "h264_360p_300s.mp4",  "h264_360p_300s.mkv", "h264_360p_300s_frag.mp4",
      "h264_360p_300s.ts",   "h264_360p_300s.avi", "mpeg2_360p_300s.mp4",
      "mpeg2_360p_300s.mpg", "vp9_360p_300s.mp4",  "vp9_360p_300s.webm"};
  const char* name = files[state.range(0)];
  state.SetLabel(name);
  const std::string path = found_or_skip(state, bench_file(name));
  if (path.empty()) return;
  ff::frame_index index;
  ff::clip_request req = bench_request(8900);
  if (state.range(1) != 0) {
    auto entry = ff::index_video(path);
    if (!entry.ok()) {
      state.SkipWithError(entry.error().c_str());
      return;
    }
    index.add(std::move(*entry));
    req.index = &index;
  }
  const auto info = time_decode_clip(state, path, req);
  if (info) {
    state.counters["index_used"] = info->index_used ? 1 : 0;
    state.counters["frames_decoded"] = static_cast<double>(info->frames_decoded);
  }
}

void clip_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"height", "start"});
  for (const std::int64_t height : {720, 1080})
    for (const std::int64_t start : {0, 120}) b->Args({height, start});
  b->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BM_decode_clip)->Name("decode/clip")->Apply(clip_args);
BENCHMARK(BM_decode_random_clips)
    ->Name("decode/random_clips")
    ->ArgNames({"height", "skip"})
    ->ArgsProduct({{720, 1080}, {0, 1}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decode_cost_balance)
    ->Name("decode/cost_balance")
    ->ArgNames({"mode"})
    ->DenseRange(0, 4)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decode_cost_balance_plan)
    ->Name("decode/cost_balance_plan")
    ->ArgNames({"costs"})
    ->DenseRange(0, 1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decode_whole_clip_first)->Name("decode/whole_clip_first")->Apply(clip_args);
BENCHMARK(BM_decode_long_video)
    ->Name("decode/long_video")
    ->ArgNames({"start", "index"})
    ->Args({8800, 0})
    ->Args({8800, 1})
    ->Args({4000, 0})
    ->Args({4000, 1})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decode_long_video_index)
    ->Name("decode/long_video_index")
    ->ArgNames({"container", "index"})
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7, 8}, {0, 1}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decode_deep_clip)
    ->Name("decode/deep_clip")
    ->ArgNames({"container", "start"})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {3500, 8900}})
    ->Unit(benchmark::kMillisecond);
