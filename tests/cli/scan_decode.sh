#!/usr/bin/env bash
# CLI test of `vbucket scan` and `vbucket decode` (built with the FFmpeg adapter): the metadata
# CSV a scan writes (failed files in the error column, read by `vbucket assign` as invalid
# samples; --skip-failed output too), the list form, the plain progress count off a terminal; decode's output size and
# pixels against the ffmpeg command (PSNR), CTHW, padding, and the error contract. Media are
# made here with the ffmpeg command. Skipped (exit 0) when the CLI has no scan/decode or the
# ffmpeg command is missing.
#
#   bash tests/cli/scan_decode.sh <path to vbucket> <absolute path of tests/data>
set -uo pipefail

cli_timeout=60
source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" scan_decode "$@"
if ! "$vbucket" --help | grep -q '^  scan '; then
  echo "scan_decode: this vbucket has no scan/decode (built without FFmpeg); skipped"
  exit 0
fi
if ! command -v ffmpeg >/dev/null; then
  echo "scan_decode: no ffmpeg command; skipped"
  exit 0
fi
check() {  # check NAME CONDITION...: CONDITION (a command) must succeed
  local name=$1
  shift
  checks=$((checks + 1))
  "$@" || fail "$name"
}
expect_ok() {
  local name=$1
  shift
  run "$@"
  checks=$((checks + 1))
  [[ $rc -eq 0 ]] || fail "$name: exit code $rc: $(head -c 500 "$tmp/stderr")"
}
expect_error() {  # expect_error NAME CODE PATTERN ARGS...
  local name=$1 code=$2 pattern=$3
  shift 3
  run "$@"
  checks=$((checks + 1))
  local lines
  lines=$(awk 'END { print NR }' "$tmp/stderr")
  if [[ $rc -ne $code ]]; then
    fail "$name: exit code $rc, expected $code: $(head -c 500 "$tmp/stderr")"
  elif [[ $lines -ne 1 ]]; then
    fail "$name: $lines lines on stderr, expected 1"
  elif ! grep -qF -- "$pattern" "$tmp/stderr"; then
    fail "$name: stderr does not name '$pattern': $(cat "$tmp/stderr")"
  fi
}

ff() { ffmpeg -nostdin -v error -y "$@"; }
mkdir -p "$tmp/media/sub"
ff -f lavfi -i "testsrc=size=64x48:rate=30:duration=1,hue=H=n*0.9" -c:v mpeg4 -q:v 3 \
  "$tmp/media/clip.mp4"
ff -f lavfi -i "testsrc=size=40x80:rate=25:duration=1.2" -c:v mpeg4 -q:v 3 \
  "$tmp/media/sub/portrait.avi"
ff -f lavfi -i "testsrc=size=50x30:rate=1:duration=1" -frames:v 1 "$tmp/media/sub/still.png"
# Anamorphic: 64x48 stored, 32:27 pixels, shown as round(64 * 32 / 27) = round(75.85) = 76 x 48.
ff -f lavfi -i "testsrc=size=64x48:rate=30:duration=1,hue=H=n*0.9,setsar=32/27" -c:v mpeg4 -q:v 3 \
  "$tmp/media/sub/wide.mp4"
echo "not a video" >"$tmp/media/sub/broken.mp4"
echo "ignored: not a media name" >"$tmp/media/notes.txt"

# --- scan ---------------------------------------------------------------------------------
expect_ok "scan a directory" scan "$tmp/media" --out "$tmp/meta.csv" --threads 2
check "scan: nothing on stderr off a terminal" test ! -s "$tmp/stderr"
check "scan: a plain count on stdout" grep -q '^scanned 5/5$' "$tmp/stdout"
check "scan: summary" grep -q '5 files: 4 probed, 1 failed' "$tmp/stdout"
# The first eight columns as before; warning, the stored size, the sample aspect ratio and the
# rotation added at the end.
cat >"$tmp/want.csv" <<CSV
path,num_frames,height,width,fps,duration,codec,error,warning,stored_height,stored_width,sar,rotation
$tmp/media/clip.mp4,30,48,64,30,1,mpeg4,,,48,64,1:1,0
$tmp/media/sub/broken.mp4,,,,,,,$tmp/media/sub/broken.mp4: cannot open: Invalid data found when processing input,,,,,
$tmp/media/sub/portrait.avi,30,80,40,25,1.2,mpeg4,,,80,40,1:1,0
$tmp/media/sub/still.png,1,30,50,,,png,,,30,50,1:1,0
$tmp/media/sub/wide.mp4,30,48,76,30,1,mpeg4,,,48,64,32:27,0
CSV
check "scan: META.csv as expected ($(tr '\n' '|' <"$tmp/meta.csv"))" cmp -s "$tmp/meta.csv" "$tmp/want.csv"

