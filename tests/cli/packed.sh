#!/usr/bin/env bash
# CLI test of `vbucket plan/stats --batching packed --token-budget B`: every line lists one
# bucket and one [T,H,W] per index, each the sample's own (from `vbucket assign`); the latent
# tokens of a line, recomputed here from its shapes, equal its "cost" and are at most B; every
# assigned sample appears exactly once apart from the counted alignment repeats; --state
# resumes under another world size with exactly the batches not yet consumed, in order; stats' fill
# ratio equals the one recomputed from the plan's lines; an oversized sample is an error
# naming it, or a counted drop with --drop-oversized; flag misuse is a usage error.
#
#   bash tests/cli/packed.sh <path to vbucket> <absolute path of tests/data>
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" packed "$@"

require_python3

cfg="$data/config_opensora_v2.json"
meta="$tmp/meta.csv"
web_meta "$meta" 4242 700

cat >"$tmp/check.py" <<'EOF'
"""Checks of packed `vbucket plan` outputs. Usage: check.py MODE ARGS..."""
import json
import re
import sys
from collections import Counter

def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]

def tokens(t, h, w):
    """Latent tokens, written out from the documented formula."""
    return (1 + (t - 1) // 4) * (h / 16) * (w / 16)

def assigned(path):
    """index -> ((resolution, frames, ratio), [T, H, W]) from `vbucket assign`'s OUT.csv."""
    out = {}
    with open(path) as f:
        next(f)
        for line in f:
            x = line.rstrip("\n").split(",")
            if x[1]:
                out[int(x[0])] = ((x[1], int(x[2]), x[3]), [int(x[4]), int(x[5]), int(x[6])])
    return out

def summary(path):
    text = open(path).read()
    a = re.search(r"world (\d+), .*?: (\d+) steps from step (\d+) \((\d+) global batches consumed "
                  r"before\); rank alignment: (\d+) repeated batches \((\d+) samples\)", text)
    d = re.search(r"(\d+) dropped in disabled buckets, (\d+) oversized dropped", text)
    if not a or not d:
        sys.exit(f"cannot parse the summary: {text!r}")
    return dict(world=int(a[1]), steps=int(a[2]), consumed=int(a[4]), repeats=int(a[5]),
                repeat_samples=int(a[6]), disabled=int(d[1]), oversized=int(d[2]))

def check_lines(lines, buckets, budget, with_rank):
    for x in lines:
        keys = (["rank"] if with_rank else []) + ["step", "bucket", "thw", "indices", "cost"]
        if list(x.keys()) != keys:
            sys.exit(f"fields {list(x.keys())}, expected {keys}")
        n = len(x["indices"])
        if n == 0 or len(x["bucket"]) != n or len(x["thw"]) != n:
            sys.exit(f"line lists {len(x['bucket'])} buckets, {len(x['thw'])} shapes, {n} indices")
        total = 0.0
        for i, b, thw in zip(x["indices"], x["bucket"], x["thw"]):
            if i not in buckets:
                sys.exit(f"sample {i} has no bucket but is in a batch")
            if (tuple(b), thw) != (buckets[i][0], buckets[i][1]):
                sys.exit(f"sample {i}: line says {b} {thw}, assign says {buckets[i]}")
            total += tokens(*thw)
        if abs(total - x["cost"]) > 1e-6 * budget:
            sys.exit(f"cost {x['cost']} but the shapes sum to {total}")
        if total > budget * (1 + 1e-12):
            sys.exit(f"batch of {total} latent tokens above the budget {budget}")

mode = sys.argv[1]
if mode == "all":
    # all LINES ASSIGN BUDGET SUMMARY [DISABLED_OR_OVERSIZED_OK]
    lines, buckets, budget = load(sys.argv[2]), assigned(sys.argv[3]), float(sys.argv[4])
    s = summary(sys.argv[5])
    check_lines(lines, buckets, budget, True)
    if len(lines) != s["steps"] * s["world"]:
        sys.exit(f"{len(lines)} lines for {s['steps']} steps of world {s['world']}")
    seen = Counter(i for x in lines for i in x["indices"])
    repeats = sum(c - 1 for c in seen.values())
    if repeats != s["repeat_samples"]:
        sys.exit(f"{repeats} repeated samples, the summary counts {s['repeat_samples']}")
    missing = [i for i in buckets if i not in seen]
    if len(missing) != s["disabled"] + s["oversized"]:
        sys.exit(f"{len(missing)} assigned samples in no batch, the summary drops "
                 f"{s['disabled']} + {s['oversized']}")
    if len(sys.argv) < 7 and s["oversized"] != 0:
        sys.exit("oversized samples dropped without --drop-oversized")
    if len(sys.argv) >= 7:
        big = [i for i in missing if tokens(*buckets[i][1]) > budget]
        if len(big) != s["oversized"] or s["oversized"] == 0:
            sys.exit(f"{len(big)} samples above the budget missing, summary {s['oversized']}")
elif mode == "resume":
    # resume FIRST SUMMARY CONSUMED REST: FIRST (--rank all) lists global positions in order, so
    # its first n lines are the real batches (n = lines - repeats); the resumed REST must be
    # exactly positions CONSUMED .. n-1, in order, then only its own tail repeats.
    first, s, consumed, rest = load(sys.argv[2]), summary(sys.argv[3]), int(sys.argv[4]), load(sys.argv[5])
    n = len(first) - s["repeats"]
    want = [x["indices"] for x in first[consumed:n]]
    got = [x["indices"] for x in rest[:len(want)]]
    if got != want:
        sys.exit(f"resumed batches differ from positions {consumed}..{n - 1}")
    if len(rest) - len(want) >= 2:
        sys.exit(f"{len(rest) - len(want)} repeats for world 2")
elif mode == "fill":
    # fill LINES BUDGET STATS: stats' fill ratio is the plan's (with --drop-last: no repeats)
    lines, budget = load(sys.argv[2]), float(sys.argv[3])
    text = open(sys.argv[4]).read()
    m = re.search(r"fill ratio: +([0-9.]+)", text)
    w = re.search(r"world (\d+): (\d+) steps", text)
    if not m or not w:
        sys.exit(f"no fill ratio in {text!r}")
    want = sum(x["cost"] for x in lines) / (int(w[1]) * int(w[2]) * budget)
    if abs(float(m[1]) - want) > 1e-4:
        sys.exit(f"stats says fill {m[1]}, the lines give {want:.6f}")
    if not re.search(r"step balance: +max/mean cost per step [0-9.]+", text):
        sys.exit("no step balance line")
EOF

seed=11
expect_ok "assign" assign --config "$cfg" --meta "$meta" --rule opensora-v2 --rng fast \
  --seed "$seed" --out "$tmp/assign.csv" --quiet
common=(--config "$cfg" --meta "$meta" --seed "$seed" --epoch 0 --rng fast --batching packed)

# Budget 80000: larger than every bucket's sample of this config.
expect_ok "plan all" plan "${common[@]}" --token-budget 80000 --world 3 --rank all \
  --out "$tmp/all.jsonl" && cp "$tmp/stdout" "$tmp/all.txt" &&
  json_check "plan all" all "$tmp/all.jsonl" "$tmp/assign.csv" 80000 "$tmp/all.txt"

# One rank's file is its lines of --rank all.
expect_ok "plan rank 1" plan "${common[@]}" --token-budget 80000 --world 3 --rank 1 \
  --out "$tmp/r1.jsonl" --quiet
if python3 - "$tmp/all.jsonl" "$tmp/r1.jsonl" <<'EOF'; then pass; else fail "rank 1 is not its lines of --rank all"; fi
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
sys.exit(0 if [dict((k, v) for k, v in x.items() if k != "rank") for x in a if x["rank"] == 1] == b else 1)
EOF

# Resume: 2 steps of world 3, then world 2 from the printed state.
state=$(sed -n 's/^resume state after these steps: //p' "$tmp/all.txt")
expect_ok "plan k" plan "${common[@]}" --token-budget 80000 --world 3 --rank all --start-step 2 \
  --out "$tmp/k.jsonl"
if python3 - "$tmp/all.jsonl" "$tmp/k.jsonl" <<'EOF'; then pass; else fail "--start-step 2 is not the rest of the schedule"; fi
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
sys.exit(0 if [x for x in a if x["step"] >= 2] == b else 1)
EOF
st2=$(python3 -c "import re,sys; print(re.sub(r'consumed=\d+', 'consumed=6', sys.argv[1]))" "$state")
expect_ok "plan resume" plan "${common[@]}" --token-budget 80000 --world 2 --rank all \
  --state "$st2" --out "$tmp/rest.jsonl" &&
  json_check "resume" resume "$tmp/all.jsonl" "$tmp/all.txt" 6 "$tmp/rest.jsonl"

# stats' fill ratio is the plan's (drop-last: no repeats).
expect_ok "plan drop-last" plan "${common[@]}" --token-budget 80000 --world 4 --rank all \
  --drop-last --out "$tmp/dl.jsonl"
expect_ok "stats" stats "${common[@]}" --token-budget 80000 --world 4 --drop-last &&
  cp "$tmp/stdout" "$tmp/stats.txt" && json_check "fill" fill "$tmp/dl.jsonl" 80000 "$tmp/stats.txt"

# Oversized samples: an error naming one, or counted drops.
expect_error "oversized" 1 "more than the token budget 5000" plan "${common[@]}" \
  --token-budget 5000 --world 2 --rank all --out "$tmp/o.jsonl"
if grep -qE "sample [0-9]+ \(bucket [0-9]+, [0-9]+x[0-9]+x[0-9]+\) costs" "$tmp/stderr"; then pass; else fail "oversized: no sample named: $(cat "$tmp/stderr")"; fi
expect_ok "drop oversized" plan "${common[@]}" --token-budget 5000 --drop-oversized --world 2 \
  --rank all --out "$tmp/o.jsonl" && cp "$tmp/stdout" "$tmp/o.txt" &&
  json_check "drop oversized" all "$tmp/o.jsonl" "$tmp/assign.csv" 5000 "$tmp/o.txt" dropped

# Flag misuse.
expect_error "no budget" 2 "--token-budget" plan "${common[@]}" --world 1 --rank 0 \
  --out "$tmp/x.jsonl"
expect_error "budget without packed" 2 "--token-budget applies to --batching packed" plan \
  --config "$cfg" --meta "$meta" --seed 1 --epoch 0 --world 1 --rank 0 --token-budget 10 \
  --out "$tmp/x.jsonl"
expect_error "policy with packed" 2 "--policy applies to --batching fixed" plan "${common[@]}" \
  --token-budget 80000 --policy drop --world 1 --rank 0 --out "$tmp/x.jsonl"
expect_error "bad budget" 2 "--token-budget" plan "${common[@]}" --token-budget -3 --world 1 \
  --rank 0 --out "$tmp/x.jsonl"
expect_error "bad batching" 2 "unknown batching \"pack\"" plan --config "$cfg" --meta "$meta" \
  --seed 1 --epoch 0 --world 1 --rank 0 --batching pack --out "$tmp/x.jsonl"

finish
