#!/usr/bin/env bash
# Generates the loader's end-to-end dataset into DIR (idempotent: skipped when DIR/.done
# exists): 48 short videos (H.264 and MPEG-4; 24, 25, 30 and 60 fps; landscape, portrait,
# square; two with rotation metadata), 12 images (PNG and JPEG), and four bad files: one that
# probes fine but cannot be decoded (media data overwritten with pseudo-random bytes), two that
# the probe recognises as unusable (cut right after the header, media data zeroed) and one that
# is not media.
# Every good file is large enough for Open-Sora 2.0's "256px" resolution.
#
#   bash tests/e2e/make_dataset.sh build/e2e-media
set -euo pipefail

out="${1:?usage: make_dataset.sh DIR}"
if [[ -f "${out}/.done" ]]; then
  exit 0
fi
command -v ffmpeg >/dev/null || { echo "make_dataset: the ffmpeg command is needed" >&2; exit 1; }
rm -rf "${out}"
mkdir -p "${out}/videos/a" "${out}/videos/b" "${out}/images" "${out}/bad"

sizes=(320x240 240x320 288x288 352x200 200x352 384x216)
rates=(24 25 30 60)
durations=(0.6 1.0 1.4 1.8)
n=0
for size in "${sizes[@]}"; do
  for rate in "${rates[@]}"; do
    for codec in libx264 mpeg4; do
      dur=${durations[$((n % 4))]}
      sub=$([[ $((n % 2)) == 0 ]] && echo a || echo b)
      extra=()
      if ((n == 5 || n == 17)); then
        extra=(-metadata:s:v:0 rotate=90)
      fi
      ffmpeg -nostdin -v error -f lavfi -i "testsrc2=size=${size}:rate=${rate}" -t "${dur}" \
        -c:v "${codec}" -g 12 -pix_fmt yuv420p "${extra[@]}" \
        "${out}/videos/${sub}/clip_$(printf %02d ${n})_${size}_${rate}fps_${codec}.mp4"
      n=$((n + 1))
    done
  done
done
i=0
for size in 320x240 240x320 300x300 400x225 225x400 256x256; do
  for ext in png jpg; do
    ffmpeg -nostdin -v error -f lavfi -i "testsrc2=size=${size}:rate=1" -frames:v 1 \
      "${out}/images/image_$(printf %02d ${i})_${size}.${ext}"
    i=$((i + 1))
  done
done

# Bad files. All but not_media.mp4 keep their header (moov first); garbled.mp4 probes as a
# 320x240 video (its samples' data are there, not zeros) and fails only when decoded.
ffmpeg -nostdin -v error -f lavfi -i testsrc2=size=320x240:rate=25 -t 1 -c:v libx264 -g 10 \
  -pix_fmt yuv420p -movflags +faststart "${out}/bad/source.mp4"
python3 - "${out}/bad" <<'PY'
import pathlib, random, sys
bad = pathlib.Path(sys.argv[1])
data = (bad / "source.mp4").read_bytes()
mdat = data.find(b"mdat")
(bad / "truncated.mp4").write_bytes(data[: mdat + 200])
(bad / "zeroed.mp4").write_bytes(data[: mdat + 4] + bytes(len(data) - mdat - 4))
(bad / "garbled.mp4").write_bytes(data[: mdat + 4] + random.Random(7).randbytes(len(data) - mdat - 4))
(bad / "not_media.mp4").write_bytes(b"this is not a video file\n" * 40)
(bad / "source.mp4").unlink()
PY
touch "${out}/.done"
echo "make_dataset: $(find "${out}" -type f ! -name .done | wc -l) files in ${out}"
