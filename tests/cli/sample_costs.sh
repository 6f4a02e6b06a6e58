#!/usr/bin/env bash
# CLI test of `--sample-costs FILE` (run spec field sample_costs): the costs reorder the batches
# (the same batches, another order) and, with step balance, even out the per-step loads of the
# costs (Σ max / Σ mean over the steps, computed here from the batches alone); the resume state
# records their hash: a state saved with them resumes with them (as --consumed-batches does)
# and is refused without them or under other costs; the same run from --run RUN.json (a path
# relative to the file); a bad file (not a number, negative, NaN, too few rows, missing) and
# packed batching are errors naming the file.
#
#   bash tests/cli/sample_costs.sh <path to vbucket> <absolute path of tests/data>
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" sample_costs "$@"
require_python3

cfg="$data/config_opensora_v2.json"
meta="$tmp/meta.csv"
web_meta "$meta" 99 2000
# Skewed costs, one per metadata row: a tenth of the rows cost 40, the rest 0.5 (a header line).
python3 - "$tmp/costs.txt" "$tmp/other.txt" 2000 <<'EOF'
import random, sys
r = random.Random(3)
costs = [r.choice([0.5] * 9 + [40.0]) for _ in range(int(sys.argv[3]))]
with open(sys.argv[1], "w") as f:
    f.write("cost\n" + "".join(f"{c}\n" for c in costs))
costs[5] += 1.0
with open(sys.argv[2], "w") as f:
    f.write("".join(f"{c}\n" for c in costs))
EOF

cat >"$tmp/check.py" <<'EOF'
"""check.py MODE ARGS...: same-batches A B | balance COSTS PLAIN COSTED"""
import json, sys

def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]

mode = sys.argv[1]
if mode == "same-batches":
    a, b = load(sys.argv[2]), load(sys.argv[3])
    ia, ib = [x["indices"] for x in a], [x["indices"] for x in b]
    if ia == ib:
        sys.exit("the costs left the batch order as it was")
    if sorted(map(tuple, ia)) != sorted(map(tuple, ib)):
        sys.exit("the costs changed the batches, not only their order")
elif mode == "balance":
    with open(sys.argv[2]) as f:
        cost = [float(x) for x in f.read().split()[1:]]
    ratio = {}
    for path in sys.argv[3:5]:
        steps = {}
        for b in load(path):
            steps.setdefault(b["step"], []).append(sum(cost[i] for i in b["indices"]))
        ratio[path] = sum(map(max, steps.values())) / sum(sum(v) / len(v) for v in steps.values())
    plain, costed = ratio[sys.argv[3]], ratio[sys.argv[4]]
    if not costed < plain:
        sys.exit(f"per-step load max/mean with the costs {costed:.3f} is not below {plain:.3f}")
EOF

common=(--config "$cfg" --meta "$meta" --seed 7 --epoch 0 --balance-group 8 --pad-warn 1
  --rank all)

# World 1: the same batches in another order.
expect_ok "plan without costs" plan "${common[@]}" --world 1 --out "$tmp/plain1.jsonl" --quiet
expect_ok "plan with costs" plan "${common[@]}" --world 1 --out "$tmp/cost1.jsonl" --quiet \
  --sample-costs "$tmp/costs.txt"
json_check "the costs reorder the batches" same-batches "$tmp/plain1.jsonl" "$tmp/cost1.jsonl"

# World 4 with balance: the steps' loads of the costs even out; the state records the costs.
expect_ok "plan world 4" plan "${common[@]}" --world 4 --out "$tmp/plain4.jsonl" --quiet
if expect_ok "plan world 4 with costs" plan "${common[@]}" --world 4 --out "$tmp/cost4.jsonl" \
  --sample-costs "$tmp/costs.txt"; then
  state=$(sed -n 's/^resume state after these steps: //p' "$tmp/stdout")
  [[ $state == *" sample_cost="* ]] && pass || fail "the resume state records no costs: $state"
