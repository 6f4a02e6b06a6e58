#!/usr/bin/env bash
# CLI test of what `vbucket plan` refuses or cleans up so that a run cannot go wrong silently:
# a resume position past the end of the epoch (--start-step, --consumed-batches) is an error
# naming the epoch's size; a --state saved before the metadata changed is refused, naming both
# fingerprints, and an old state without a fingerprint loads with a warning; SIGINT and SIGTERM
# during a run leave no temporary file, nor does kill -9 where O_TMPFILE works; --out expands
# {rank} for a numeric --rank, writes standard output for "-", refuses to replace a read-only
# file and keeps a replaced file's mode.
#
#   bash tests/cli/plan_safety.sh <path to vbucket> <absolute path of tests/data>
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" plan_safety "$@"
require_python3

cfg="$data/config_opensora_v2.json"
meta="$tmp/meta.csv"
web_meta "$meta" 4242 600
# Explicit --rng: the test does not depend on the default.
common=(--config "$cfg" --meta "$meta" --seed 5 --epoch 0 --rng fast --pad-warn 1)

# summary_number PATTERN: the first number captured by the sed pattern in $tmp/stdout.
summary_number() { sed -n "s/$1/\\1/p" "$tmp/stdout" | head -1; }

# ---------------------------------------------------------------------------------------------
# Past the end of the epoch: an error naming its size in batches and steps.
# ---------------------------------------------------------------------------------------------
world=3
expect_ok "plan world 3" plan "${common[@]}" --world $world --rank 0 --out "$tmp/r0.jsonl"
batches=$(summary_number '.* samples, .* in buckets, \([0-9]*\) batches .*')
steps=$(summary_number '^world 3, rank 0: \([0-9]*\) steps .*')
if [[ -z $batches || -z $steps ]]; then
  fail "cannot read the summary: $(cat "$tmp/stdout")"
  batches=0 steps=0
fi
size="epoch 0 has $batches global batches, $steps steps at world $world"
expect_ok "--start-step at the end" plan "${common[@]}" --world $world --rank 0 \
  --start-step "$steps" --out "$tmp/end.jsonl" --quiet
[[ -e $tmp/end.jsonl && ! -s $tmp/end.jsonl ]] && pass || fail "--start-step at the end wrote steps"
expect_error "--start-step one past the end" 2 "--start-step $((steps + 1)) is past the end of the epoch: $size" \
  plan "${common[@]}" --world $world --rank 0 --start-step $((steps + 1)) --out "$tmp/err.jsonl"
expect_error "--start-step 2^64-1 (k*world overflows)" 2 "$size" plan "${common[@]}" --world $world \
  --rank 0 --start-step 18446744073709551615 --out "$tmp/err.jsonl"
expect_error "--consumed-batches 999999999" 2 \
  "--consumed-batches 999999999 is past the end of the epoch: $size" \
  plan "${common[@]}" --world $world --rank 0 --consumed-batches 999999999 --out "$tmp/err.jsonl"
expect_error "--consumed-batches 2^64-1" 2 "$size" plan "${common[@]}" --world $world --rank all \
  --consumed-batches 18446744073709551615 --out "$tmp/err.jsonl"
# The last step of a run at world W may end W - 1 batches past the global batches (repeats).
expect_ok "--consumed-batches at the last step's end" plan "${common[@]}" --world $world --rank all \
  --consumed-batches $((batches + world - 1)) --out "$tmp/end.jsonl" --quiet
expect_error "--consumed-batches past the last step's end" 2 "past the end of the epoch" plan \
  "${common[@]}" --world $world --rank all --consumed-batches $((batches + world)) \
  --out "$tmp/err.jsonl"
[[ -e $tmp/err.jsonl ]] && fail "a refused position wrote its output file" || pass

# ---------------------------------------------------------------------------------------------
# --state of a plan whose metadata changed since: refused, naming both fingerprints.
# ---------------------------------------------------------------------------------------------
expect_ok "plan for a state" plan "${common[@]}" --world 2 --rank all --start-step 10 \
  --out "$tmp/a.jsonl"
