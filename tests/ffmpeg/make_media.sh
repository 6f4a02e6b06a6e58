#!/usr/bin/env bash
# Generates the FFmpeg adapter's test media into DIR with the ffmpeg command (small: at most
# 320x240, at most 3 s, but for some 64x48 ones of 24 s), then what ffprobe says about each
# good file (DIR/expected.csv), and bad files made by mangling good ones. Every frame's hue
# differs from its neighbours' (hue=H=n), so decoding the wrong frame shows in the PSNR.
#
#   bash tests/ffmpeg/make_media.sh DIR
set -euo pipefail

dir=${1:?usage: make_media.sh DIR}
mkdir -p "$dir"
cd "$dir"
rm -f ./*.mp4 ./*.mkv ./*.webm ./*.avi ./*.mpg ./*.ts ./*.png ./*.jpg ./*.m4a ./*.y4m ./*.txt ./*.csv

ff() { ffmpeg -nostdin -v error -y "$@"; }
src() {  # src W H FPS SECONDS: a test pattern whose hue turns every frame
  echo "testsrc=size=$1x$2:rate=$3:duration=$4,hue=H=n*0.9"
}

encoders=$(ffmpeg -hide_banner -encoders 2>/dev/null)
have() { grep -q " $1 " <<<"$encoders"; }

# name|lavfi source|codec options|extension
if have libx264; then
  ff -f lavfi -i "$(src 320 240 24 2)" -c:v libx264 -preset veryfast -g 12 -pix_fmt yuv420p h264_320x240_24fps.mp4
  ff -f lavfi -i "$(src 160 120 25 2)" -c:v libx264 -preset veryfast -g 25 -bf 3 -pix_fmt yuv420p -movflags +faststart h264_160x120_25fps.mp4
  ff -f lavfi -i "$(src 176 144 60 1)" -c:v libx264 -preset veryfast -g 30 -pix_fmt yuv420p h264_176x144_60fps.mkv
  ff -f lavfi -i "$(src 90 160 25 2)" -c:v libx264 -preset veryfast -g 10 -pix_fmt yuv420p h264_90x160_25fps_portrait.mp4
  ff -i h264_160x120_25fps.mp4 -c copy -metadata:s:v:0 rotate=90 h264_160x120_25fps_rotate90.mp4
  ff -i h264_160x120_25fps.mp4 -c copy -metadata:s:v:0 rotate=180 h264_160x120_25fps_rotate180.mp4
  # Variable frame rate: frames 0-29 1/30 s apart, then 1/10 s apart.
  ff -f lavfi -i "$(src 128 96 30 2)" -vf "setpts='(N+if(gte(N,30),2*(N-30),0))/30/TB'" \
    -fps_mode vfr -c:v libx264 -preset veryfast -g 15 -pix_fmt yuv420p h264_128x96_vfr.mp4
  # Long enough (600 frames) for clip timestamps to come from the MP4 sample table; the same
  # stream fragmented (the table is not complete up front), and an open-GOP encoding (frames
  # decoded after a keyframe but shown before it).
  ff -f lavfi -i "$(src 64 48 25 24)" -c:v libx264 -preset veryfast -g 50 -bf 3 -pix_fmt yuv420p h264_64x48_25fps_long.mp4
  ff -i h264_64x48_25fps_long.mp4 -c copy -movflags frag_keyframe+empty_moov h264_64x48_25fps_long_frag.mp4
  # The same in MPEG-TS (seeks by byte position and decode time: it can land after a frame).
  ff -i h264_64x48_25fps_long.mp4 -c copy h264_64x48_25fps_long.ts
  # And in AVI: no presentation times (frames are numbered in the decoder's output order); a
  # deep clip starts at a keyframe found in the AVI index.
  ff -i h264_64x48_25fps_long.mp4 -c copy h264_64x48_25fps_long.avi
  # The same in Matroska (a deep clip through the frame index, `scan --index`).
  ff -i h264_64x48_25fps_long.mp4 -c copy h264_64x48_25fps_long.mkv
  ff -f lavfi -i "$(src 64 48 25 24)" -c:v libx264 -preset veryfast -g 50 -bf 3 -x264-params open_gop=1 \
    -pix_fmt yuv420p h264_64x48_25fps_opengop.mp4
  # The open-GOP stream in Matroska (frame index: leading frames decoded after a keyframe).
  ff -i h264_64x48_25fps_opengop.mp4 -c copy h264_64x48_25fps_opengop.mkv
  # An edit list: cut with -c copy, the samples from the keyframe before 1.3 s are kept in the
  # file but discarded by the edit list (47 samples, 39 frames shown).
  ff -f lavfi -i "$(src 160 120 25 4.8)" -c:v libx264 -preset veryfast -g 25 -bf 3 -pix_fmt yuv420p \
    -movflags +faststart h264_160x120_25fps_5s.mp4
  ff -ss 1.3 -t 1.5 -i h264_160x120_25fps_5s.mp4 -c copy h264_160x120_25fps_editlist.mp4
  # Anamorphic: 180x120 stored, sample aspect ratio 32:27 (display 16:9, 213x120) in the H.264
  # stream and the MP4 (pasp) or Matroska (display size) container; and only in the MP4
  # container (-aspect with -c copy: the stream says 1:1, the container wins, as in ffmpeg).
  ff -f lavfi -i "$(src 180 120 25 1),setsar=32/27" -c:v libx264 -preset veryfast -g 10 -pix_fmt yuv420p h264_180x120_sar32x27.mp4
  ff -f lavfi -i "$(src 180 120 25 1),setsar=32/27" -c:v libx264 -preset veryfast -g 10 -pix_fmt yuv420p h264_180x120_sar32x27.mkv
  ff -i h264_180x120_sar32x27.mp4 -c copy -metadata:s:v:0 rotate=90 h264_180x120_sar32x27_rotate90.mp4
  ff -f lavfi -i "$(src 180 120 25 1)" -c:v libx264 -preset veryfast -g 10 -pix_fmt yuv420p square.tmp.mp4
  ff -i square.tmp.mp4 -c copy -aspect 16:9 h264_180x120_container_aspect.mp4
  rm -f square.tmp.mp4
fi
# MPEG-2 program stream, 16:9 in the sequence header only (the stream level: no container
# field; 192x128 stored, sample aspect ratio 32:27, display 228x128).
ff -f lavfi -i "$(src 192 128 25 1)" -c:v mpeg2video -q:v 3 -g 12 -aspect 16:9 mpeg2_192x128_aspect16x9.mpg
ff -f lavfi -i "$(src 128 96 30 2)" -c:v mpeg4 -q:v 3 -g 15 mpeg4_128x96_30fps.avi
# Long (600 frames) MPEG-2 in a program stream, open GOPs: frames that start inside another's
# PES packet have no timestamp (numbered in output order; a deep clip starts at a keyframe
# found by a demux pass and a byte seek); MPEG-4 Part 2 with B-frames in AVI.
ff -f lavfi -i "$(src 64 48 25 24)" -c:v mpeg2video -q:v 4 -g 12 -bf 2 -f vob mpeg2_64x48_25fps_long.mpg
ff -f lavfi -i "$(src 64 48 25 24)" -c:v mpeg4 -q:v 4 -g 12 -bf 2 mpeg4_64x48_25fps_long.avi
ff -f lavfi -i "$(src 96 64 60 1)" -c:v mpeg4 -q:v 3 -g 20 -bf 2 mpeg4_96x64_60fps.mp4
if have libvpx-vp9; then
  ff -f lavfi -i "$(src 160 90 30 1.5)" -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -g 15 vp9_160x90_30fps.webm
  # Long (480 frames, GOP 12) WebM for the frame index.
  ff -f lavfi -i "$(src 64 48 25 19.2)" -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -g 12 vp9_64x48_25fps_long.webm
fi
ff -f lavfi -i "$(src 100 60 1 1)" -frames:v 1 image_100x60.png
ff -f lavfi -i "$(src 120 80 1 1)" -frames:v 1 -q:v 3 image_120x80.jpg

# What ffprobe says: file,frames,width,height,avg_frame_rate,rotation,sample_aspect_ratio
# (frames counted by decoding, as -count_frames does; stored width and height).
echo "file,frames,width,height,fps,rotation,sar" >expected.csv
for f in *.mp4 *.mkv *.webm *.avi *.mpg *.ts *.png *.jpg; do
  [[ -e $f ]] || continue
  info=$(ffprobe -v error -select_streams v:0 -count_frames \
    -show_entries stream=nb_read_frames,width,height,avg_frame_rate,sample_aspect_ratio:stream_side_data=rotation \
    -of default=noprint_wrappers=1 "$f")
  get() { sed -n "s/^$1=//p" <<<"$info" | head -n1; }
  rotation=$(get rotation)
  sar=$(get sample_aspect_ratio)
  [[ $sar =~ ^[0-9]+:[0-9]+$ && $sar != 0:* ]] || sar=1:1
  echo "$f,$(get nb_read_frames),$(get width),$(get height),$(get avg_frame_rate),${rotation:-0},$sar" >>expected.csv
done

# The long H.264 AVI cut at 3/4: no index (idx1 is at the end), about 450 frames (not in
# expected.csv: the header still announces 600).
if [[ -e h264_64x48_25fps_long.avi ]]; then
  size=$(stat -c %s h264_64x48_25fps_long.avi)
  head -c $((size * 3 / 4)) h264_64x48_25fps_long.avi >h264_64x48_25fps_long_noindex.avi
fi

# Two video streams, neither the default (not in expected.csv: ffprobe's v:0 is the first).
# av_find_best_stream takes a stream not marked for the visually impaired first; with nothing
# to tell them apart, the first (ffmpeg's command line would take the larger).
two=(-f lavfi -i "$(src 64 48 25 1)" -f lavfi -i "$(src 160 120 25 1)" -map 0 -map 1 -c:v mpeg4 -q:v 3
  -disposition:v:1 0 -default_mode passthrough)
ff "${two[@]}" -disposition:v:0 visual_impaired streams_two_impaired_first.mkv
ff "${two[@]}" -disposition:v:0 0 streams_two_plain.mkv

# Damaged faststart MP4s (moov before mdat), and what the ffmpeg command decodes of each
# (damaged.csv: file,frames): cut in the middle, cut right after the moov box (no media data
# at all: an error), zeros written over the middle 40%.
if [[ -e h264_160x120_25fps_5s.mp4 ]]; then
  python3 - h264_160x120_25fps_5s.mp4 <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
at = 0
while at + 8 <= len(data):
    size, kind = struct.unpack(">I4s", data[at:at + 8])
    if kind == b"moov":
        moov_end = at + size
    at += size
assert data.find(b"mdat") > moov_end - 8, "not faststart"
open("damaged_cut_middle.mp4", "wb").write(data[: len(data) // 2])
open("bad_header_only.mp4", "wb").write(data[:moov_end])
zeroed = bytearray(data)
a, b = len(data) * 3 // 10, len(data) * 7 // 10
zeroed[a:b] = bytes(b - a)
open("damaged_zeros_middle.mp4", "wb").write(zeroed)
PY
  # Cut: the frames whose data lie wholly before the cut (ffprobe's packets of the whole file;
  # a decoder may show the top of the frame the cut splits, vbucket counts whole ones only).
  # Zeros: the frames the ffmpeg command decodes.
  cut_size=$(stat -c %s damaged_cut_middle.mp4)
  echo "file,frames" >damaged.csv
  echo "damaged_cut_middle.mp4,$(ffprobe -v error -select_streams v:0 -show_entries packet=size,pos \
    -of csv=p=0 h264_160x120_25fps_5s.mp4 | awk -F, -v n="$cut_size" '$1 + $2 <= n { c++ } END { print c }')" >>damaged.csv
  echo "damaged_zeros_middle.mp4,$(ffmpeg -nostdin -v quiet -i damaged_zeros_middle.mp4 -map 0:v:0 \
    -f framecrc - | grep -c '^0,')" >>damaged.csv
fi

# Bad files.
ff -f lavfi -i "sine=frequency=440:duration=1" -c:a aac bad_audio_only.m4a
: >bad_zero_bytes.mp4
printf 'this is not a video\n%.0s' {1..50} >bad_text.mp4
base=h264_160x120_25fps.mp4
[[ -e $base ]] || base=mpeg4_96x64_60fps.mp4
size=$(stat -c %s "$base")
head -c $((size * 2 / 5)) "$base" >bad_truncated.mp4
head -c $((size - 1000)) "$base" >bad_truncated_tail.mp4
cp "$base" bad_corrupt.mp4
printf 'corrupt data! %.0s' {1..110} | head -c 1500 >garbage.bin
for at in 30 50 70; do
  dd if=garbage.bin of=bad_corrupt.mp4 bs=1 seek=$((size * at / 100)) conv=notrunc status=none
done
rm -f garbage.bin
# Absurd dimensions: a Y4M header claiming 100000x100000 frames, and a PNG whose header says
# 65536x65536.
printf 'YUV4MPEG2 W100000 H100000 F25:1 Ip A1:1 C420jpeg\nFRAME\nxxxxxxxx' >bad_huge.y4m
cp image_100x60.png bad_huge.png
printf '\x00\x01\x00\x00\x00\x01\x00\x00' | dd of=bad_huge.png bs=1 seek=16 conv=notrunc status=none
echo "media: $(ls | wc -l) files in $dir"
