#!/usr/bin/env bash
# CLI test of `vbucket audit`: a clean two-rank ledger exits 0 with its table; a missing, a
# duplicated and an unexpected sample, a truncated line and a corrupt field exit 1 and are
# named (sample, file:line, rank, step); a directory stands for its *.ledger files; --quiet,
# --max-named; usage errors exit 2 and a file that is no ledger exits 1, each with one line on
# stderr.
#
#   bash tests/cli/audit.sh <path to vbucket> <absolute path of tests/data>
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" audit "$@"

# expect_deviations NAME ARGS...: exit code 1, nothing on stderr, the report on stdout.
expect_deviations() {
  local name=$1
  shift
  run "$@"
  if [[ $rc -ne 1 ]]; then
    fail "$name: exit code $rc, expected 1 (stderr: $(cat "$tmp/stderr"))"
  elif [[ -s $tmp/stderr ]]; then
    fail "$name: unexpected stderr: $(cat "$tmp/stderr")"
  else
    pass
  fi
}

# expect_stdout NAME PATTERN: the last command's stdout contains PATTERN (a fixed string).
expect_stdout() {
  if grep -qF -- "$2" "$tmp/stdout"; then
    pass
  else
    fail "$1: stdout does not contain '$2':"$'\n'"$(cat "$tmp/stdout")"
  fi
}

# ---------------------------------------------------------------------------------------------
# A clean run: epoch 0 of 10 samples ("clips", drawn all), 6 and 9 dropped as unassigned, the
# other 8 in batches of 3 over 2 ranks (2 steps: the last step's rank 1 batch is a repeat of
# batch 0; batch 2 holds 2 samples and 1 pad, sample 4 again). Rank 1's sample 5 failed to
# decode and was replaced by 6.
# ---------------------------------------------------------------------------------------------
mkdir -p "$tmp/run"
r0="$tmp/run/rank-00000.ledger"
r1="$tmp/run/rank-00001.ledger"
write_clean() {
  printf '%s\n' '#vbucket-ledger 1' \
    'E e=0 st=0 n=10 src=1 seed=7 pads=1' \
    'S e=0 src=0 name=clips first=0 rows=10 drawn=10 draw=all weight=1' \
    'X e=0 why=unassigned at=0 ids=6,9' \
    'B e=0 s=0 st=0 r=0 w=2 p=0 b=0 ids=4,1,7' \
    'B e=0 s=1 st=0 r=0 w=2 p=2 b=0 pad=1 ids=3,8,4' >"$r0"
  printf '%s\n' '#vbucket-ledger 1' \
    'B e=0 s=0 st=0 r=1 w=2 p=1 b=0 ids=0,5,2 sub=1:5>6:decode%20failed' \
    'B e=0 s=1 st=0 r=1 w=2 p=3 b=0 rep=1 ids=4,1,7' >"$r1"
}
write_clean
expect_ok "clean" audit "$r0" "$r1"
expect_stdout "clean: verdict" "clean: 2 files, 7 lines, 14 sample ids, 1 epochs, 0 deviations"
# epoch, stage, worlds, batches 4, repeats 1, delivered 8, pads 1, repeat ids 3, substitutions
# 1, dropped 2, drawn 10, no missing, duplicated or unexpected sample.
if grep -Eq '^0 +0 +2 +4 +1 +8 +1 +3 +1 +2 +10 +0 +0 +0 +ok$' "$tmp/stdout"; then
  pass
else
  fail "clean: the epoch's row is not as expected:"$'\n'"$(cat "$tmp/stdout")"
fi
expect_stdout "clean: source" 'source 0 "clips": drawn 10, delivered 8, dropped 2; share 1.0000, weight 1.0000 ok'
expect_stdout "clean: substitutions" "substituted (decode failed): 1"
expect_stdout "clean: drops" "dropped (unassigned): 2"
expect_ok "directory" audit "$tmp/run"
expect_stdout "directory" "clean: 2 files"

# ---------------------------------------------------------------------------------------------
# Deviations.
# ---------------------------------------------------------------------------------------------
# Sample 8 lost from rank 0's step 1 (the pad stays the last id).
write_clean
sed -i 's/ids=3,8,4/ids=3,4/' "$r0"
expect_deviations "missing" audit "$r0" "$r1"
expect_stdout "missing" 'epoch 0: sample 8 (source "clips" row 8): missing: drawn 1, delivered or dropped 0'
expect_stdout "missing: verdict" "DEVIATIONS: 2 files"

# Sample 5 delivered again by rank 1's step 1 (no longer a repeat).
write_clean
sed -i 's/ rep=1 ids=4,1,7/ ids=5/' "$r1"
expect_deviations "duplicated" audit "$r0" "$r1"
expect_stdout "duplicated" "epoch 0: sample 5 (source \"clips\" row 5): duplicated: drawn 1, delivered or dropped 2: delivered at rank 1 step 0 ($r1:2); delivered at rank 1 step 1 ($r1:3)"

# Sample 12 is not of the epoch (n=10); sample 7 it replaced is missing.
write_clean
sed -i 's/ids=4,1,7$/ids=4,1,12/' "$r0"
expect_deviations "unexpected" audit "$r0" "$r1"
expect_stdout "unexpected" "epoch 0: sample 12 (not below the id space n=10): unexpected: drawn 0, delivered or dropped 1: delivered at rank 0 step 0 ($r0:5)"
expect_stdout "unexpected: the replaced one" "epoch 0: sample 7 (source \"clips\" row 7): missing: drawn 1, delivered or dropped 0: repeat at rank 1 step 1 ($r1:3)"