# The state after 10 steps at world 2 (the run prints the state at the end of the epoch).
state=$(sed -n 's/^resume state after these steps: //p' "$tmp/stdout" | sed 's/consumed=[0-9]*/consumed=20/')
fp=$(sed -n 's/^fingerprint 0x\([0-9a-f]*\) .*/\1/p' "$tmp/stdout")
[[ $state == *"fingerprint=$fp"* ]] && pass || fail "the printed state has no fingerprint=$fp: $state"
# An unchanged plan resumes from it (under another world size too).
expect_ok "--state of this plan" plan "${common[@]}" --world 3 --rank all --state "$state" \
  --out "$tmp/b.jsonl" --quiet
# One metadata row edited: the plan differs.
python3 - "$meta" "$tmp/edited.csv" "$tmp/r0.jsonl" <<'EOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
head, rows = lines[0], lines[1:]
cols = head.split(",")
k = json.loads(open(sys.argv[3]).readline())["indices"][0]  # a sample in a batch
f = rows[k].split(",")
f[cols.index("height")] = f[cols.index("width")] = "64"  # now too small for any bucket
rows[k] = ",".join(f)
open(sys.argv[2], "w").write("\n".join([head] + rows) + "\n")
EOF
edited=(--config "$cfg" --meta "$tmp/edited.csv" --seed 5 --epoch 0 --rng fast --pad-warn 1)
expect_ok "plan of the edited metadata" plan "${edited[@]}" --world 2 --rank 0 --out "$tmp/e.jsonl"
fp2=$(sed -n 's/^fingerprint 0x\([0-9a-f]*\) .*/\1/p' "$tmp/stdout")
[[ -n $fp2 && $fp2 != "$fp" ]] && pass || fail "one edited row leaves the fingerprint $fp"
expect_error_absent="$tmp/err.jsonl"
expect_error "--state after one row was edited" 1 "$fp" plan "${edited[@]}" --world 2 --rank all \
  --state "$state" --out "$tmp/err.jsonl"
grep -qF "$fp2" "$tmp/stderr" && grep -qF "$tmp/edited.csv" "$tmp/stderr" && pass ||
  fail "the refusal names neither this plan's fingerprint nor the metadata: $(cat "$tmp/stderr")"
expect_error "--state after one row was edited, other world" 1 "differ" plan "${edited[@]}" \
  --world 5 --rank 3 --state "$state" --out "$tmp/err.jsonl"
expect_error_absent=
# A state line of the older format (no fingerprint) still loads, with a warning that it cannot
# be checked.
old_state=$(sed -e 's/ fingerprint=[0-9a-f]*//' -e 's/ world=[0-9]*//' <<<"$state")
expect_ok "--state with its fingerprint, world 2" plan "${common[@]}" --world 2 --rank all \
  --state "$state" --out "$tmp/new.jsonl" --quiet
run plan "${common[@]}" --world 2 --rank all --state "$old_state" --out "$tmp/old.jsonl" --quiet
if [[ $rc -ne 0 ]]; then
  fail "--state without fingerprint: exit code $rc ($(cat "$tmp/stderr"))"
elif [[ $(wc -l <"$tmp/stderr") -ne 1 ]] ||
  ! grep -q '^vbucket plan: warning: --state .* has no fingerprint' "$tmp/stderr"; then
  fail "--state without fingerprint: expected one warning line: $(cat "$tmp/stderr")"
else
  pass
  cmp -s "$tmp/old.jsonl" "$tmp/new.jsonl" && pass ||
    fail "--state without fingerprint resumes elsewhere than with it"
fi

# ---------------------------------------------------------------------------------------------
# Signals: no temporary file is left behind.
# ---------------------------------------------------------------------------------------------
big="$tmp/big.csv"
web_meta "$big" 777 40000
mkdir -p "$tmp/sig"
# start_plan ENV...: starts a plan of $big into $tmp/sig/out.jsonl in the background ($pid).
start_plan() {
  env "$@" "$vbucket" plan --config "$cfg" --meta "$big" --seed 1 --epoch 0 --rng fast \
    --world 1 --rank all --pad-warn 1 --quiet --out "$tmp/sig/out.jsonl" </dev/null \
    >/dev/null 2>"$tmp/sig.err" &
  pid=$!
}
# wait_for_temp: waits (up to 10 s) until the named temporary file exists.
wait_for_temp() {
  local i
  for ((i = 0; i < 1000; i++)); do
    compgen -G "$tmp/sig/out.jsonl.tmp-*" >/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.01
  done
  return 1
}
for sig in TERM INT; do
  rm -rf "$tmp/sig" && mkdir "$tmp/sig"
  set -m  # job control: a background job does not ignore SIGINT
  start_plan VBUCKET_NO_O_TMPFILE=1
  set +m
  if wait_for_temp; then
    kill -s $sig "$pid"
    wait "$pid"
    code=$?
    left=$(ls -A "$tmp/sig")
    [[ -z $left ]] && pass || fail "SIG$sig during plan left: $left"
    [[ $code -gt 128 ]] && pass || fail "SIG$sig: exit code $code, expected death by the signal"
  else
    wait "$pid"
    fail "SIG$sig: the temporary file never appeared (exit $?: $(cat "$tmp/sig.err"))"
  fi