expect_ok "scan --skip-failed" scan "$tmp/media" --out "$tmp/meta_ok.csv" --skip-failed --quiet
check "scan --quiet: no output" test ! -s "$tmp/stdout"
check "scan --skip-failed: 4 rows" test "$(wc -l <"$tmp/meta_ok.csv")" -eq 5
expect_ok "assign reads the scan's META.csv" assign --config "$data/config_360p_example.json" \
  --meta "$tmp/meta_ok.csv" --rule opensora-v2 --rng fast --seed 1 --out "$tmp/assign.csv" --quiet
check "assign: one row per scanned file" test "$(wc -l <"$tmp/assign.csv")" -eq 5
expect_ok "assign reads the scan's full META.csv (failed rows are invalid samples)" assign \
  --config "$data/config_360p_example.json" --meta "$tmp/meta.csv" --rule opensora-v2 \
  --rng fast --seed 1 --out "$tmp/assign_all.csv" --quiet
check "assign: every scanned row, failed ones included" \
  test "$(wc -l <"$tmp/assign_all.csv")" -eq "$(wc -l <"$tmp/meta.csv")"

printf '# a list\n%s\n\n%s\n' "$tmp/media/sub/still.png" "$tmp/media/missing.mp4" >"$tmp/list.txt"
expect_ok "scan a list" scan "$tmp/list.txt" --out "$tmp/list.csv"
check "scan a list: 2 rows" test "$(wc -l <"$tmp/list.csv")" -eq 3
check "scan a list: the missing file's error" grep -q "missing.mp4,,,,,,,.*missing.mp4: cannot open" "$tmp/list.csv"

# A faststart MP4 cut right after its moov box (no media data): an error row; the same cut in
# the middle: the frames whose data are there, with a warning.
ff -f lavfi -i "testsrc=size=64x48:rate=30:duration=2,hue=H=n*0.9" -c:v mpeg4 -q:v 3 \
  -movflags +faststart "$tmp/whole.mp4"
