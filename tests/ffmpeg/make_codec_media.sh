#!/usr/bin/env bash
# Generates the media of tests/ffmpeg/decode_skip.cpp into DIR: tiny clips (64x48, 96 frames at
# 25 fps, a hue that turns every frame) in every codec the ffmpeg command can encode here, with
# the GOP structures whose decode order differs from presentation order: B-pyramids (B-frames
# other frames refer to), plain B-frames (none do), open GOPs (frames decoded after a keyframe
# but shown before it), long GOPs, and VP9/AV1 hidden frames (alt-ref). A codec whose encoder
# is missing is left out (the test says which).
#
#   bash tests/ffmpeg/make_codec_media.sh DIR
set -euo pipefail

dir=${1:?usage: make_codec_media.sh DIR}
mkdir -p "$dir"
cd "$dir"
rm -f ./*.mp4 ./*.mkv ./*.webm

ff() { ffmpeg -nostdin -v error -y "$@"; }
src="testsrc=size=64x48:rate=25:duration=3.84,hue=H=n*0.9"
encoders=$(ffmpeg -hide_banner -encoders 2>/dev/null)
have() { grep -q " $1 " <<<"$encoders"; }

if have libx264; then
  x264() { ff -f lavfi -i "$src" -c:v libx264 -preset veryfast -bf 3 -pix_fmt yuv420p "$@"; }
  x264 -g 30 -x264-params b-pyramid=normal h264_pyramid_g30.mp4
  x264 -g 30 -x264-params b-pyramid=none h264_bframes_g30.mp4
  x264 -g 250 -x264-params b-pyramid=normal h264_pyramid_g250.mp4
  x264 -g 30 -x264-params open-gop=1 h264_opengop_g30.mp4
  ff -i h264_opengop_g30.mp4 -c copy h264_opengop_g30.mkv
fi
if have libx265; then
  x265() { ff -f lavfi -i "$src" -c:v libx265 -preset ultrafast -pix_fmt yuv420p "$@"; }
  # x265's GOPs are open by default.
  x265 -x265-params log-level=error:keyint=30:bframes=4:b-pyramid=1 hevc_pyramid_g30.mp4
  x265 -x265-params log-level=error:keyint=250:bframes=3:b-pyramid=0 hevc_bframes_g250.mkv
fi
if have libvpx-vp9; then
  ff -f lavfi -i "$src" -c:v libvpx-vp9 -deadline good -cpu-used 8 -g 30 -auto-alt-ref 1 \
    -lag-in-frames 16 vp9_altref_g30.webm
fi
if have libaom-av1; then
  ff -f lavfi -i "$src" -c:v libaom-av1 -usage good -cpu-used 8 -g 30 -lag-in-frames 16 \
    av1_altref_g30.mkv
fi
