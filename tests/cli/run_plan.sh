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

# The ledger is binary by default (version 2); `audit --dump` prints it as text lines after a
# line naming the file: they are a ledger too (version 1).
if head -c 18 "$tmp/L0/rank-00001.ledger" | grep -q '^#vbucket-ledger 2$'; then pass; else
  fail "the run's ledger is not binary by default: $(head -c 40 "$tmp/L0/rank-00001.ledger")"
fi
# A corrupted ledger: one batch line of rank 1 removed -> its samples are missing.
cp -r "$tmp/L0" "$tmp/bad"
"$vbucket" audit --dump "$tmp/bad/rank-00001.ledger" | tail -n +2 >"$tmp/r1.txt"
line=$(grep -n '^B' "$tmp/r1.txt" | sed -n 5p | cut -d: -f1)
sed "${line}d" "$tmp/r1.txt" >"$tmp/bad/rank-00001.ledger"
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
expect_error "bad from_step" 1 "bad.json: stages[1].from_step: expected an integer from 0 to" \
  plan --run "$tmp/bad.json" --out "$tmp/x.jsonl"


# The bad-input contract of the run wing: one line naming the file and key, exit non-zero, no
# output file. Stages out of order or from one step, a stage's balance past the field's range,
# an epoch of 2^64 - 1 samples, a draw past the limit, a memory model that sizes nothing.
expect_error_absent="$tmp/x.jsonl"
bad_run() { # NAME PATTERN PYTHON: run.json edited by the statement, then planned
  python3 - "$tmp" "$3" <<'EOF'
import json, sys
run = json.load(open(sys.argv[1] + "/run.json"))
exec(sys.argv[2])
json.dump(run, open(sys.argv[1] + "/bad.json", "w"))
EOF
  expect_error "$1" 1 "$2" plan --run "$tmp/bad.json" --out "$tmp/x.jsonl"
}
bad_run "stages out of order" 'bad.json: stage 2 ("b") starts at step 30, before stage 1' \
  'run["stages"].append(dict(run["stages"][1], name="b", from_step=30))'
bad_run "two stages from one step" 'bad.json: stage 2 ("b") starts at step 40, as stage 1' \
  'run["stages"].append(dict(run["stages"][1], name="b"))'
bad_run "from_step and from_epoch" "bad.json: stages[1]: give from_step or from_epoch, not both" \
  'run["stages"][1]["from_epoch"] = 1'
bad_run "stage balance 2^32" \
  'bad.json: key "stages[1].balance": expected an integer from 0 to 16777216' \
  'run["stages"][1]["balance"] = 2**32'
bad_run "epoch_samples 2^64 - 1" \
  "bad.json: epoch_samples: expected an integer from 0 to 4294967295" \
  'run["epoch_samples"] = 2**64 - 1'
bad_run "weight 1e300" \
  "bad.json: sources[0]: draw value 1e+300 must be a finite number from 0 to 1e+15" \
  'run["sources"][0]["weight"] = 1e300'
bad_run "count 2^64 - 1" "bad.json: sources[1]: draw value" \
  'del run["sources"][1]["weight"]; run["sources"][1]["count"] = 2**64 - 1'
for model in 0,0,0 -1,0.001,0 1,-0.5,0 1,nan,0; do
  expect_error "--memory-model $model" 2 "--memory-model $model: " plan --run "$tmp/run.json" \
    --memory-model "$model" --memory-budget 80 --out "$tmp/x.jsonl"
done
# A state line edited or of another run is refused naming the state; nothing is written.
expect_ok "a state to edit" plan --run "$tmp/run.json" --steps 3 --save-state "$tmp/st" \
  --quiet --out "$tmp/st.jsonl"
sed 's/ epoch=0 / epoch=5 /' "$tmp/st" >"$tmp/st5"
expect_error "an edited epoch" 1 "run state: the line does not match its check" plan \
  --run "$tmp/run.json" --state "@$tmp/st5" --out "$tmp/x.jsonl"
sed 's/ world=4 / world=0 /' "$tmp/st" >"$tmp/st0"
expect_error "world 0" 1 "run state: world: expected an integer from 1 to 16777216" plan \
  --run "$tmp/run.json" --state "@$tmp/st0" --out "$tmp/x.jsonl"
unset expect_error_absent

# stats --run of a run plan (several sources): epoch 0's draws, 0.7 / 0.3 of 4000, and its plan.
if expect_ok "stats --run of a run plan" stats --run "$tmp/run.json"; then
  grep -q "4000 drawn samples (web 2800, curated 1200), world 4" "$tmp/stdout" && pass ||
    fail "stats --run: $(head -c 600 "$tmp/stdout")"
fi

finish