done
# kill -9: nothing to clean up where the output is an unnamed O_TMPFILE file.
rm -rf "$tmp/sig" && mkdir "$tmp/sig"
start_plan
unnamed=0
for ((i = 0; i < 1000; i++)); do
  if ls -l "/proc/$pid/fd" 2>/dev/null | grep -q "$tmp/sig/#.*(deleted)"; then
    unnamed=1
    break
  fi
  compgen -G "$tmp/sig/out.jsonl.tmp-*" >/dev/null && break # a filesystem without O_TMPFILE
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.01
done
if ((unnamed)); then
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  left=$(ls -A "$tmp/sig")
  [[ -z $left ]] && pass || fail "kill -9 during plan left: $left"
else
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  echo "plan_safety.sh: no O_TMPFILE in $tmp (or no /proc): kill -9 check skipped"
fi

# ---------------------------------------------------------------------------------------------
# --out: {rank}, "-", read-only files, modes.
# ---------------------------------------------------------------------------------------------
expect_ok "--out with {rank}, numeric rank" plan "${common[@]}" --world 2 --rank 1 \
  --out "$tmp/b.{rank}.jsonl" --quiet
expect_ok "--out without {rank}" plan "${common[@]}" --world 2 --rank 1 --out "$tmp/b1.jsonl" \
  --quiet
cmp -s "$tmp/b.1.jsonl" "$tmp/b1.jsonl" && pass || fail "--out 'b.{rank}.jsonl' --rank 1 is not b.1.jsonl"
[[ -e "$tmp/b.{rank}.jsonl" ]] && fail "--out kept {rank} literally" || pass
expect_error "--out with {rank}, --rank all" 2 "{rank}" plan "${common[@]}" --world 2 --rank all \
  --out "$tmp/c.{rank}.jsonl"
# "-": standard output, the summary on standard error; no file named "-".
mkdir -p "$tmp/cwd"
vbucket_abs=$(cd "$(dirname "$vbucket")" && pwd)/$(basename "$vbucket")
(cd "$tmp/cwd" && "$vbucket_abs" plan "${common[@]}" --world 2 --rank 1 --out - \
  >"$tmp/dash.out" 2>"$tmp/dash.err" </dev/null)
code=$?
[[ $code -eq 0 ]] && pass || fail "--out -: exit code $code: $(cat "$tmp/dash.err")"
cmp -s "$tmp/dash.out" "$tmp/b1.jsonl" && pass || fail "--out - does not write the batches on stdout"
grep -q '^fingerprint ' "$tmp/dash.err" && pass || fail "--out -: no summary on stderr"
[[ -z $(ls -A "$tmp/cwd") ]] && pass || fail "--out - created: $(ls -A "$tmp/cwd")"
# A read-only file is not replaced; a replaced file keeps its mode.
echo "keep me" >"$tmp/ro.jsonl"
chmod 444 "$tmp/ro.jsonl"
expect_error "read-only --out" 1 "$tmp/ro.jsonl: cannot replace the existing file: it is not writable" \
  plan "${common[@]}" --world 2 --rank 1 --out "$tmp/ro.jsonl"
[[ $(cat "$tmp/ro.jsonl") == "keep me" ]] && pass || fail "the read-only --out was replaced"
echo "old" >"$tmp/mode.jsonl"
chmod 640 "$tmp/mode.jsonl"
expect_ok "--out over a mode 640 file" plan "${common[@]}" --world 2 --rank 1 \
  --out "$tmp/mode.jsonl" --quiet
[[ $(stat -c %a "$tmp/mode.jsonl") == 640 ]] && pass ||
  fail "the replaced --out has mode $(stat -c %a "$tmp/mode.jsonl"), expected 640"
cmp -s "$tmp/mode.jsonl" "$tmp/b1.jsonl" && pass || fail "--out over a mode 640 file: wrong content"

finish
