#!/usr/bin/env bash
# Clip-decoding benchmark of the FFmpeg adapter against the ffmpeg command, single-threaded.
# Makes two 10 s H.264 clips (30 fps, GOP 60; 720p and 1080p) in build-bench-media/, builds
# vbucket_bench and the CLI (Release, build-bench/), and times the same job three ways:
#   - vbucket_bench decode/clip: vbucket::ffmpeg::decode_clip in process (median of 10);
#   - `vbucket decode ... --threads 1` as a process (median of 11 runs);
#   - the ffmpeg command doing the same work (median of 11 runs):
#       ffmpeg -threads 1 -filter_threads 1 -i CLIP \
#         -vf "select='between(n,S,S+64)*not(mod(n-S,2))',scale=341:192:flags=bilinear,crop=336:192" \
#         -fps_mode passthrough -frames:v 33 -f rawvideo -pix_fmt rgb24 -y /dev/null
# for a 33-frame, interval-2 clip at 192x336 starting at frame 0 and at frame 120; plus
# vbucket_bench decode/whole_clip_first (decode and convert the whole clip, then crop: what
# reading the whole video first costs). Then a 33-frame clip at frames 4000 and 8800 of a
# 5-minute 360p video, with and without the MP4 sample table (decode/long_video). Prints
# tables of medians and ratios. Last, a deep clip (frames 3500 and 8900) of the 5-minute video
# in MPEG-TS and AVI, and of an MPEG-2 version in an MPEG program stream, each against its MP4
# (decode/deep_clip). Then the same clip at frame 8900 in nine containers (H.264 in MP4,
# Matroska, fragmented MP4, TS, AVI; MPEG-2 in MP4 and PS; VP9 in MP4 and WebM) without and
# with the frame index of `vbucket scan --index` (decode/long_video_index).
#
#   bash scripts/bench_decode.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
media=build-bench-media
mkdir -p "$media"
for h in 720 1080; do
  w=$((h * 16 / 9))
  clip="$media/h264_${h}p_10s.mp4"
  if [[ ! -s $clip ]]; then
    echo "making $clip"
    # Moving test pattern plus light temporal noise: about 6 Mbit/s at 1080p, 3 at 720p, like
    # real footage at CRF 23 (without noise x264 squeezes the pattern to almost nothing).
    ffmpeg -nostdin -v error -y -f lavfi \
      -i "testsrc2=size=${w}x${h}:rate=30:duration=10,noise=alls=2:allf=t" \
      -c:v libx264 -preset fast -crf 23 -g 60 -keyint_min 60 -sc_threshold 0 -pix_fmt yuv420p \
      "$clip"
  fi
done

long="$media/h264_360p_300s.mp4"
if [[ ! -s $long ]]; then
  echo "making $long"
  ffmpeg -nostdin -v error -y -f lavfi -i "testsrc2=size=640x360:rate=30:duration=300" \
    -c:v libx264 -preset superfast -crf 23 -g 60 -keyint_min 60 -sc_threshold 0 \
    -pix_fmt yuv420p "$long"
fi

# The same stream in MPEG-TS and AVI, and an MPEG-2 stream in MP4 and an MPEG program stream
# (decode/deep_clip: a deep clip per container against the MP4 of the same stream).
for ext in ts avi; do
  [[ -s $media/h264_360p_300s.$ext ]] ||
    ffmpeg -nostdin -v error -y -i "$long" -c copy "$media/h264_360p_300s.$ext"
done
mpeg2="$media/mpeg2_360p_300s.mp4"
if [[ ! -s $mpeg2 ]]; then
  echo "making $mpeg2"
  ffmpeg -nostdin -v error -y -f lavfi -i "testsrc2=size=640x360:rate=30:duration=300" \
    -c:v mpeg2video -q:v 4 -g 60 -bf 2 "$mpeg2"
fi
[[ -s $media/mpeg2_360p_300s.mpg ]] ||
  ffmpeg -nostdin -v quiet -y -i "$mpeg2" -c copy -f vob "$media/mpeg2_360p_300s.mpg"
# For the frame index (decode/long_video_index): the H.264 stream in Matroska and fragmented
# MP4, and a VP9 encoding of the same pattern in WebM and MP4.
[[ -s $media/h264_360p_300s.mkv ]] ||
  ffmpeg -nostdin -v error -y -i "$long" -c copy "$media/h264_360p_300s.mkv"
[[ -s $media/h264_360p_300s_frag.mp4 ]] ||
  ffmpeg -nostdin -v error -y -i "$long" -c copy -movflags frag_keyframe+empty_moov \
    "$media/h264_360p_300s_frag.mp4"
vp9="$media/vp9_360p_300s.webm"
if [[ ! -s $vp9 ]]; then
  echo "making $vp9"
  ffmpeg -nostdin -v error -y -f lavfi -i "testsrc2=size=640x360:rate=30:duration=300" \
    -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -row-mt 1 -g 60 -b:v 1M "$vp9"
fi
[[ -s $media/vp9_360p_300s.mp4 ]] ||
  ffmpeg -nostdin -v error -y -i "$vp9" -c copy "$media/vp9_360p_300s.mp4"

generator=()
[[ -f build-bench/CMakeCache.txt ]] || generator=(-G Ninja)
cmake -S . -B build-bench "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DVBUCKET_BUILD_TESTS=OFF \
  -DVBUCKET_BUILD_EXAMPLES=OFF -DVBUCKET_BUILD_BENCH=ON -DVBUCKET_BUILD_TOOLS=ON \
  -DVBUCKET_INSTALL=OFF -DVBUCKET_WERROR=OFF >/dev/null
cmake --build build-bench --parallel "$(nproc)" --target vbucket_bench vbucket_cli