fi
json_check "balance with costs" balance "$tmp/costs.txt" "$tmp/plain4.jsonl" "$tmp/cost4.jsonl"

# Resume: the state with consumed=40 under world 3 is --consumed-batches 40 with the costs.
state40=$(sed 's/consumed=[0-9]*/consumed=40/' <<<"$state")
w3=(--world 3 --out "$tmp/resume.jsonl" --quiet)
expect_ok "--state with the same costs" plan "${common[@]}" "${w3[@]}" --state "$state40" \
  --sample-costs "$tmp/costs.txt" && cp "$tmp/resume.jsonl" "$tmp/state.jsonl"
expect_ok "--consumed-batches with costs" plan "${common[@]}" "${w3[@]}" --consumed-batches 40 \
  --sample-costs "$tmp/costs.txt"
cmp -s "$tmp/state.jsonl" "$tmp/resume.jsonl" && [[ -s $tmp/resume.jsonl ]] && pass ||
  fail "--state consumed=40 with costs differs from --consumed-batches 40"
expect_error "--state with costs, none given" 1 "has no per-sample costs" plan "${common[@]}" \
  "${w3[@]}" --state "$state40"
expect_error "--state with costs, other costs" 1 "per-sample costs of hash" plan "${common[@]}" \
  "${w3[@]}" --state "$state40" --sample-costs "$tmp/other.txt"

# --run RUN.json with a relative path: the same run as the flags.
mkdir -p "$tmp/sub"
cp "$tmp/costs.txt" "$tmp/sub/c.txt"
cat >"$tmp/sub/run.json" <<JSON
{"config": "$cfg", "meta": "$meta", "seed": 7, "epoch": 0, "balance_group": 8,
 "world": 1, "rank": 0, "sample_costs": "c.txt"}
JSON
expect_ok "--run with sample_costs" plan --run "$tmp/sub/run.json" --rank all --pad-warn 1 --quiet \
  --out "$tmp/run.jsonl"
cmp -s "$tmp/run.jsonl" "$tmp/cost1.jsonl" && pass ||
  fail "--run with sample_costs differs from --sample-costs"

# Bad files: each error names the file (and the line).
printf 'cost\n1\nabc\n' >"$tmp/word.txt"
printf '1\n-2\n' >"$tmp/negative.txt"
printf '1\n2\nnan\n' >"$tmp/nan.txt"
head -n 11 "$tmp/costs.txt" >"$tmp/short.txt"
bad=(--world 2 --out "$tmp/bad.jsonl" --quiet)
expect_error "a word" 1 "$tmp/word.txt:3: expected one per-sample cost" plan "${common[@]}" \
  "${bad[@]}" --sample-costs "$tmp/word.txt"
expect_error "a negative cost" 1 "$tmp/negative.txt:2: a per-sample cost must be a finite" \
  plan "${common[@]}" "${bad[@]}" --sample-costs "$tmp/negative.txt"
expect_error "NaN" 1 "$tmp/nan.txt:3:" plan "${common[@]}" "${bad[@]}" \
  --sample-costs "$tmp/nan.txt"
expect_error "too few rows" 1 "$tmp/short.txt holds 10 per-sample costs for the 2000 samples" \
  plan "${common[@]}" "${bad[@]}" --sample-costs "$tmp/short.txt"
expect_error "a missing file" 1 "$tmp/none.txt: cannot open" plan "${common[@]}" "${bad[@]}" \
  --sample-costs "$tmp/none.txt"
mkdir -p "$tmp/costs_dir"
expect_error "a directory" 1 "$tmp/costs_dir: is a directory, not a per-sample costs file" plan \
  "${common[@]}" "${bad[@]}" --sample-costs "$tmp/costs_dir"
expect_error "packed batching" 2 "--sample-costs applies to --batching fixed only" plan \
  --config "$cfg" --meta "$meta" --seed 7 --world 2 --rank 0 --epoch 0 --out "$tmp/bad.jsonl" \
  --batching packed --token-budget 100000 --sample-costs "$tmp/costs.txt"

finish
