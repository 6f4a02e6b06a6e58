#!/usr/bin/env bash
# Writes a caption CSV of N rows in Open-Sora's layout (path,text,num_frames,height,width,fps,
# aspect_ratio), a quoted caption with commas in every row, for measuring `vbucket plan` on
# large metadata (not committed: 100 M rows are about 9 GB). Sizes, lengths and rates cycle
# through common values; about 1 row in 7 is an image (1 frame, empty fps).
#
#   bash bench/make_caption_csv.sh 100000000 /tmp/captions_100m.csv
#   /usr/bin/time -v build-rel/vbucket plan --config tests/data/config_opensora_v2.json \
#     --meta /tmp/captions_100m.csv --world 1024 --rank 0 --seed 1 --epoch 0 --out /tmp/b0.jsonl
set -euo pipefail
n=${1:?usage: make_caption_csv.sh ROWS OUT.csv}
out=${2:?usage: make_caption_csv.sh ROWS OUT.csv}
awk -v n="$n" 'BEGIN {
  split("1920x1080 1280x720 854x480 640x360 1080x1920 720x1280 3840x2160 1080x1080 1440x1080 426x240 2560x1440", sizes, " ")
  split("23.976 24 25 29.97 30 50 60", rates, " ")
  split("a person walks along a beach, at sunset|a red car drives through a city, at night|a dog runs across a field, slow motion|close-up of hands cooking, indoors|aerial view of mountains, with clouds", texts, "|")
  print "path,text,num_frames,height,width,fps,aspect_ratio"
  for (i = 0; i < n; i++) {
    split(sizes[i % 11 + 1], wh, "x")
    if (i % 7 == 3) { frames = 1; fps = "" } else { frames = 17 + (i * 37) % 900; fps = rates[i % 7 + 1] }
    printf "clips/%09d.mp4,\"%s, take %d\",%d,%d,%d,%s,%.2f\n", i, texts[i % 5 + 1], i % 97, frames, wh[2], wh[1], fps, wh[2] / wh[1]
  }
}' >"$out"