mkdir -p "$tmp/cut"
moov_end=$(python3 -c '
import struct, sys
d = open(sys.argv[1], "rb").read(); at = 0
while at + 8 <= len(d):
    size, kind = struct.unpack(">I4s", d[at:at + 8])
    if kind == b"moov": print(at + size)
    at += size' "$tmp/whole.mp4")
head -c "$moov_end" "$tmp/whole.mp4" >"$tmp/cut/header_only.mp4"
head -c $(($(stat -c %s "$tmp/whole.mp4") / 2)) "$tmp/whole.mp4" >"$tmp/cut/half.mp4"
# The frames whose data lie wholly before the cut (the decoder may show the top of the one the
# cut splits; vbucket counts and numbers only whole ones).
half_size=$(stat -c %s "$tmp/cut/half.mp4")
decodable=$(ffprobe -v error -select_streams v:0 -show_entries packet=pos,size -of csv=p=0 \
  "$tmp/whole.mp4" | awk -F, -v n="$half_size" '{ if ($1 + $2 <= n) c++ } END { print c }')
expect_ok "scan damaged files" scan "$tmp/cut" --out "$tmp/cut.csv" --quiet
check "scan: the header-only file is an error row" \
  grep -q "^$tmp/cut/header_only.mp4,,,,,,,\"$tmp/cut/header_only.mp4: no media data" "$tmp/cut.csv"
check "scan: the half file counts what decodes ($decodable) with a warning ($(tr '\n' '|' <"$tmp/cut.csv"))" \
  grep -q "^$tmp/cut/half.mp4,$decodable,48,64,30,[0-9.]*,mpeg4,,\"cut short: the sample table lists 60 frames" "$tmp/cut.csv"

expect_error "scan: missing directory" 1 "$tmp/nope" scan "$tmp/nope" --out "$tmp/x.csv"
check "scan: no output left behind" test ! -e "$tmp/x.csv"
expect_error "scan: no input" 2 "missing the input" scan --out "$tmp/x.csv"
expect_error "scan: two inputs" 2 "unexpected argument" scan "$tmp/media" "$tmp/media" --out "$tmp/x.csv"

# --- decode -------------------------------------------------------------------------------
clip=$tmp/media/clip.mp4
expect_ok "decode" decode "$clip" --start 2 --frames 4 --interval 3 --size 32x40 --out "$tmp/o.rgb"
check "decode: N*H*W*3 bytes" test "$(stat -c %s "$tmp/o.rgb")" -eq $((4 * 32 * 40 * 3))
# The same with the ffmpeg command: 64x48 covered at 32x40 -> scale to 43x32 (round(42.67)),
# crop 40x32 from column floor(1.5) = 1 (a video's crop offset is floored, as Open-Sora's video
# path does; an image's is rounded).
ffmpeg -nostdin -v error -threads 1 -i "$clip" \
  -vf "select='between(n\,2\,11)*not(mod(n-2\,3))',scale=43:32:flags=bilinear,crop=40:32:1:0" \
  -fps_mode passthrough -frames:v 4 -f rawvideo -pix_fmt rgb24 -y "$tmp/ref.rgb"
psnr=$(ffmpeg -nostdin -v info -f rawvideo -pix_fmt rgb24 -s 40x32 -i "$tmp/o.rgb" \
  -f rawvideo -pix_fmt rgb24 -s 40x32 -i "$tmp/ref.rgb" -lavfi psnr -f null - 2>&1 |
  sed -n 's/.*PSNR.* min:\([0-9.inf]*\).*/\1/p')
check "decode: PSNR against the ffmpeg command ($psnr dB) >= 35" \
  awk -v p="$psnr" 'BEGIN { exit !(p == "inf" || p + 0 >= 35) }'

# Anamorphic: the 76x48 display shape covered at 32x40 -> scale the stored 64x48 straight to
# round(76 * 32 / 48) = round(50.67) = 51 x 32, crop 40x32 from column floor(5.5) = 5.
expect_ok "decode anamorphic" decode "$tmp/media/sub/wide.mp4" --start 2 --frames 4 --interval 3 \
  --size 32x40 --out "$tmp/w.rgb"
check "decode anamorphic: says so" grep -q 'sample aspect ratio 32:27' "$tmp/stdout"
ffmpeg -nostdin -v error -threads 1 -i "$tmp/media/sub/wide.mp4" \
  -vf "select='between(n\,2\,11)*not(mod(n-2\,3))',scale=51:32:flags=bilinear,crop=40:32:5:0" \
  -fps_mode passthrough -frames:v 4 -f rawvideo -pix_fmt rgb24 -y "$tmp/wref.rgb"
psnr=$(ffmpeg -nostdin -v info -f rawvideo -pix_fmt rgb24 -s 40x32 -i "$tmp/w.rgb" \
  -f rawvideo -pix_fmt rgb24 -s 40x32 -i "$tmp/wref.rgb" -lavfi psnr -f null - 2>&1 |
  sed -n 's/.*PSNR.* min:\([0-9.inf]*\).*/\1/p')
check "decode anamorphic: PSNR against the ffmpeg command with the SAR applied ($psnr dB) >= 35" \
  awk -v p="$psnr" 'BEGIN { exit !(p == "inf" || p + 0 >= 35) }'

expect_ok "decode cthw" decode "$clip" --start 2 --frames 4 --interval 3 --size 32x40 \
  --layout cthw --out "$tmp/c.rgb"
check "decode cthw: same size" test "$(stat -c %s "$tmp/c.rgb")" -eq $((4 * 32 * 40 * 3))
check "decode cthw: differs from thwc" bash -c "! cmp -s '$tmp/o.rgb' '$tmp/c.rgb'"
# The input after flags, and the time bounds (issue 44): the same bytes; bad values named.
expect_ok "decode: FILE after flags" decode --timeout 30 --io-timeout 5 --retries 1 "$clip" \
  --start 2 --frames 4 --interval 3 --size 32x40 --out "$tmp/o2.rgb"
check "decode: FILE after flags, same bytes" cmp -s "$tmp/o.rgb" "$tmp/o2.rgb"
expect_error "decode: bad --io-timeout" 2 "--io-timeout" decode "$clip" --io-timeout 0 \
  --start 2 --frames 4 --interval 3 --size 32x40 --out "$tmp/o3.rgb"
# The bounds are run spec fields: a run file gives them (--run), flags override, every bad
# value (NaN, negative, absurd) is refused by the field table naming the flag or the file's key.
for bad in nan -1 1e7 inf; do
  expect_error "decode: --timeout $bad" 2 "--timeout: expected a positive number up to 1000000, got \"$bad\"" \
    decode "$clip" --timeout "$bad" --start 2 --frames 4 --interval 3 --size 32x40 --out "$tmp/o3.rgb"
done
expect_error "scan: --retries 101" 2 "--retries: expected an integer from 0 to 100" \
  scan "$tmp/media" --retries 101 --out "$tmp/m.csv"
printf '{"seed": 3, "timeout": 30, "io_timeout": 5, "retries": 1, "outage_deadline": 900}\n' \
  >"$tmp/run.json"
expect_ok "decode --run (media fields of a run file)" decode "$clip" --run "$tmp/run.json" \
  --start 2 --frames 4 --interval 3 --size 32x40 --out "$tmp/o4.rgb"
check "decode --run: same bytes" cmp -s "$tmp/o.rgb" "$tmp/o4.rgb"
expect_error "decode --run: the required flags still required" 2 "missing required flag --out" \
  decode "$clip" --run "$tmp/run.json" --start 2 --frames 4 --interval 3 --size 32x40
printf '{"io_timeout": -2}\n' >"$tmp/bad_run.json"
expect_error "scan --run: a bad key named with its file" 1 \
  "$tmp/bad_run.json: key \"io_timeout\": expected a positive number up to 1000000, got \"-2\"" \
  scan "$tmp/media" --run "$tmp/bad_run.json" --out "$tmp/m.csv"
expect_error "scan --run: a directory, not a file" 1 "$tmp: is a directory, not a file" \
  scan "$tmp/media" --run "$tmp" --out "$tmp/m.csv"
run plan --help
check "plan --help: no media flag" bash -c "! grep -q -- '--timeout\|--outage-deadline' '$tmp/stdout'"

expect_error "decode: past the end" 1 "too short" decode "$clip" --start 20 --frames 8 \
  --interval 2 --size 16x16 --out "$tmp/short.rgb"
check "decode: no output left behind" test ! -e "$tmp/short.rgb"
expect_ok "decode --pad" decode "$clip" --start 20 --frames 8 --interval 2 --size 16x16 --pad \
  --out "$tmp/short.rgb"
check "decode --pad: 3 padded" grep -q ', 3 padded' "$tmp/stdout"
expect_error "decode: not a video" 1 "$tmp/media/sub/broken.mp4" decode "$tmp/media/sub/broken.mp4" \
  --start 0 --frames 1 --interval 1 --size 8x8 --out "$tmp/b.rgb"
expect_error "decode: bad size" 2 "--size" decode "$clip" --start 0 --frames 1 --interval 1 \
  --size 8by8 --out "$tmp/b.rgb"
expect_error "decode: no input" 2 "missing the input" decode --start 0 --frames 1 --interval 1 \
  --size 8x8 --out "$tmp/b.rgb"

# The frame index: scan --index writes META.vbidx next to the CSV; decode --index gives the
# same bytes as without it (a deep clip in Matroska and MPEG-TS: 300 frames, GOP 12), warns
# when the file changed since the scan, and refuses a damaged sidecar naming it.
mkdir -p "$tmp/long"
ffmpeg -nostdin -v error -y -f lavfi -i "testsrc=size=64x48:rate=25:duration=12,hue=H=n*0.9" \
  -c:v libx264 -preset veryfast -g 12 -bf 2 -pix_fmt yuv420p "$tmp/long/a.mkv" 2>/dev/null ||
  ffmpeg -nostdin -v error -y -f lavfi -i "testsrc=size=64x48:rate=25:duration=12,hue=H=n*0.9" \
    -c:v mpeg4 -g 12 "$tmp/long/a.mkv"
ffmpeg -nostdin -v error -y -i "$tmp/long/a.mkv" -c copy "$tmp/long/a.ts"
expect_ok "scan --index" scan "$tmp/long" --out "$tmp/long.csv" --index
check "scan --index: the sidecar" test -s "$tmp/long.vbidx"
check "scan --index: the summary" grep -q 'indexed 2 videos' "$tmp/stdout"
for f in a.mkv a.ts; do
  for s in 0 11 12 150 290; do
    expect_ok "decode $f $s --index" decode "$tmp/long/$f" --start $s --frames 4 --interval 2 \
      --size 24x32 --pad --index "$tmp/long.vbidx" --out "$tmp/with.rgb"
    expect_ok "decode $f $s" decode "$tmp/long/$f" --start $s --frames 4 --interval 2 \
      --size 24x32 --pad --out "$tmp/without.rgb"
    check "decode $f $s: the same bytes with and without the index" cmp -s "$tmp/with.rgb" \
      "$tmp/without.rgb"
  done
  expect_ok "decode $f deep --index" decode "$tmp/long/$f" --start 200 --frames 4 --interval 2 \
    --size 24x32 --index "$tmp/long.vbidx" --out "$tmp/with.rgb"
  check "decode $f deep: the index is used" grep -q 'frame index used' "$tmp/stdout"
done
# Another spelling of an indexed path finds its entry (one canonical key): ./, .., a relative
# path from an index of absolute ones and the other way round, a symlinked directory; a file
# with no entry is named in a warning.
vbucket_abs=$(cd "$(dirname "$vbucket")" && pwd)/$(basename "$vbucket")
ln -s "$tmp/long" "$tmp/long-link"
(cd "$tmp" && "$vbucket_abs" scan long --out rel.csv --index >/dev/null 2>&1)
check "scan --index from a relative directory" test -s "$tmp/rel.vbidx"
for spelling in "$tmp/long/./a.mkv" "$tmp/long/../long/a.mkv" "$tmp/long-link/a.mkv"; do
  expect_ok "decode $spelling --index" decode "$spelling" --start 200 --frames 4 --interval 2 \
    --size 24x32 --index "$tmp/long.vbidx" --out "$tmp/with.rgb"
  check "decode $spelling: the index is used" grep -q 'frame index used' "$tmp/stdout"
  check "decode $spelling: no warning" test ! -s "$tmp/stderr"
done
# (The index's relative paths, as META.csv's, are relative to the directory of the run.)
(cd "$tmp" && "$vbucket_abs" decode "$tmp/long/a.mkv" --start 200 --frames 4 --interval 2 \
  --size 24x32 --index rel.vbidx --out with.rgb >"$tmp/stdout" 2>"$tmp/stderr")
check "decode absolute, relative index: the index is used" grep -q 'frame index used' \
  "$tmp/stdout"
(cd "$tmp/long" && "$vbucket_abs" decode ./a.mkv --start 200 --frames 4 --interval 2 \
  --size 24x32 --index ../long.vbidx --out ../with.rgb >"$tmp/stdout" 2>"$tmp/stderr")
check "decode ./a.mkv from its directory: the index is used" grep -q 'frame index used' \
  "$tmp/stdout"
cp "$tmp/long/a.mkv" "$tmp/other.mkv"
expect_ok "decode a file the index does not list" decode "$tmp/other.mkv" --start 200 \
  --frames 4 --interval 2 --size 24x32 --index "$tmp/long.vbidx" --out "$tmp/with.rgb"
check "decode unlisted: one warning naming the file" grep -q \
  "^vbucket decode: warning: $tmp/other.mkv: no entry in the frame index" "$tmp/stderr"
check "decode unlisted: one line" test "$(wc -l <"$tmp/stderr")" -eq 1
touch -d '2001-01-01' "$tmp/long/a.ts"
expect_ok "decode stale --index" decode "$tmp/long/a.ts" --start 200 --frames 4 --interval 2 \
  --size 24x32 --index "$tmp/long.vbidx" --out "$tmp/stale.rgb"
check "decode stale: a warning" grep -q 'stale' "$tmp/stderr"
check "decode stale: the index is not used" bash -c "! grep -q 'frame index used' '$tmp/stdout'"
head -c 30 "$tmp/long.vbidx" >"$tmp/cut.vbidx"
expect_error "decode: a truncated index" 1 "$tmp/cut.vbidx" decode "$tmp/long/a.mkv" --start 0 \
  --frames 1 --interval 1 --size 8x8 --index "$tmp/cut.vbidx" --out "$tmp/b.rgb"
expect_error "decode: a CSV as the index" 1 "not a vbucket frame index" decode "$tmp/long/a.mkv" \
  --start 0 --frames 1 --interval 1 --size 8x8 --index "$tmp/long.csv" --out "$tmp/b.rgb"

if ((failures > 0)); then
  echo "scan_decode: $failures of $checks checks FAILED" >&2
  exit 1
fi
echo "scan_decode: $checks checks passed"
