#!/usr/bin/env bash
# CLI test of `vbucket plan` and `vbucket stats`: every rank's output together covers every
# assigned sample, repeats are exactly the counted pads; --rank all is the ranks' outputs
# interleaved; --start-step K is the rest of the same schedule; --consumed-batches N under
# another world size delivers exactly the batches not yet consumed, also with --balance (whose
# order never depends on the world size) and from --state; --drop-last repeats no sample;
# --policy downgrade keeps videos out of image buckets; the pad warning appears on stderr
# above --pad-warn and not below; bad input exits non-zero with exactly one stderr line naming
# the problem.
#
#   bash tests/cli/plan.sh <path to vbucket> <absolute path of tests/data>
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" plan "$@"
require_python3

# ---------------------------------------------------------------------------------------------
# Inputs: 600 web-video-like rows (images, videos of many sizes, a few too small for any bucket).
# ---------------------------------------------------------------------------------------------
cfg="$data/config_opensora_v2.json"
meta="$tmp/meta.csv"
web_meta "$meta" 12345 600

cat >"$tmp/check.py" <<'EOF'
"""Checks of `vbucket plan` outputs. Usage: check.py MODE ARGS..."""
import json
import re
import sys
from collections import Counter

def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]

def summary(path):
    """Numbers from plan's stdout summary."""
    text = open(path).read()
    m = re.search(r"(\d+) batches \(policy (\w+): (\d+) pads, (\d+) dropped, (\d+) moved", text)
    a = re.search(r"world (\d+), .*?: (\d+) steps from step (\d+) \((\d+) global batches consumed "
                  r"before\); rank alignment: (\d+) repeated batches \((\d+) samples\), (\d+) "
                  r"dropped batches \((\d+) samples\)", text)
    if not m or not a:
        sys.exit(f"cannot parse the summary: {text!r}")
    return dict(batches=int(m[1]), policy=m[2], pads=int(m[3]), dropped=int(m[4]),
                moved=int(m[5]), world=int(a[1]), steps=int(a[2]), first=int(a[3]),
                consumed=int(a[4]), repeats=int(a[5]), repeat_samples=int(a[6]),
                dropped_batches=int(a[7]), dropped_samples=int(a[8]))

def assigned(path):
    """index -> (resolution, frames, ratio) from `vbucket assign`'s OUT.csv."""
    out = {}
    with open(path) as f:
        next(f)
        for line in f:
            fields = line.rstrip("\n").split(",")
            if fields[1]:
                out[int(fields[0])] = (fields[1], int(fields[2]), fields[3])
    return out

def check_lines(lines, config, with_rank):
    """Every line: the contract's fields, a full batch of its bucket's size and shape."""
    for x in lines:
        keys = ["rank"] if with_rank else []
        keys += ["step", "bucket", "thw", "indices"]
        if list(x.keys()) != keys:
            sys.exit(f"fields {list(x.keys())}, expected {keys}")
        res, frames, ratio = x["bucket"]
        bs = config[res][str(frames)][1]
        if len(x["indices"]) != bs:
            sys.exit(f"batch of {len(x['indices'])} in bucket {x['bucket']} of batch size {bs}")
        if x["thw"][0] != frames:
            sys.exit(f"thw {x['thw']} does not match bucket {x['bucket']}")

def coverage(batches, buckets, pads, exact_bucket=True):
    """Every assigned sample appears; repeats are exactly `pads`; nothing else appears."""
    seen = Counter()
    for x in batches:
        for i in x["indices"]:
            if i not in buckets:
                sys.exit(f"sample {i} has no bucket but is in a batch")
            if exact_bucket and tuple(x["bucket"]) != buckets[i]:
                sys.exit(f"sample {i} of bucket {buckets[i]} is in a batch of {x['bucket']}")
            seen[i] += 1
    missing = [i for i in buckets if seen[i] == 0]
    if missing:
        sys.exit(f"{len(missing)} assigned samples never appear, e.g. {missing[:5]}")
    repeats = sum(seen.values()) - len(seen)
    if repeats != pads:
        sys.exit(f"{repeats} repeated slots but {pads} counted pads")

