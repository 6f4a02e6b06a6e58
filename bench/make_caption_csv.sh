#!/usr/bin/env bash
# Writes a caption CSV of N rows in Open-Sora's layout (path,text,num_frames,height,width,fps,
# aspect_ratio), a quoted caption with commas in every row, for measuring `vbucket plan` on
# large metadata (not committed: 100 M rows are about 9 GB). Sizes, lengths and rates cycle
# through common values; about 1 row in 7 is an image (1 frame, empty fps). The rows are written
# by a small C program compiled on the spot (cc), about 2 minutes for 100 M rows.
#
#   bash bench/make_caption_csv.sh 100000000 /tmp/captions_100m.csv
#   /usr/bin/time -v build-rel/vbucket plan --config tests/data/config_opensora_v2.json \
#     --meta /tmp/captions_100m.csv --world 1024 --rank 0 --seed 1 --epoch 0 --out /tmp/b0.jsonl
set -euo pipefail
n=${1:?usage: make_caption_csv.sh ROWS OUT.csv}
out=${2:?usage: make_caption_csv.sh ROWS OUT.csv}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/gen.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  static const int w[] = {1920, 1280, 854, 640, 1080, 720, 3840, 1080, 1440, 426, 2560};
  static const int h[] = {1080, 720, 480, 360, 1920, 1280, 2160, 1080, 1080, 240, 1440};
  static const char* rates[] = {"23.976", "24", "25", "29.97", "30", "50", "60"};
  static const char* texts[] = {"a person walks along a beach, at sunset",
                                "a red car drives through a city, at night",
                                "a dog runs across a field, slow motion",
                                "close-up of hands cooking, indoors",
                                "aerial view of mountains, with clouds"};
  const long long n = atoll(argv[1]);
  FILE* f = fopen(argv[2], "w");
  if (!f) { perror(argv[2]); return 1; }
  setvbuf(f, NULL, _IOFBF, 1 << 22);
  fputs("path,text,num_frames,height,width,fps,aspect_ratio\n", f);
  for (long long i = 0; i < n; ++i) {
    const int s = (int)(i % 11);
    const int image = i % 7 == 3;
    const long long frames = image ? 1 : 17 + (i * 37) % 900;
    fprintf(f, "clips/%09lld.mp4,\"%s, take %lld\",%lld,%d,%d,%s,%.2f\n", i, texts[i % 5],
            i % 97, frames, h[s], w[s], image ? "" : rates[i % 7], (double)h[s] / w[s]);
  }
  return fclose(f) == 0 ? 0 : 1;
}
C
cc -O2 -o "$work/gen" "$work/gen.c"
"$work/gen" "$n" "$out"
