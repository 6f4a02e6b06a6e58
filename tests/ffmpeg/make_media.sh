#!/usr/bin/env bash
# Generates the FFmpeg adapter's test media into DIR with the ffmpeg command (small: at most
# 320x240, at most 3 s, but for three 64x48 ones of 24 s), then what ffprobe says about each
# good file (DIR/expected.csv), and bad files made by mangling good ones. Every frame's hue
# differs from its neighbours' (hue=H=n), so decoding the wrong frame shows in the PSNR.
#
#   bash tests/ffmpeg/make_media.sh DIR
set -euo pipefail

dir=${1:?usage: make_media.sh DIR}
mkdir -p "$dir"
cd "$dir"
rm -f ./*.mp4 ./*.mkv ./*.webm ./*.avi ./*.png ./*.jpg ./*.m4a ./*.y4m ./*.txt ./*.csv

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
  ff -f lavfi -i "$(src 64 48 25 24)" -c:v libx264 -preset veryfast -g 50 -bf 3 -x264-params open_gop=1 \
    -pix_fmt yuv420p h264_64x48_25fps_opengop.mp4
fi
ff -f lavfi -i "$(src 128 96 30 2)" -c:v mpeg4 -q:v 3 -g 15 mpeg4_128x96_30fps.avi
ff -f lavfi -i "$(src 96 64 60 1)" -c:v mpeg4 -q:v 3 -g 20 -bf 2 mpeg4_96x64_60fps.mp4
if have libvpx-vp9; then
  ff -f lavfi -i "$(src 160 90 30 1.5)" -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -g 15 vp9_160x90_30fps.webm
fi
ff -f lavfi -i "$(src 100 60 1 1)" -frames:v 1 image_100x60.png
ff -f lavfi -i "$(src 120 80 1 1)" -frames:v 1 -q:v 3 image_120x80.jpg

# What ffprobe says: file,frames,width,height,avg_frame_rate,rotation (frames counted by
# decoding, as -count_frames does).
echo "file,frames,width,height,fps,rotation" >expected.csv
for f in *.mp4 *.mkv *.webm *.avi *.png *.jpg; do
  [[ -e $f ]] || continue
  info=$(ffprobe -v error -select_streams v:0 -count_frames \
    -show_entries stream=nb_read_frames,width,height,avg_frame_rate:stream_side_data=rotation \
    -of default=noprint_wrappers=1 "$f")
  get() { sed -n "s/^$1=//p" <<<"$info" | head -n1; }
  rotation=$(get rotation)
  echo "$f,$(get nb_read_frames),$(get width),$(get height),$(get avg_frame_rate),${rotation:-0}" >>expected.csv
done

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
