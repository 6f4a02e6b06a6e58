#!/usr/bin/env bash
# CLI test: the same arguments give the same batches from C++ and from the CLI. For every rank
# r of 4, `vbucket plan --seed 11 --epoch 3 --world 4 --rank r` writes exactly the JSON lines of
# a batch_sampler made directly from the library (tests/cli/sampler_dump.cpp, no CLI code),
# with fast and numpy draws, with --balance, after --start-step (a resume), and for a NumPy
# seed past 2^64 (a source family); the fingerprint the CLI prints is the sampler's and the
# same on every rank (and in `vbucket stats`).
#
#   VBUCKET_SAMPLER_DUMP=<vbucket_sampler_dump> bash tests/cli/sampler.sh <vbucket> <tests/data>
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" sampler "$@"
dump=${VBUCKET_SAMPLER_DUMP:-}
if [[ -z $dump || ! -x $dump ]]; then
  echo "FAIL: VBUCKET_SAMPLER_DUMP must name the built vbucket_sampler_dump (got '$dump';" \
    "build the target vbucket_sampler_dump)" >&2
  exit 1
fi
cfg="$data/config_opensora_v2.json"
meta="$data/../../examples/data/sample_meta.csv"
if [[ ! -f $meta ]]; then
  echo "FAIL: no metadata at $meta" >&2
  exit 1
fi

# The fingerprint line of a summary (plan's or stats'): its 0x value.
fingerprint_of() { sed -n 's/^fingerprint:* *\(0x[0-9a-f]\{16\}\) .*/\1/p' "$1"; }

# compare NAME RNG SEED GROUP START: for ranks 0..3, plan (with --balance-group GROUP when not
# 0, --start-step START when not 0) and the dump write the same bytes; every rank prints the
# dump's fingerprint.
compare() {
  local name=$1 rng=$2 seed=$3 group=$4 start=$5
  local extra=() first=""
  [[ $group != 0 ]] && extra+=(--balance-group "$group")
  [[ $start != 0 ]] && extra+=(--start-step "$start")
  local r
  for r in 0 1 2 3; do
    local cli="$tmp/cli.$r.jsonl" cpp="$tmp/cpp.$r.jsonl"
    if ! "$vbucket" plan --config "$cfg" --meta "$meta" --rng "$rng" --seed "$seed" --epoch 3 \
      --world 4 --rank "$r" --out "$cli" --pad-warn 1 "${extra[@]}" >"$tmp/summary" \
      2>"$tmp/stderr"; then
      fail "$name rank $r: vbucket plan failed: $(cat "$tmp/stderr")"
      continue
    fi
    if ! "$dump" "$cfg" "$meta" "$rng" "$seed" 3 4 "$r" "$group" "$start" >"$cpp" \
      2>"$tmp/dump.stderr"; then
      fail "$name rank $r: vbucket_sampler_dump failed: $(cat "$tmp/dump.stderr")"
      continue
    fi
    if [[ ! -s $cpp ]]; then
      fail "$name rank $r: the sampler yielded no batch"
    elif cmp -s "$cli" "$cpp"; then
      pass
    else
      fail "$name rank $r: plan and batch_sampler differ: $(diff "$cli" "$cpp" | head -c 600)"
    fi
    local fp_cli fp_cpp
    fp_cli=$(fingerprint_of "$tmp/summary")
    fp_cpp=$(cat "$tmp/dump.stderr")
    if [[ -z $fp_cli ]]; then
      fail "$name rank $r: plan's summary has no fingerprint line: $(cat "$tmp/summary")"
    elif [[ $fp_cli != "$fp_cpp" ]]; then
      fail "$name rank $r: plan prints fingerprint $fp_cli, the sampler's is $fp_cpp"
    elif [[ -n $first && $fp_cli != "$first" ]]; then
      fail "$name: rank $r's fingerprint $fp_cli differs from rank 0's $first"
    else
      pass
    fi
    [[ -z $first ]] && first=$fp_cli
  done
  fingerprint=$first
}

