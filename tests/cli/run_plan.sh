#!/usr/bin/env bash
# CLI test of `vbucket plan --run RUN.json` with "sources" and "stages" (a run plan): Open-Sora
# 2.0's stage 1 (256px) and stage 2 (768px, from a step in the middle of epoch 0) as one run of
# two sources drawn 70/30. Two epochs are planned without interruption and, from scratch, with
# interruptions at random steps resumed from the state line under other world sizes (4 -> 3 ->
# 5) and an out-of-memory step; `vbucket audit` over both ledgers is clean (every drawn sample
# once, apart from counted pads) and shows the weights; a run resumed under the same world gives
# the same lines as the uninterrupted one; a ledger with a batch line removed fails the audit
# (exit 1); a bad run file names the file and the key.
#
#   bash tests/cli/run_plan.sh <path to vbucket> <absolute path of tests/data>
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" run_plan "$@"
require_python3

web_meta "$tmp/web.csv" 11 3000
web_meta "$tmp/curated.csv" 12 1500
python3 - "$data/config_opensora_v2.json" "$tmp" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
json.dump({"256px": c["256px"]}, open(sys.argv[2] + "/stage1.json", "w"))
run = {"seed": 7, "world": 4, "rank": 0, "epoch_samples": 4000,
       "sources": [{"name": "web", "csv": "web.csv", "weight": 0.7},
                   {"name": "curated", "csv": "curated.csv", "weight": 0.3}],
       "stages": [{"name": "stage1-256px", "config": "stage1.json"},
                  {"name": "stage2-768px", "from_step": 40,
                   "config": {"768px": c["768px"]}}]}
json.dump(run, open(sys.argv[2] + "/run.json", "w"))
EOF

audit_clean() {
  local name=$1 dir=$2
  run audit "$dir"
  if [[ $rc -ne 0 ]]; then
    fail "$name: audit exit $rc: $(head -c 2000 "$tmp/stdout") $(cat "$tmp/stderr")"
  elif ! grep -q "^clean: " "$tmp/stdout"; then
    fail "$name: no 'clean:' line: $(cat "$tmp/stdout")"
  elif ! grep -q 'source 0 "web": .*weight 0.7000 ok' "$tmp/stdout" ||
    ! grep -q 'source 1 "curated": .*weight 0.3000 ok' "$tmp/stdout"; then
    fail "$name: per-source shares not reported ok: $(cat "$tmp/stdout")"
  else
    pass
  fi
}

# The whole run, uninterrupted.
expect_ok "uninterrupted" plan --run "$tmp/run.json" --rank all --epochs 2 --quiet \
  --out "$tmp/full.jsonl" --ledger "$tmp/L0"
audit_clean "uninterrupted audit" "$tmp/L0"
steps=$(python3 -c "import json,sys; print(1+max(json.loads(l)['step'] for l in open(sys.argv[1])))" "$tmp/full.jsonl")
[[ $steps -gt 60 ]] && pass || fail "only $steps steps planned"

# Interrupted at random steps (drawn from a fixed seed), resumed under worlds 3 and 5, one
# out-of-memory step on the way.
RANDOM=31
k1=$((1 + RANDOM % 15))
k2=$((1 + RANDOM % 15))
oom=$((k1 + k2 + 1 + RANDOM % 8)) # in stage 1 (256px: batch sizes of 3 and more)
expect_ok "part 1 (world 4)" plan --run "$tmp/run.json" --rank all --steps $k1 --quiet \
  --save-state "$tmp/s1" --out "$tmp/p1.jsonl" --ledger "$tmp/L1"
expect_ok "part 2 (world 3)" plan --run "$tmp/run.json" --rank all --steps $k2 --quiet \
  --state "@$tmp/s1" --world 3 --save-state "$tmp/s2" --out "$tmp/p2.jsonl" --ledger "$tmp/L1"
grep -q "^vbucket-run v=1 .* world=3 " "$tmp/s2" && pass || fail "state after part 2: $(cat "$tmp/s2")"
expect_ok "part 3 (world 5, out of memory at step $oom)" plan --run "$tmp/run.json" --rank all \
  --epochs 2 --quiet --state "@$tmp/s2" --world 5 --oom $oom --out "$tmp/p3.jsonl" \
  --ledger "$tmp/L1"
audit_clean "interrupted audit (k1=$k1 k2=$k2 oom=$oom)" "$tmp/L1"

# Resumed under the same world: the same batches as without the interruption.
expect_ok "same world, part 1" plan --run "$tmp/run.json" --rank all --steps $k2 --quiet \
  --save-state "$tmp/t1" --out "$tmp/q1.jsonl"
expect_ok "same world, part 2" plan --run "$tmp/run.json" --rank all --epochs 2 --quiet \
  --state "$(cat "$tmp/t1")" --out "$tmp/q2.jsonl"
if cat "$tmp/q1.jsonl" "$tmp/q2.jsonl" | cmp -s - "$tmp/full.jsonl"; then pass; else
  fail "resumed at step $k2 under the same world: the lines differ from the uninterrupted run"
fi
# One rank alone writes that rank's lines of the run.
expect_ok "rank 2 alone" plan --run "$tmp/run.json" --rank 2 --epochs 2 --quiet --out "$tmp/r2.jsonl"
if grep '"rank":2,' "$tmp/full.jsonl" | cmp -s - "$tmp/r2.jsonl"; then pass; else
  fail "--rank 2 differs from rank 2's lines of --rank all"
fi

# A corrupted ledger: one batch line of rank 1 removed -> its samples are missing.
cp -r "$tmp/L0" "$tmp/bad"
line=$(grep -n '^B' "$tmp/bad/rank-00001.ledger" | sed -n 5p | cut -d: -f1)
sed -i "${line}d" "$tmp/bad/rank-00001.ledger"
run audit "$tmp/bad"
if [[ $rc -eq 1 ]] && grep -q "missing" "$tmp/stdout"; then pass; else
  fail "corrupted ledger: audit exit $rc: $(head -c 1500 "$tmp/stdout")"
fi

# A bad run file names the file and the key.
python3 - "$tmp" <<'EOF'
import json, sys
run = json.load(open(sys.argv[1] + "/run.json"))
run["stages"][1]["from_step"] = "forty"
json.dump(run, open(sys.argv[1] + "/bad.json", "w"))
EOF
expect_error "bad from_step" 1 "bad.json: stages[1].from_step: expected a non-negative integer" \
  plan --run "$tmp/bad.json" --out "$tmp/x.jsonl"

finish