mode = sys.argv[1]
config = json.load(open(sys.argv[2]))
if mode == "all":  # all.jsonl summary assign.csv world
    lines = load(sys.argv[3])
    s = summary(sys.argv[4])
    world = int(sys.argv[6])
    check_lines(lines, config, True)
    steps = Counter(x["step"] for x in lines)
    if sorted(steps) != list(range(s["steps"])) or set(steps.values()) != {world}:
        sys.exit("--rank all: every step must have exactly one line per rank")
    if [x["rank"] for x in lines] != [r for _ in range(s["steps"]) for r in range(world)]:
        sys.exit("--rank all: lines must go step by step, ranks in order")
    if s["steps"] * world != s["batches"] + s["repeats"]:
        sys.exit("steps x world != batches + repeats")
    coverage(lines, assigned(sys.argv[5]), s["pads"] + s["repeat_samples"])
elif mode == "ranks":  # all.jsonl world rank0.jsonl ...: per-rank files == --rank all, split
    lines = load(sys.argv[3])
    world = int(sys.argv[4])
    for r in range(world):
        mine = [{k: v for k, v in x.items() if k != "rank"} for x in lines if x["rank"] == r]
        got = load(sys.argv[5 + r])
        check_lines(got, config, False)
        if got != mine:
            sys.exit(f"rank {r}'s output differs from its lines in --rank all")
elif mode == "suffix":  # full.jsonl part.jsonl K: part == lines of full with step >= K
    full, part, k = load(sys.argv[3]), load(sys.argv[4]), int(sys.argv[5])
    if part != [x for x in full if x["step"] >= k]:
        sys.exit(f"--start-step {k}: not the rest of the schedule")