# median_ms CMD...: runs CMD 11 times (after one warm-up), prints the median wall time in ms.
median_ms() {
  "$@" >/dev/null 2>&1
  local times=() i start end
  for i in $(seq 11); do
    start=$(date +%s%N)
    "$@" >/dev/null 2>&1
    end=$(date +%s%N)
    times+=($(((end - start) / 1000)))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n 6p | awk '{ printf "%.1f", $1 / 1000 }'
}

json=$(mktemp)
trap 'rm -f "$json"' EXIT
VBUCKET_BENCH_VIDEO_DIR=$media ./build-bench/bench/vbucket_bench --benchmark_filter='decode/' \
  --benchmark_repetitions=10 --benchmark_report_aggregates_only=true \
  --benchmark_out="$json" --benchmark_out_format=json >/dev/null
# bench_ms NAME: the median real time of a benchmark, in ms.
bench_ms() {
  python3 -c '
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b["name"] == sys.argv[2] + "_median":
        print("%.1f" % b["real_time"])' "$json" "$1"
}

printf '%-6s %-6s %12s %12s %12s %14s %10s %10s\n' clip start "ffmpeg(ms)" "vbucket(ms)" \
  "cli(ms)" "whole-first" "in-proc" "cli"
for h in 720 1080; do
  clip="$media/h264_${h}p_10s.mp4"
  for s in 0 120; do
    e=$((s + 64))
    ffmpeg_ms=$(median_ms ffmpeg -nostdin -v error -threads 1 -filter_threads 1 -i "$clip" \
      -vf "select='between(n,$s,$e)*not(mod(n-$s,2))',scale=341:192:flags=bilinear,crop=336:192" \
      -fps_mode passthrough -frames:v 33 -f rawvideo -pix_fmt rgb24 -y /dev/null)
    cli_ms=$(median_ms ./build-bench/vbucket decode "$clip" --start "$s" --frames 33 \
      --interval 2 --size 192x336 --threads 1 --out /dev/null)
    lib_ms=$(bench_ms "decode/clip/height:$h/start:$s")
    whole_ms=$(bench_ms "decode/whole_clip_first/height:$h/start:$s")
    printf '%-6s %-6s %12s %12s %12s %14s %9.2fx %9.2fx\n' "${h}p" "$s" "$ffmpeg_ms" "$lib_ms" \
      "$cli_ms" "$whole_ms" "$(awk -v a="$lib_ms" -v b="$ffmpeg_ms" 'BEGIN { print a / b }')" \
      "$(awk -v a="$cli_ms" -v b="$ffmpeg_ms" 'BEGIN { print a / b }')"
  done
done
echo "in-proc, cli: vbucket's time / the ffmpeg command's (target <= 1.2x); whole-first: decode"
echo "and convert the whole clip first, then crop (vbucket_bench decode/whole_clip_first)."

# Far into a 5-minute video: timestamps from the MP4 sample table against demuxing from the
# start (clip_request::use_index), in process.
printf '\n%-28s %14s %14s %8s\n' "long video (360p, 300 s)" "table (ms)" "scan (ms)" ratio
for s in 4000 8800; do
  with=$(bench_ms "decode/long_video/start:$s/index:1")
  without=$(bench_ms "decode/long_video/start:$s/index:0")
  printf '%-28s %14s %14s %7.2fx\n' "start $s" "$with" "$without" \
    "$(awk -v a="$with" -v b="$without" 'BEGIN { print a / b }')"
done

# A deep clip (33 frames from S, interval 2) in each container against the MP4 of the same
# stream (target: <= 3x). MPEG-TS seeks by byte position and time; AVI and the program stream
# have no presentation times and start at a keyframe from the AVI index or a demux pass.
printf '\n%-34s %8s %12s %12s %8s\n' "deep clip (360p, 300 s)" start "ms" "MP4 (ms)" ratio
for s in 3500 8900; do
  for c in 1:0:"H.264 MPEG-TS" 2:0:"H.264 AVI" 4:3:"MPEG-2 program stream"; do
    IFS=: read -r container reference label <<<"$c"
    ms=$(bench_ms "decode/deep_clip/container:$container/start:$s")
    ref=$(bench_ms "decode/deep_clip/container:$reference/start:$s")
    printf '%-34s %8s %12s %12s %7.2fx\n' "$label" "$s" "$ms" "$ref" \
      "$(awk -v a="$ms" -v b="$ref" 'BEGIN { print a / b }')"
  done
done

# The frame index (scan --index): the same clip at frame 8900 in each container, without and
# with the index, and the indexed time against the MP4 of the same stream (target: <= 3x).
printf '\n%-30s %12s %12s %12s %10s\n' "frame index (360p, 300 s, 8900)" "no index" "index" \
  "MP4 (ms)" "index/MP4"
for c in 0:0:"H.264 MP4" 1:0:"H.264 Matroska" 2:0:"H.264 fragmented MP4" 3:0:"H.264 MPEG-TS" \
  4:0:"H.264 AVI" 5:5:"MPEG-2 MP4" 6:5:"MPEG-2 program stream" 7:7:"VP9 MP4" 8:7:"VP9 WebM"; do
  IFS=: read -r container reference label <<<"$c"
  without=$(bench_ms "decode/long_video_index/container:$container/index:0")
  with=$(bench_ms "decode/long_video_index/container:$container/index:1")
  ref=$(bench_ms "decode/long_video_index/container:$reference/index:0")
  printf '%-30s %12s %12s %12s %9.2fx\n' "$label" "$without" "$with" "$ref" \
    "$(awk -v a="$with" -v b="$ref" 'BEGIN { print a / b }')"
done