# Rank 1's last line cut short (a crash mid-write): a repeat, so nothing else is missing.
write_clean
printf '%s' "$(head -c -4 "$r1")" >"$r1"
expect_deviations "truncated" audit "$r0" "$r1"
expect_stdout "truncated" "epoch 0: truncated: $r1:3: the last line ends without a newline (a write cut short): not counted"

# A corrupt step field on rank 1's first batch: named; its samples 0, 5 and 2 are missing.
write_clean
sed -i 's/s=0 st=0 r=1/s=0x st=0 r=1/' "$r1"
expect_deviations "corrupt" audit "$r0" "$r1"
expect_stdout "corrupt" "epoch 0: corrupt: $r1:2: field s=\"0x\" is not a valid number: not counted"
expect_stdout "corrupt: missing" 'epoch 0: sample 5 (source "clips" row 5): missing'
expect_deviations "corrupt: quiet" audit --quiet --max-named 1 "$r0" "$r1"
if grep -q '^0 ' "$tmp/stdout" || [[ $(grep -c ': missing' "$tmp/stdout") -ne 1 ]]; then
  fail "quiet: a table row or not exactly one named sample:"$'\n'"$(cat "$tmp/stdout")"
else
  pass
fi

# ---------------------------------------------------------------------------------------------
# Errors.
# ---------------------------------------------------------------------------------------------
write_clean
expect_error "no ledger" 2 "no ledger given" audit
expect_error "unknown flag" 2 "unknown flag --bogus" audit --bogus "$r0"
expect_error "missing file" 2 "no such file or directory: \"$tmp/none.ledger\"" audit "$tmp/none.ledger"
expect_error "bad tolerance" 2 "--share-tolerance: expected a number from 0 to 1, got \"2\"" \
  audit --share-tolerance 2 "$r0"
expect_error "bad count" 2 "--max-named: expected a whole number, got \"-1\"" audit --max-named=-1 "$r0"
mkdir -p "$tmp/empty"
expect_error "empty directory" 2 "has no *.ledger files" audit "$tmp/empty"
printf 'index,resolution\n' >"$tmp/not.ledger"
expect_error "not a ledger" 1 "$tmp/not.ledger:1: not a vbucket ledger" audit "$tmp/not.ledger"
printf '#vbucket-ledger 9\n' >"$tmp/v9.ledger"
expect_error "newer version" 1 "ledger version \"9\" is not supported" audit "$tmp/v9.ledger"
expect_ok "help" audit --help
expect_stdout "help" "usage: vbucket audit LOG... [--max-named N]"

# ---------------------------------------------------------------------------------------------
# A failed `plan --run --ledger` leaves no records (issue 41.4): out of memory at a step whose
# batch size is already 1 exits 1; the ledger then holds nothing, and the run made again without
# the failing step audits clean (no duplicates of the failed command's records).
# ---------------------------------------------------------------------------------------------
if command -v python3 >/dev/null; then
  web_meta "$tmp/one.csv" 5 40
  printf '%s\n' '{"seed": 3, "world": 2, "sources": [{"name": "web", "csv": "one.csv"}],' \
    ' "stages": [{"name": "s", "config": {"256px": {"1": [1.0, 1], "5": [1.0, 1], "33": [1.0, 1],' \
    ' "65": [1.0, 1], "97": [1.0, 1], "129": [1.0, 1]}}}]}' >"$tmp/one.json"
  run plan --run "$tmp/one.json" --rank all --quiet --ledger "$tmp/failed" --oom 3 --out "$tmp/o"
  if [[ $rc -ne 1 ]]; then
    fail "failed run: exit $rc, expected 1 (stderr: $(cat "$tmp/stderr"))"
  elif [[ -n $(cat "$tmp"/failed/*.ledger 2>/dev/null | grep -v '^#') ]]; then
    fail "failed run: the ledger holds records: $(cat "$tmp"/failed/*.ledger | head -c 600)"
  else
    pass
  fi
  expect_ok "the run again" plan --run "$tmp/one.json" --rank all --quiet --ledger "$tmp/failed" \
    --out "$tmp/o"
  expect_ok "the run again: audit" audit "$tmp/failed"
  expect_stdout "the run again: audit" "clean: "
fi

# ---------------------------------------------------------------------------------------------
# A binary ledger (version 2): audited as the text one; --dump prints its records as text.
# ---------------------------------------------------------------------------------------------
mkdir -p "$tmp/v2"
printf '#vbucket-ledger 2\nE\x07\x00\x00\x02\x01\x00\x00\x00S\x0b\x00\x00\x01a\x00\x02\x02\x00\x00\x00\x00B\x0e\x00\x00\x00\x00\x01\x00\x00\x00\x00\x02\x00\x01\x00\x00' >"$tmp/v2/rank-00000.ledger"
expect_ok "binary" audit "$tmp/v2"
expect_stdout "binary" "clean: 1 files, 3 lines, 2 sample ids, 1 epochs, 0 deviations"
expect_ok "dump" audit --dump "$tmp/v2"
expect_stdout "dump: E" "E e=0 st=0 n=2 src=1"
expect_stdout "dump: S" "S e=0 src=0 name=a first=0 rows=2 drawn=2 draw=all"
expect_stdout "dump: B" "B e=0 s=0 st=0 r=0 w=1 ids=1,0"
# Its last record cut short: named as such.
head -c -3 "$tmp/v2/rank-00000.ledger" >"$tmp/v2/cut" && mv "$tmp/v2/cut" "$tmp/v2/rank-00000.ledger"
expect_deviations "binary: truncated" audit "$tmp/v2"
expect_stdout "binary: truncated" "rank-00000.ledger:4: the last record is cut short"

finish
