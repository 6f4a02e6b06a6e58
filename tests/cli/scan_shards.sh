#!/usr/bin/env bash
# CLI test of `vbucket scan` and `vbucket decode` over tar shards (WebDataset, made here with GNU
# tar: long names too): one row per media member with its path SHARD#MEMBER@OFFSET+SIZE, the
# columns shard, member, member_offset, member_size and the sidecar fields; the member decoded in
# place with the plain file's bytes; a cut shard and bad member paths named. Skipped (exit 0)
# when the CLI has no scan/decode or the ffmpeg or tar command is missing.
#
#   bash tests/cli/scan_shards.sh <path to vbucket> <absolute path of tests/data>
set -uo pipefail

cli_timeout=60
source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" scan_shards "$@"
if ! "$vbucket" --help | grep -q '^  scan '; then
  echo "scan_shards: this vbucket has no scan/decode (built without FFmpeg); skipped"
  exit 0
fi
if ! command -v ffmpeg >/dev/null || ! command -v tar >/dev/null; then
  echo "scan_shards: no ffmpeg or tar command; skipped"
  exit 0
fi
check() {
  local name=$1
  shift
  if "$@"; then pass; else fail "$name"; fi
}

mkdir -p "$tmp/src" "$tmp/shards"
long=$(printf 'k%.0s' {1..110})
ffmpeg -nostdin -v error -f lavfi -i "testsrc=size=96x64:rate=25:duration=1" -c:v libx264 -g 5 \
  -pix_fmt yuv420p "$tmp/src/k0.mp4"
cp "$tmp/src/k0.mp4" "$tmp/src/$long.mp4"
printf 'a caption\n' >"$tmp/src/k0.txt"
printf '{"caption": "hello, \\"x\\"", "score": 3}' >"$tmp/src/k0.json"
(cd "$tmp/src" && tar --format=gnu -cf "$tmp/shards/s0.tar" k0.mp4 k0.txt k0.json "$long.mp4")
head -c 14000 "$tmp/shards/s0.tar" >"$tmp/shards/s1.tar"  # inside the long-named member

expect_ok "scan shards" scan "$tmp/shards" --out "$tmp/meta.csv" --quiet
check "scan: the header has the shard and sidecar columns" grep -q \
  '^path,num_frames,.*,rotation,shard,member,member_offset,member_size,txt,caption,score$' \
  "$tmp/meta.csv"
check "scan: k0's row" grep -q "^$tmp/shards/s0.tar#k0.mp4@512+[0-9]*,25,64,96,.*,$tmp/shards/s0.tar,k0.mp4,512,[0-9]*,a caption,\"hello, \"\"x\"\"\",3$" "$tmp/meta.csv"
check "scan: the long-named member" grep -q "^$tmp/shards/s0.tar#$long.mp4@[0-9]*+[0-9]*,25," \
  "$tmp/meta.csv"
check "scan: the cut shard is named with its member" grep -q \
  "^$tmp/shards/s1.tar,.*member $long.mp4 (.*runs past the end of the archive" "$tmp/meta.csv"
check "scan: 4 rows" test "$(($(wc -l <"$tmp/meta.csv") - 1))" -eq 4

member=$(grep -o "^$tmp/shards/s0.tar#k0.mp4@[0-9]*+[0-9]*" "$tmp/meta.csv")
expect_ok "decode the plain file" decode "$tmp/src/k0.mp4" --start 2 --frames 3 --interval 2 \
  --size 32x48 --out "$tmp/plain.rgb"
expect_ok "decode the member" decode "$member" --start 2 --frames 3 --interval 2 --size 32x48 \
  --out "$tmp/member.rgb"
check "decode: the member's bytes are the plain file's" cmp -s "$tmp/plain.rgb" "$tmp/member.rgb"
expect_error "decode: a wrong offset" 1 "no tar header before byte 1024" decode \
  "$tmp/shards/s0.tar#k0.mp4@1024+10" --start 0 --frames 1 --interval 1 --size 8x8 \
  --out "$tmp/x.rgb"
expect_error "decode: past the shard's end" 1 "lies past the end of the shard" decode \
  "$tmp/shards/s0.tar#k0.mp4@512+99999999" --start 0 --frames 1 --interval 1 --size 8x8 \
  --out "$tmp/x.rgb"