fingerprint=""
compare "fast" fast 11 0 0
fast_fp=$fingerprint
compare "numpy" numpy 11 0 0
numpy_fp=$fingerprint
[[ -n $fast_fp && $fast_fp != "$numpy_fp" ]] && pass ||
  fail "fast and numpy draws give the same fingerprint $fast_fp: it does not tell plans apart"
compare "fast --balance" fast 11 960 0
[[ -n $fingerprint && $fingerprint != "$fast_fp" ]] && pass ||
  fail "--balance does not change the fingerprint $fast_fp"
compare "numpy --balance --start-step 5" numpy 11 960 5
compare "fast --start-step 7" fast 11 0 7
compare "numpy seed 2^64 + 1" numpy 18446744073709551617 0 0

# --balance is --balance-group 960: the same batches as the dump with group 960.
if "$vbucket" plan --config "$cfg" --meta "$meta" --rng fast --seed 11 --epoch 3 --world 4 \
  --rank 2 --balance --out "$tmp/balance.jsonl" --quiet --pad-warn 1 2>"$tmp/stderr" &&
  "$dump" "$cfg" "$meta" fast 11 3 4 2 960 >"$tmp/balance.cpp" 2>/dev/null; then
  cmp -s "$tmp/balance.jsonl" "$tmp/balance.cpp" && pass ||
    fail "--balance differs from a sampler with balance_group 960"
else
  fail "--balance: $(cat "$tmp/stderr")"
fi

# --quiet prints no fingerprint (nothing on stdout).
if "$vbucket" plan --config "$cfg" --meta "$meta" --rng fast --seed 11 --epoch 3 --world 4 \
  --rank 0 --out "$tmp/q.jsonl" --quiet --pad-warn 1 >"$tmp/summary" 2>&1; then
  [[ -s $tmp/summary ]] && fail "plan --quiet printed: $(cat "$tmp/summary")" || pass
else
  fail "plan --quiet failed: $(cat "$tmp/summary")"
fi

# stats prints the same fingerprint as plan (it does not depend on the world size).
if "$vbucket" stats --config "$cfg" --meta "$meta" --rng fast --seed 11 --epoch 3 --world 3 \
  --pad-warn 1 >"$tmp/stats" 2>"$tmp/stderr"; then
  fp=$(fingerprint_of "$tmp/stats")
  [[ -n $fp && $fp == "$fast_fp" ]] && pass ||
    fail "stats prints fingerprint '$fp', plan printed $fast_fp: $(tail -3 "$tmp/stats")"
else
  fail "stats failed: $(cat "$tmp/stderr")"
fi

# A resume by state: --consumed-batches 24 and --state "... consumed=24" give what the sampler
# of world 4 yields after advance(6) (6 steps of 4 ranks: 24 global batches).
state="vbucket-plan seed=11 epoch=3 consumed=24 balance=0"
"$dump" "$cfg" "$meta" fast 11 3 4 1 0 6 >"$tmp/resume.cpp" 2>/dev/null ||
  fail "vbucket_sampler_dump --start-step 6 failed"
for flag in "--consumed-batches 24" "--state"; do
  args=($flag)
  [[ $flag == --state ]] && args=(--state "$state")
  if "$vbucket" plan --config "$cfg" --meta "$meta" --rng fast --seed 11 --epoch 3 --world 4 \
    --rank 1 "${args[@]}" --out "$tmp/resume.jsonl" --quiet --pad-warn 1 2>"$tmp/stderr"; then
    cmp -s "$tmp/resume.jsonl" "$tmp/resume.cpp" && pass ||
      fail "plan $flag differs from the sampler after 6 steps of world 4"
  else
    fail "plan $flag: $(cat "$tmp/stderr")"
  fi
done

finish
