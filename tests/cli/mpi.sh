#!/usr/bin/env bash
# CLI test under the MPI launcher (4 processes): `vbucket plan --rank mpi --world mpi` writes
# each rank's own file, equal to `vbucket plan --rank R --world 4` in one process, with one
# summary; a rank with other metadata, a broken metadata file, another resume step or a bad
# flag makes every rank print the same one-line error and the job fail; `vbucket scan` under
# the launcher writes byte for byte the CSV of a single-process scan (a failed file's message
# names the rank and host that read it). Skipped (exit 0, with a
# message) when VBUCKET_MPIEXEC is not set (vbucket built without MPI, or no launcher; ctest
# sets it to the launcher and its flags, ending in its process-count flag).
#
#   VBUCKET_MPIEXEC="mpiexec --oversubscribe --allow-run-as-root -n" \
#     bash tests/cli/mpi.sh <path to vbucket> <absolute path of tests/data>
set -uo pipefail

if [[ -z "${VBUCKET_MPIEXEC:-}" ]]; then
  echo "mpi: VBUCKET_MPIEXEC is not set (vbucket built without MPI, or no MPI launcher); skipped"
  exit 0
fi
read -r -a launch <<<"$VBUCKET_MPIEXEC"
np=${launch[${#launch[@]} - 1]}  # the process-count flag, again after each ':' of an MPMD run
source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" mpi "$@"
cd "$tmp" || exit 1
check() {  # check NAME CONDITION...: CONDITION (a command) must succeed
  local name=$1
  shift
  checks=$((checks + 1))
  "$@" || fail "$name"
}
mpi() {  # mpi ARGS...: the launcher with ARGS (4 vbucket plan ..., or 3 A : "$np" 1 B)
  timeout -k 5 120 "${launch[@]}" "$@" </dev/null >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
}
# Every one of the 4 ranks printed this one error line (the launcher adds its own lines; a rank
# whose own flags were wrong adds the --help hint).
expect_rank_errors() {  # expect_rank_errors NAME PATTERN
  local name=$1 pattern=$2 lines
  checks=$((checks + 1))
  lines=$(grep -c '^vbucket plan: error: ' "$tmp/stderr")
  if [[ $rc -eq 0 ]]; then
    fail "$name: the job succeeded"
  elif [[ $lines -ne 4 ]]; then
    fail "$name: $lines error lines, expected one per rank (4): $(head -c 1500 "$tmp/stderr")"
  elif [[ $(grep '^vbucket plan: error: ' "$tmp/stderr" |
    sed "s/ (see 'vbucket plan --help')\$//" | sort -u | wc -l) -ne 1 ]]; then
    fail "$name: the ranks' error lines differ: $(grep '^vbucket plan: error: ' "$tmp/stderr")"
  elif ! grep -qF -- "$pattern" "$tmp/stderr"; then
    fail "$name: stderr does not name '$pattern': $(head -c 1500 "$tmp/stderr")"
  fi
}

config="$data/config_opensora_v2.json"
# A metadata table made here: clips of 1 to 200 frames, most sizes, some images.
{
  echo "path,num_frames,height,width,fps"
  for ((i = 0; i < 3000; i++)); do
    fps=24
    ((i % 13 == 0)) && fps=
    echo "clip$i.mp4,$((1 + (i * 37) % 200)),$((200 + (i * 53) % 900)),$((200 + (i * 71) % 1300)),$fps"
  done
} >meta.csv
head -n 2999 meta.csv >meta_short.csv  # one row fewer
printf 'num_frames,height,width,fps\n10,-5,20,24\n' >meta_bad.csv
common=(--config "$config" --rule opensora-v2 --seed 7 --epoch 2 --quiet)
plan_mpi=(plan "${common[@]}" --rank mpi --world mpi)
plan_mpi_noseed=(plan --config "$config" --rule opensora-v2 --epoch 2 --quiet --rank mpi --world mpi)

# --- plan: every rank its own file, as a single process writes it ------------------------------
mpi 4 "$vbucket" plan --config "$config" --seed 7 --epoch 2 --meta meta.csv --rank mpi \
  --world mpi --out 'b.{rank}.jsonl'
check "plan: the job succeeds ($(head -c 500 "$tmp/stderr"))" test "$rc" -eq 0
check "plan: one summary (rank 0's)" test "$(grep -c '^fingerprint ' "$tmp/stdout")" -eq 1
check "plan: the summary says the ranks agree" grep -q '^mpi: 4 ranks agree on the plan' "$tmp/stdout"
for r in 0 1 2 3; do
  "$vbucket" plan "${common[@]}" --meta meta.csv --rank "$r" --world 4 --out "alone.$r.jsonl"
  check "plan: rank $r wrote its file" test -s "b.$r.jsonl"
  check "plan: rank $r's file is the single-process --rank $r --world 4 output" \
    cmp -s "b.$r.jsonl" "alone.$r.jsonl"
done
check "plan: no file named with a literal {rank}" test ! -e 'b.{rank}.jsonl'

# --- plan: a rank with one metadata row fewer ----------------------------------------------------
rm -f c.*.jsonl
mpi 3 "$vbucket" "${plan_mpi[@]}" --meta meta.csv --out 'c.{rank}.jsonl' : \
  "$np" 1 "$vbucket" "${plan_mpi[@]}" --meta meta_short.csv --out 'c.{rank}.jsonl'
expect_rank_errors "other metadata on rank 3" "rank 3 of 4 disagree on the plan fingerprint"
check "other metadata: no rank wrote batches" test -z "$(ls c.*.jsonl 2>/dev/null)"

# --- plan: a rank with another seed, a rank with a flag given twice -----------------------------
mpi 1 "$vbucket" "${plan_mpi_noseed[@]}" --seed 8 --meta meta.csv --out 'c.{rank}.jsonl' : \
  "$np" 3 "$vbucket" "${plan_mpi_noseed[@]}" --seed 7 --meta meta.csv --out 'c.{rank}.jsonl'
expect_rank_errors "another seed on rank 0" "rank 0 of 4 disagree on the plan fingerprint"
mpi 1 "$vbucket" "${plan_mpi[@]}" --seed 8 --meta meta.csv --out 'c.{rank}.jsonl' : \
  "$np" 3 "$vbucket" "${plan_mpi[@]}" --meta meta.csv --out 'c.{rank}.jsonl'
expect_rank_errors "a flag given twice on rank 0" \
  "rank 0 of 4 failed before agreeing on the plan fingerprint; rank 0: --seed is given more than once"

# --- plan: a rank whose metadata file is broken: every rank names it ----------------------------
mpi 2 "$vbucket" "${plan_mpi[@]}" --meta meta.csv --out 'c.{rank}.jsonl' : \
  "$np" 1 "$vbucket" "${plan_mpi[@]}" --meta meta_bad.csv --out 'c.{rank}.jsonl' : \
  "$np" 1 "$vbucket" "${plan_mpi[@]}" --meta meta.csv --out 'c.{rank}.jsonl'
expect_rank_errors "broken metadata on rank 2" "rank 2 of 4 failed before agreeing on the plan fingerprint; rank 2: meta_bad.csv"
check "broken metadata: the job's exit code is 1" test "$rc" -eq 1

# --- plan: a rank resuming at another step -------------------------------------------------------
mpi 3 "$vbucket" "${plan_mpi[@]}" --meta meta.csv --out 'c.{rank}.jsonl' : \
  "$np" 1 "$vbucket" "${plan_mpi[@]}" --meta meta.csv --out 'c.{rank}.jsonl' --start-step 1
expect_rank_errors "another resume step on rank 3" "rank 3 of 4 disagree on the resume position"

# --- plan: usage ---------------------------------------------------------------------------------
mpi 4 "$vbucket" "${plan_mpi[@]}" --meta meta.csv --out c.jsonl
expect_rank_errors "--out without {rank}" "put {rank} in the name"
check "--out without {rank}: a usage error (exit 2)" test "$rc" -eq 2
mpi 4 "$vbucket" plan "${common[@]}" --meta meta.csv --rank mpi --world 4 --out 'c.{rank}.jsonl'
expect_rank_errors "--rank mpi with --world 4" "--rank mpi and --world mpi go together"

# --- scan: the single-process CSV, byte for byte -------------------------------------------------
if "$vbucket" --help | grep -q '^  scan ' && command -v ffmpeg >/dev/null; then
  ff() { ffmpeg -nostdin -v error -y "$@"; }
  mkdir -p media/sub
  ff -f lavfi -i "testsrc=size=64x48:rate=30:duration=1" -c:v mpeg4 media/a.mp4
  ff -f lavfi -i "testsrc=size=40x80:rate=25:duration=2" -c:v mpeg4 media/sub/b.avi
  ff -f lavfi -i "testsrc=size=50x30:rate=1:duration=1" -frames:v 1 media/sub/c.png
  ff -f lavfi -i "testsrc=size=96x64:rate=24:duration=3" -c:v mpeg4 media/e.mkv
  ff -f lavfi -i "testsrc=size=32x32:rate=10:duration=0.5" -c:v mpeg4 media/sub/f.mp4
  echo "not a video" >media/sub/d.mp4
  "$vbucket" scan media --out alone.csv --quiet
  mpi 4 "$vbucket" scan media --out sharded.csv
  check "scan: the job succeeds ($(head -c 500 "$tmp/stderr"))" test "$rc" -eq 0
  # Byte for byte, but that a failed file's message names the rank and host that read it.
  sed -E 's/ \(rank [0-3] on [^)]+\)//' sharded.csv >sharded_plain.csv
  check "scan: the CSV of a single-process scan, byte for byte" cmp -s alone.csv sharded_plain.csv
  check "scan: a failed file names its rank and host" grep -qE \
    "d\.mp4,.* \(rank [0-3] on $(hostname)\)" sharded.csv
  check "scan: 6 files and a header" test "$(wc -l <sharded.csv)" -eq 7
  check "scan: one progress line" test "$(grep -c '^scanned ' "$tmp/stdout")" -eq 1
  check "scan: it says the ranks" grep -q '^scanned 6/6 on 4 ranks$' "$tmp/stdout"
  check "scan: one summary" test "$(grep -c '^6 files: 5 probed, 1 failed' "$tmp/stdout")" -eq 1
  # A rank that lists other files: every rank stops, naming it.
  printf 'media/a.mp4\nmedia/e.mkv\n' >list.txt
  printf 'media/a.mp4\n' >list_short.txt
  mpi 3 "$vbucket" scan list.txt --out x.csv : "$np" 1 "$vbucket" scan list_short.txt --out x.csv
  checks=$((checks + 1))
  if [[ $rc -eq 0 || $(grep -c '^vbucket scan: error: .*rank 3 of 4 disagree on the list of files to scan' "$tmp/stderr") -ne 4 ]]; then
    fail "scan: another list on rank 3: $(head -c 1500 "$tmp/stderr")"
  fi
  check "scan: no CSV after a failed job" test ! -e x.csv
else
  echo "mpi: this vbucket has no scan (built without FFmpeg) or no ffmpeg command; scan skipped"
fi

finish