expect_error "decode: no such member" 1 "the shard has no member k9.mp4" decode \
  "$tmp/shards/s0.tar#k9.mp4" --start 0 --frames 1 --interval 1 --size 8x8 --out "$tmp/x.rgb"

# Pax names (Python's tarfile, as webdataset writes: '?' in the ustar name of a non-ASCII one),
# in a nested list (a list naming a directory, and a shard) given after a flag; indexed too.
mkdir -p "$tmp/pax"
python3 - "$tmp/src/k0.mp4" "$tmp/pax/p0.tar" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[2], "w", format=tarfile.PAX_FORMAT) as t:
    t.add(sys.argv[1], arcname="vid\u00e9o k0.mp4")
PY
printf '%s\n' "$tmp/pax" >"$tmp/inner.txt"
printf '# nested\n%s\n%s\n' "$tmp/inner.txt" "$tmp/shards/s0.tar" >"$tmp/list.txt"
expect_ok "scan a nested list after a flag" scan --threads 1 "$tmp/list.txt" \
  --out "$tmp/nested.csv" --index --quiet
check "scan nested: the pax member and s0's two" test "$(($(wc -l <"$tmp/nested.csv") - 1))" -eq 3
pax=$(grep -o "^$tmp/pax/p0.tar#vid.*o k0.mp4@[0-9]*+[0-9]*" "$tmp/nested.csv")
expect_ok "decode the pax member" decode "$pax" --start 2 --frames 3 --interval 2 --size 32x48 \
  --index "$tmp/nested.vbidx" --out "$tmp/pax.rgb"
check "decode the pax member: the plain file's bytes" cmp -s "$tmp/plain.rgb" "$tmp/pax.rgb"

# The frame index over shards: scan --index indexes each video member of a local shard (stamped
# with the shard's size and mtime); decode --index of a deep clip in a member uses its entry and
# gives the bytes of the plain file; once the shard changes, the entry is stale and not used.
mkdir -p "$tmp/deep" "$tmp/ishards"
ffmpeg -nostdin -v error -y -f lavfi -i "testsrc=size=64x48:rate=25:duration=12,hue=H=n*0.9" \
  -c:v libx264 -preset veryfast -g 12 -bf 2 -pix_fmt yuv420p "$tmp/deep/d0.mkv"
cp "$tmp/deep/d0.mkv" "$tmp/deep/d1.mkv"
(cd "$tmp/deep" && tar --format=gnu -cf "$tmp/ishards/i0.tar" d0.mkv d1.mkv)
expect_ok "scan shards --index" scan "$tmp/ishards" --out "$tmp/imeta.csv" --index
check "scan --index: both members indexed" grep -q 'indexed 2 videos' "$tmp/stdout"
check "scan --index: the sidecar" test -s "$tmp/imeta.vbidx"
d1=$(grep -o "^$tmp/ishards/i0.tar#d1.mkv@[0-9]*+[0-9]*" "$tmp/imeta.csv")
expect_ok "decode the plain deep clip" decode "$tmp/deep/d1.mkv" --start 200 --frames 4 \
  --interval 2 --size 24x32 --out "$tmp/dplain.rgb"
expect_ok "decode the member --index" decode "$d1" --start 200 --frames 4 --interval 2 \
  --size 24x32 --index "$tmp/imeta.vbidx" --out "$tmp/dmember.rgb"
check "decode member --index: the index is used" grep -q 'frame index used' "$tmp/stdout"
check "decode member --index: the plain file's bytes" cmp -s "$tmp/dplain.rgb" "$tmp/dmember.rgb"
touch -d '2001-01-01' "$tmp/ishards/i0.tar"
expect_ok_warned "decode the member of a changed shard --index" decode "$d1" --start 200 --frames 4 \
  --interval 2 --size 24x32 --index "$tmp/imeta.vbidx" --out "$tmp/dmember2.rgb"
check "decode member, shard changed: the stale entry is named" grep -q \
  "i0.tar#d1.mkv@.*is stale (size or mtime changed since the scan)" "$tmp/stderr"
check "decode member, shard changed: the stale entry is not used" \
  bash -c "! grep -q 'frame index used' '$tmp/stdout'"
check "decode member, shard changed: the same bytes" cmp -s "$tmp/dplain.rgb" "$tmp/dmember2.rgb"

if ((failures > 0)); then
  echo "scan_shards: $failures of $checks checks FAILED" >&2
  exit 1
fi
echo "scan_shards: $checks checks passed"