elif mode == "resume":  # first.jsonl K world1 rest.jsonl rest-summary assign.csv
    first, k, world1 = load(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    rest, s = load(sys.argv[6]), summary(sys.argv[7])
    done = [x for x in first if x["step"] < k]
    if len(done) != k * world1:
        sys.exit("the first run has fewer steps than the resume point")
    if s["consumed"] != k * world1:
        sys.exit(f"resumed after {s['consumed']} batches, expected {k * world1}")
    w2 = s["world"]
    first_label = -(-k * world1 // w2)
    if rest and rest[0]["step"] != first_label:
        sys.exit(f"resumed steps start at {rest[0]['step']}, expected {first_label}")
    if len(rest) != s["steps"] * w2:
        sys.exit("resumed run: lines != steps x world")
    if k * world1 + len(rest) != s["batches"] + s["repeats"]:
        sys.exit("consumed + resumed batches != the epoch's batches + repeats")
    # Nothing skipped, nothing replayed: the first run's pads (no repeats before the last
    # step) plus the resumed run's pads and repeats explain every repeated slot.
    check_lines(rest, config, True)
    coverage(done + rest, assigned(sys.argv[8]), s["pads"] + s["repeat_samples"])
elif mode == "no-repeat":  # file.jsonl summary: drop policy + drop-last: no sample twice
    lines = load(sys.argv[3])
    s = summary(sys.argv[4])
    check_lines(lines, config, True)
    seen = Counter(i for x in lines for i in x["indices"])
    twice = [i for i, c in seen.items() if c > 1]
    if twice:
        sys.exit(f"--drop-last: samples appear twice, e.g. {twice[:5]}")
    if s["repeats"] != 0 or s["pads"] != 0:
        sys.exit("--drop-last: repeats or pads counted")
elif mode == "downgrade":  # file.jsonl summary assign.csv
    lines = load(sys.argv[3])
    s = summary(sys.argv[4])
    check_lines(lines, config, True)
    coverage(lines, assigned(sys.argv[5]), s["pads"] + s["repeat_samples"], exact_bucket=False)
elif mode == "kinds":  # file.jsonl meta.csv: frames-1 batches hold images only, others videos
    lines = load(sys.argv[3])
    with open(sys.argv[4]) as f:
        header = next(f).rstrip("\n").split(",")
        frames = [int(row.split(",")[header.index("num_frames")]) for row in f if row.strip()]
    check_lines(lines, config, True)
    for x in lines:
        kinds = {"image" if frames[i] == 1 else "video" for i in x["indices"]}
        want = "image" if x["thw"][0] == 1 else "video"
        if kinds != {want}:
            sys.exit(f"a batch of thw {x['thw']} holds {sorted(kinds)} samples: {x['indices']}")
elif mode == "pad-share":  # file.jsonl (world 1): prints pads / slots to 4 decimals
    lines = load(sys.argv[3])
    slots = sum(len(x["indices"]) for x in lines)
    distinct = len({i for x in lines for i in x["indices"]})
    print(f"{(slots - distinct) / slots:.4f}")
else:
    sys.exit(f"unknown mode {mode}")
EOF

# The assignment `plan` uses for epoch 0 with the fast source: `assign --rng fast --seed S`.
seed=7
expect_ok "assign" assign --config "$cfg" --meta "$meta" --rule opensora-v2 --rng fast \
  --seed "$seed" --out "$tmp/assign.csv" --quiet

# --pad-warn 1: these checks are not about pads (the pad warning has its own section).
common=(--config "$cfg" --meta "$meta" --seed "$seed" --epoch 0 --rng fast --pad-warn 1)

# ---------------------------------------------------------------------------------------------
# --rank all, and every rank alone.
# ---------------------------------------------------------------------------------------------
world=4
if expect_ok "plan --rank all" plan "${common[@]}" --world $world --rank all --out "$tmp/all.jsonl"; then
  cp "$tmp/stdout" "$tmp/all.summary"
  json_check "--rank all covers every assigned sample" all "$cfg" "$tmp/all.jsonl" "$tmp/all.summary" \
    "$tmp/assign.csv" $world
fi
rank_files=()
for ((r = 0; r < world; r++)); do
  expect_ok "plan --rank $r" plan "${common[@]}" --world $world --rank $r --out "$tmp/rank$r.jsonl" \
    --quiet
  rank_files+=("$tmp/rank$r.jsonl")
  [[ -s $tmp/stdout ]] && fail "plan --quiet printed on stdout"
done
json_check "each rank's output is its part of --rank all" ranks "$cfg" "$tmp/all.jsonl" $world \
  "${rank_files[@]}"

# A world that does not divide the batch count: repeats are counted and cover the last step.
if expect_ok "plan --world 7" plan "${common[@]}" --world 7 --rank all --out "$tmp/all7.jsonl"; then
  cp "$tmp/stdout" "$tmp/all7.summary"
  json_check "--world 7 covers every assigned sample" all "$cfg" "$tmp/all7.jsonl" "$tmp/all7.summary" \
    "$tmp/assign.csv" 7
fi

# The summary's fingerprint hashes the global sequence: the same for every world size and rank.
fingerprint_of() { sed -n 's/^fingerprint \(0x[0-9a-f]\{16\}\) .*/\1/p' "$1"; }
fp4=$(fingerprint_of "$tmp/all.summary")
fp7=$(fingerprint_of "$tmp/all7.summary")
[[ -n $fp4 && $fp4 == "$fp7" ]] && pass ||
  fail "fingerprint of --world 4 ($fp4) and --world 7 ($fp7) differ or are missing"
if expect_ok "plan --world 3 --rank 2" plan "${common[@]}" --world 3 --rank 2 \
  --out "$tmp/w3r2.jsonl"; then
  fp=$(fingerprint_of "$tmp/stdout")
  [[ $fp == "$fp4" ]] && pass || fail "fingerprint of --world 3 --rank 2 ($fp) is not $fp4"
fi
if expect_ok "plan --epoch 1" plan --config "$cfg" --meta "$meta" --seed "$seed" --epoch 1 \
  --pad-warn 1 --world 4 --rank 0 --out "$tmp/e1.jsonl"; then
  fp=$(fingerprint_of "$tmp/stdout")
  [[ -n $fp && $fp != "$fp4" ]] && pass || fail "epochs 0 and 1 have the same fingerprint $fp"
fi

# ---------------------------------------------------------------------------------------------
# --start-step K: the rest of the same schedule; equal to --consumed-batches K*W.
# ---------------------------------------------------------------------------------------------
expect_ok "plan --start-step 5" plan "${common[@]}" --world $world --rank 2 --start-step 5 \
  --out "$tmp/rank2-from5.jsonl" --quiet
json_check "--start-step 5 is the rest of rank 2's steps" suffix "$cfg" "$tmp/rank2.jsonl" \
  "$tmp/rank2-from5.jsonl" 5
expect_ok "plan --consumed-batches 20" plan "${common[@]}" --world $world --rank 2 \
  --consumed-batches 20 --out "$tmp/rank2-consumed20.jsonl" --quiet
if ! cmp -s "$tmp/rank2-from5.jsonl" "$tmp/rank2-consumed20.jsonl"; then
  fail "--consumed-batches 20 (world 4) differs from --start-step 5"
else
  pass
fi
# Past the end: an error naming the epoch's size (tests/cli/plan_safety.sh checks the edges).
expect_error "plan --start-step beyond the epoch" 2 "is past the end of the epoch" plan \
  "${common[@]}" --world $world --rank 0 --start-step 100000 --out "$tmp/empty.jsonl" --quiet
[[ -e $tmp/empty.jsonl ]] && fail "--start-step beyond the epoch wrote a file" || pass

# ---------------------------------------------------------------------------------------------
# --consumed-batches N with another world size: exactly the batches not yet consumed.
# ---------------------------------------------------------------------------------------------
for w2 in 3 1 6; do
  for k in 0 9 17; do
    if expect_ok "resume world $world step $k -> world $w2" plan "${common[@]}" --world $w2 \
      --rank all --consumed-batches $((k * world)) --out "$tmp/rest.jsonl"; then
      cp "$tmp/stdout" "$tmp/rest.summary"
      json_check "resume world $world after $k steps with world $w2" resume "$cfg" "$tmp/all.jsonl" \
        $k $world "$tmp/rest.jsonl" "$tmp/rest.summary" "$tmp/assign.csv"
    fi
  done
done

# ---------------------------------------------------------------------------------------------
# --balance: the order never depends on the world size (the default group is a constant), so a
# resume under another world size with the same flags delivers exactly the batches not yet
# consumed. (Issue 14: the group followed the world size; 4 ranks then 2 lost and replayed
# samples.) The resume state records the group; --state resumes from it and refuses a plan
# with another group.
# ---------------------------------------------------------------------------------------------
for bal in "--balance" "--balance-group 6"; do
  read -ra balance <<<"$bal"
  if expect_ok "plan $bal world $world" plan "${common[@]}" --world $world --rank all \
    "${balance[@]}" --out "$tmp/bal.jsonl"; then
    cp "$tmp/stdout" "$tmp/bal.summary"
    json_check "$bal covers every assigned sample" all "$cfg" "$tmp/bal.jsonl" "$tmp/bal.summary" \
      "$tmp/assign.csv" $world
  fi
  for w2 in 2 3 8; do
    for k in 10 17; do
      if expect_ok "$bal: resume world $world step $k -> world $w2" plan "${common[@]}" \
        "${balance[@]}" --world $w2 --rank all --consumed-batches $((k * world)) \
        --out "$tmp/rest.jsonl"; then
        cp "$tmp/stdout" "$tmp/rest.summary"
        json_check "$bal: resume world $world after $k steps with world $w2" resume "$cfg" \
          "$tmp/bal.jsonl" $k $world "$tmp/rest.jsonl" "$tmp/rest.summary" "$tmp/assign.csv"
      fi
    done
  done
done
grep -qF "balance=6" "$tmp/bal.summary" && pass ||
  fail "--balance-group 6: the resume state does not record the group: $(cat "$tmp/bal.summary")"
# A state line without fingerprint (an older one): loads, with a warning that it cannot be
# checked (tests/cli/plan_safety.sh checks the fingerprint).
state="vbucket-plan seed=$seed epoch=0 consumed=40 balance=960"
if expect_ok_warned "plan --balance --state" plan "${common[@]}" --balance --world 3 --rank all \
  --state "$state" --out "$tmp/state.jsonl"; then
  grep -qF "balance=960" "$tmp/stdout" && pass ||
    fail "--balance: the resume state does not record the group: $(cat "$tmp/stdout")"
fi
expect_ok "plan --balance --consumed-batches 40" plan "${common[@]}" --balance --world 3 \
  --rank all --consumed-batches 40 --out "$tmp/consumed.jsonl"
cmp -s "$tmp/state.jsonl" "$tmp/consumed.jsonl" && pass ||
  fail "--state consumed=40 differs from --consumed-batches 40"
state_out=(--world 2 --rank 0 --out "$tmp/err-state.jsonl")
expect_error "--state of another balance group" 1 "balance group 960" plan "${common[@]}" \
  --balance-group 2 --state "$state" "${state_out[@]}"
expect_error "--state of a balanced plan, no --balance" 1 "balance group 960" plan \
  "${common[@]}" --state "$state" "${state_out[@]}"
expect_error "--state of another seed" 1 "not for this plan" plan "${common[@]}" --balance \
  --state "vbucket-plan seed=8 epoch=0 consumed=40 balance=960" "${state_out[@]}"
expect_error "malformed --state" 2 "--state" plan "${common[@]}" --state "vbucket-plan seed=x" \
  "${state_out[@]}"
expect_error "--state with --consumed-batches" 2 "--state" plan "${common[@]}" --state "$state" \
  --consumed-batches 3 "${state_out[@]}"
[[ -e $tmp/err-state.jsonl ]] && fail "a refused --state left its output file" || pass

# ---------------------------------------------------------------------------------------------
# --policy downgrade moves videos among video buckets only (issue 14: six 40-frame clips, a
# 33-frame bucket of 4 and an image bucket of 2 put two videos into a thw [1,256,256] batch).
# ---------------------------------------------------------------------------------------------
printf '{"256px": {"1": [1.0, 2], "33": [1.0, 4]}}\n' >"$tmp/kinds.json"
{
  echo "path,num_frames,height,width,fps"
  for i in 0 1 2 3 4 5; do echo "v$i.mp4,40,256,256,15"; done
  for i in 6 7 8; do echo "img$i.jpg,1,256,256,"; done
} >"$tmp/kinds.csv"
if expect_ok "plan --policy downgrade, videos and images" plan --config "$tmp/kinds.json" \
  --meta "$tmp/kinds.csv" --seed 1 --epoch 0 --world 1 --rank all --policy downgrade \
  --pad-warn 1 --out "$tmp/kinds.jsonl"; then
  json_check "downgrade keeps videos out of the image bucket" kinds "$tmp/kinds.json" \
    "$tmp/kinds.jsonl" "$tmp/kinds.csv"
fi

# ---------------------------------------------------------------------------------------------
# --drop-last (policy drop): no sample twice. --policy downgrade: nothing lost.
# ---------------------------------------------------------------------------------------------
if expect_ok "plan --drop-last" plan "${common[@]}" --world 5 --rank all --drop-last \
  --out "$tmp/drop.jsonl"; then
  cp "$tmp/stdout" "$tmp/drop.summary"
  json_check "--drop-last repeats no sample" no-repeat "$cfg" "$tmp/drop.jsonl" "$tmp/drop.summary"
fi
if expect_ok "plan --policy downgrade" plan "${common[@]}" --world 5 --rank all \
  --policy downgrade --out "$tmp/down.jsonl"; then
  cp "$tmp/stdout" "$tmp/down.summary"
  json_check "--policy downgrade covers every assigned sample" downgrade "$cfg" "$tmp/down.jsonl" \
    "$tmp/down.summary" "$tmp/assign.csv"
fi
if expect_ok "plan --balance" plan "${common[@]}" --world $world --rank all --balance \
  --out "$tmp/balance.jsonl"; then
  cp "$tmp/stdout" "$tmp/balance.summary"
  json_check "--balance covers every assigned sample" all "$cfg" "$tmp/balance.jsonl" \
    "$tmp/balance.summary" "$tmp/assign.csv" $world
fi

# Determinism: the same flags give the same bytes.
expect_ok "plan again" plan "${common[@]}" --world $world --rank all --out "$tmp/all-again.jsonl" \
  --threads 1 --quiet
cmp -s "$tmp/all.jsonl" "$tmp/all-again.jsonl" && pass || fail "plan is not deterministic"

# --rng numpy (Open-Sora's draws) and the v1.2 rule work too.
expect_ok "plan --rng numpy --rule opensora-v1.2" plan --config "$data/config_opensora_v12.json" \
  --meta "$meta" --rule opensora-v1.2 --rng numpy --seed 42 --epoch 1 --world 2 --rank 1 \
  --out "$tmp/v12.jsonl" --quiet --pad-warn 1

# ---------------------------------------------------------------------------------------------
# stats
# ---------------------------------------------------------------------------------------------
if expect_ok "stats" stats --config "$cfg" --meta "$meta" --world 8 --seed 3 --epoch 2 \
  --pad-warn 1; then
  for text in "By (resolution, frames)" "By aspect ratio" "Images and videos" "#training batch" \
    "#training sample" "#non-empty bucket" "step balance" "world:"; do
    grep -qF -- "$text" "$tmp/stdout" && pass || fail "stats output lacks '$text'"
  done
fi
expect_ok "stats --policy downgrade" stats --config "$cfg" --meta "$meta" --policy downgrade \
  --pad-warn 1
grep -qF "moved in" "$tmp/stdout" && pass || fail "stats --policy downgrade shows no moves"
expect_ok "plan --help" plan --help
expect_ok "stats --help" stats --help

# ---------------------------------------------------------------------------------------------
# The pad warning: one stderr line when pads are more than --pad-warn (default 0.25) of the
# batch slots, naming the worst buckets and what --policy downgrade would leave. The share is
# measured from plan's own output (world 1: every repeated slot is a pad).
# ---------------------------------------------------------------------------------------------
# expect_warning NAME ARGS...: success and exactly one stderr line, the pad warning.
expect_warning() {
  local name=$1
  shift
  run "$@"
  if [[ $rc -ne 0 ]]; then
    fail "$name: exit code $rc (stderr: $(cat "$tmp/stderr"))"
  elif [[ $(wc -l <"$tmp/stderr") -ne 1 ]]; then
    fail "$name: expected one warning line on stderr, got: $(cat "$tmp/stderr")"
  elif ! grep -q '^vbucket [a-z]*: warning: .* of the batch slots are pads' "$tmp/stderr"; then
    fail "$name: not the pad warning: $(cat "$tmp/stderr")"
  else
    pass
    return 0
  fi
  return 1
}
pads=(--config "$cfg" --meta "$meta" --seed "$seed" --epoch 0)
if expect_warning "plan pad warning" plan "${pads[@]}" --world 1 --rank all \
  --out "$tmp/pads.jsonl"; then
  cp "$tmp/stderr" "$tmp/pads.warning"
  share=$(python3 "$tmp/check.py" pad-share "$cfg" "$tmp/pads.jsonl")
  python3 -c "import sys; sys.exit(0 if $share > 0.25 else 1)" && pass ||
    fail "the test data has only $share pads: the default threshold cannot be checked"
  percent=$(python3 -c "print(f'{100 * $share:.1f}%')")
  grep -qF "warning: $percent of the batch slots are pads" "$tmp/pads.warning" && pass ||
    fail "pad warning: expected $percent of pads: $(cat "$tmp/pads.warning")"
  # The worst buckets here are 256px images (a few samples, batch size 45); downgrade cannot
  # move them (no smaller image bucket) but fills the videos' last batches.
  grep -qF "most in 256px frames 1 ratio" "$tmp/pads.warning" && pass ||
    fail "pad warning does not name the 256px image buckets: $(cat "$tmp/pads.warning")"
  grep -qF -- "--policy downgrade would leave" "$tmp/pads.warning" && pass ||
    fail "pad warning does not suggest --policy downgrade: $(cat "$tmp/pads.warning")"
  below=$(python3 -c "print(round($share - 0.01, 4))")
  above=$(python3 -c "print(round($share + 0.01, 4))")
  if expect_warning "stats --pad-warn below the share" stats "${pads[@]}" --pad-warn "$below"; then
    # The same line as plan's but for the command name and the threshold.
    sed -e 's/^vbucket stats:/vbucket plan:/' -e "s/--pad-warn $below)/--pad-warn 0.25)/" \
      "$tmp/stderr" >"$tmp/stats.warning"
    cmp -s "$tmp/stats.warning" "$tmp/pads.warning" && pass ||
      fail "stats and plan warn differently: $(cat "$tmp/stderr")"
  fi
  expect_ok "stats --pad-warn above the share" stats "${pads[@]}" --pad-warn "$above"
  expect_ok "plan --pad-warn above the share" plan "${pads[@]}" --world 1 --rank all \
    --pad-warn "$above" --out "$tmp/pads.jsonl"
fi
expect_ok "stats --pad-warn 1" stats "${pads[@]}" --pad-warn 1
expect_ok "stats --policy drop: no pads" stats "${pads[@]}" --policy drop
if expect_warning "stats --policy downgrade" stats "${pads[@]}" --policy downgrade \
  --pad-warn 0.05; then
  grep -qF -- "--policy downgrade would" "$tmp/stderr" &&
    fail "--policy downgrade: the warning suggests downgrade: $(cat "$tmp/stderr")" || pass
fi
# Open-Sora's 360p example config: most slots are pads of 141-image batches.
if expect_warning "stats 360p example" stats --config "$data/config_360p_example.json" \
  --meta "$meta"; then
  grep -qF "most in 360p frames 1 ratio" "$tmp/stderr" && pass ||
    fail "360p: the warning does not name the image buckets: $(cat "$tmp/stderr")"
fi
expect_error "--pad-warn above 1" 2 "--pad-warn" stats "${pads[@]}" --pad-warn 1.5
expect_error "--pad-warn not a number" 2 "--pad-warn" plan "${pads[@]}" --world 1 --rank 0 \
  --pad-warn lots --out "$tmp/err.jsonl"

# ---------------------------------------------------------------------------------------------
# Errors: exit code (1 bad data, 2 bad usage) and exactly one line naming the problem.
# ---------------------------------------------------------------------------------------------
out=(--out "$tmp/err.jsonl")
expect_error "rank not below world" 2 "--rank 4" plan "${common[@]}" --world 4 --rank 4 "${out[@]}"
expect_error "world 0" 2 "--world" plan "${common[@]}" --world 0 --rank 0 "${out[@]}"
expect_error "bad rank" 2 "--rank" plan "${common[@]}" --world 2 --rank first "${out[@]}"
expect_error "negative seed" 2 "--seed" plan --config "$cfg" --meta "$meta" --seed -1 --epoch 0 \
  --world 2 --rank 0 "${out[@]}"
expect_error "bad policy" 2 "--policy" plan "${common[@]}" --world 2 --rank 0 --policy fill \
  "${out[@]}"
expect_error "bad rng" 2 "--rng" plan "${common[@]}" --world 2 --rank 0 --rng mt "${out[@]}"
expect_error "bad rule" 2 "--rule" plan "${common[@]}" --world 2 --rank 0 --rule v3 "${out[@]}"
expect_error "both resume flags" 2 "--consumed-batches" plan "${common[@]}" --world 2 --rank 0 \
  --start-step 1 --consumed-batches 2 "${out[@]}"
expect_error "bad start step" 2 "--start-step" plan "${common[@]}" --world 2 --rank 0 \
  --start-step -3 "${out[@]}"
expect_error "missing --out" 2 "--out" plan "${common[@]}" --world 2 --rank 0
expect_error "missing --world" 2 "--world" plan "${common[@]}" --rank 0 "${out[@]}"
expect_error "unknown flag" 2 "--worlds" plan "${common[@]}" --worlds 2 --rank 0 "${out[@]}"
expect_error "missing config file" 1 "$tmp/nope.json" plan --config "$tmp/nope.json" \
  --meta "$meta" --seed 1 --epoch 0 --world 2 --rank 0 "${out[@]}"
printf '{"360p": {"102": [0.5, -4]}}\n' >"$tmp/bad-bs.json"
expect_error "negative batch size" 1 "batch size" plan --config "$tmp/bad-bs.json" --meta "$meta" \
  --seed 1 --epoch 0 --world 2 --rank 0 "${out[@]}"
printf '{"360p": {"102": [1.5, 4]}}\n' >"$tmp/bad-p.json"
expect_error "probability above 1" 1 "bad-p.json" plan --config "$tmp/bad-p.json" --meta "$meta" \
  --seed 1 --epoch 0 --world 2 --rank 0 "${out[@]}"
printf 'num_frames,height,width,fps\n10,20\n' >"$tmp/bad.csv"
expect_error "malformed metadata" 1 "bad.csv" plan --config "$cfg" --meta "$tmp/bad.csv" --seed 1 \
  --epoch 0 --world 2 --rank 0 "${out[@]}"
expect_error "unwritable output" 1 "$tmp/no/such/dir/out.jsonl" plan "${common[@]}" --world 2 \
  --rank 0 --out "$tmp/no/such/dir/out.jsonl"
expect_error "stats world 0" 2 "--world" stats --config "$cfg" --meta "$meta" --world 0
expect_error "stats missing meta" 2 "--meta" stats --config "$cfg"
expect_error "stats frame-interval with v2" 2 "--frame-interval" stats --config "$cfg" \
  --meta "$meta" --frame-interval 2
[[ -e $tmp/err.jsonl ]] && fail "a failed run left its output file" || pass

finish
