#!/usr/bin/env bash
# CLI test of `vbucket cache-plan` (issue 32): the manifest's rows (probabilities derived by hand
# for a few samples, windows inside the clip, unique files, the path column copied), coverage and
# budget selection, the printed table, and the error contract.
#
#   bash tests/cli/cache_plan.sh <path to vbucket> <absolute path of tests/data>
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" cache_plan "$@"
require_python3

cfg="$data/config_opensora_v2.json"
meta="$tmp/meta.csv"
# 0: a 1080p image: 1024px keeps 0.5, 768px 0.5 of the rest, 256px the rest (0.5/0.25/0.25).
# 1: a 1080p video of 20 frames at 16 fps: every 768px key is longer; 256px's 5 keeps (p 1).
# 2: a 1080p video of 400 frames at 16 fps (768px 129 stays 0.4 and keeps 0.2: 0.08).
# 3: 16x16: fits no resolution (no bucket).
cat >"$meta" <<'EOF'
path,num_frames,height,width,fps
"a, image.jpg",1,1080,1920,
b.mp4,20,1080,1920,16
c.mp4,400,1080,1920,16
d.mp4,100,16,16,30
EOF

if expect_ok "cache-plan --help" cache-plan --help; then
  grep -q -- "--coverage" "$tmp/stdout" || fail "cache-plan --help: no --coverage"
fi
expect_ok "help lists cache-plan" --help
grep -q "cache-plan" "$tmp/stdout" || fail "vbucket --help does not list cache-plan"
expect_error "missing --meta" 2 "--meta" cache-plan --config "$cfg"
expect_error "bad rule" 2 "--rule" cache-plan --config "$cfg" --meta "$meta" --rule v3
expect_error "coverage 0" 2 "--coverage" cache-plan --config "$cfg" --meta "$meta" --coverage 0
expect_error "coverage 1.5" 2 "--coverage" cache-plan --config "$cfg" --meta "$meta" --coverage 1.5
expect_error "bad seconds" 2 "--seconds" cache-plan --config "$cfg" --meta "$meta" --seconds 1
expect_error "bad encoder" 2 "--encoder" cache-plan --config "$cfg" --meta "$meta" --encoder a/b
expect_error "bad fallback" 2 "--fallback" cache-plan --config "$cfg" --meta "$meta" --fallback x
expect_error "fps-max with v1.2" 2 "--fps-max" cache-plan --config "$cfg" --meta "$meta" \
  --rule opensora-v1.2 --fps-max 8
expect_error "missing config file" 1 "nope.json" cache-plan --config "$tmp/nope.json" --meta "$meta"
printf 'num_frames,height\n1,2\n' >"$tmp/bad.csv"
expect_error "metadata without width" 1 "bad.csv" cache-plan --config "$cfg" --meta "$tmp/bad.csv"
printf 'num_frames,height,width,fps\n0,720,1280,30\n' >"$tmp/zero.csv"
expect_error "metadata with 0 frames" 1 "row 1" cache-plan --config "$cfg" --meta "$tmp/zero.csv"

cat >"$tmp/check.py" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
mode = sys.argv[2]
by = {}
for r in rows:
    by.setdefault(int(r["sample"]), []).append(r)
frames = {0: 1, 1: 20, 2: 400, 3: 100}
def probs(s):
    return sorted(float(r["probability"]) for r in by.get(s, []))
files = [r["file"] for r in rows]
assert len(set(files)) == len(files), "duplicate files"
for r in rows:
    s, T, start, interval = int(r["sample"]), int(r["T"]), int(r["start"]), int(r["interval"])
    assert 0 <= start and start + (T - 1) * interval < frames[s], f"window outside the clip: {r}"
    assert r["file"] == f"latent/{s}_{T}x{r['H']}x{r['W']}_s{start}_i{interval}.npy", r["file"]
    assert int(r["bytes"]) == 16 * 2 * (1 + (T - 1) // 4) * -(-int(r["H"]) // 8) * -(-int(r["W"]) // 8), r
if mode == "all":
    assert [r["path"] for r in by[0]][0] == "a, image.jpg", by[0]
    assert probs(0) == [0.25, 0.25, 0.5], probs(0)
    assert probs(1) == [1.0], probs(1)
    assert [int(r["T"]) for r in by[1]] == [5], by[1]
    assert abs(sum(probs(2)) - (1 - 0.755 * 0.425)) < 1e-9, sum(probs(2))
    assert abs(max(probs(2)) - 0.755 * 0.35) < 1e-9, probs(2)
    assert 3 not in by, "a sample without a bucket has entries"
elif mode == "half":
    # bucketed mass 1 + 1 + (1 - 0.755 * 0.425) = 2.679, half 1.34: the largest probabilities
    # 1.0 (sample 1) and 0.5 (sample 0's 1024px) reach it, one alone does not: two entries.
    assert len(rows) == 2, len(rows)
    assert probs(1) == [1.0] and probs(0) == [0.5], rows
elif mode == "stratified":
    assert sorted(by) == [0, 1, 2] and all(len(v) == 1 for v in by.values()), by
elif mode.startswith("budget"):
    budget = int(mode[len("budget"):])
    assert sum(int(r["bytes"]) for r in rows) <= budget
print("ok")
EOF

if expect_ok "coverage 1" cache-plan --config "$cfg" --meta "$meta" --coverage 1 --out "$tmp/all.csv"; then
  json_check "coverage 1 manifest" "$tmp/all.csv" all
  grep -q "^chosen " "$tmp/stdout" || fail "no 'chosen' row in the table"
  grep -q "^every shape " "$tmp/stdout" || fail "no 'every shape' row in the table"
  grep -q "samples:            4 (4 bucketable)" "$tmp/stdout" || fail "samples line: $(head -1 "$tmp/stdout")"
fi
if expect_ok "coverage 0.5" cache-plan --config "$cfg" --meta "$meta" --coverage 0.5 --out "$tmp/half.csv"; then
  json_check "coverage 0.5 manifest" "$tmp/half.csv" half
fi
if expect_ok "budget" cache-plan --config "$cfg" --meta "$meta" --budget-bytes 3000000 --out "$tmp/b.csv" \
  --seconds 0.5,1e-6 --epochs 10; then
  json_check "budget manifest" "$tmp/b.csv" budget3000000
  grep -q "encoder-s" "$tmp/stdout" || fail "--seconds: no encoder-s column"
fi
if expect_ok "stratified" cache-plan --config "$cfg" --meta "$meta" --select stratified \
  --out "$tmp/strat.csv"; then
  json_check "stratified manifest" "$tmp/strat.csv" stratified
  grep -q "stratified" "$tmp/stdout" || fail "--select stratified: not named in the summary"
fi
expect_error "stratified with coverage" 2 "--select" cache-plan --config "$cfg" --meta "$meta" \
  --select stratified --coverage 0.5
expect_error "bad select" 2 "--select" cache-plan --config "$cfg" --meta "$meta" --select most
# The same flags give the same manifest; another seed moves the windows of the long video.
run cache-plan --config "$cfg" --meta "$meta" --coverage 1 --out "$tmp/again.csv"
cmp -s "$tmp/all.csv" "$tmp/again.csv" && pass || fail "cache-plan is not deterministic"
run cache-plan --config "$cfg" --meta "$meta" --coverage 1 --seed 9 --out "$tmp/seed9.csv"
cmp -s "$tmp/all.csv" "$tmp/seed9.csv" && fail "--seed does not change the windows" || pass
# opensora-v1.2 runs on its config.
expect_ok "opensora-v1.2" cache-plan --config "$data/config_opensora_v12.json" --meta "$meta" \
  --rule opensora-v1.2 --frame-interval 2 --coverage 0.9

# plan --cache (issue 32, planning over the cache): every planned (sample, shape) is cached; the
# same plan without the cache holds an uncached one (sample 2), so the check can fail.
cat >"$tmp/cached.py" <<'EOF'
import csv, json, sys
cached = {(int(r["sample"]), (int(r["T"]), int(r["H"]), int(r["W"])))
          for r in csv.DictReader(open(sys.argv[1]))}
got = {(i, tuple(b["thw"])) for b in map(json.loads, open(sys.argv[2])) for i in b["indices"]}
assert got, "no batches"
outside = got - cached
assert (not outside) == (sys.argv[3] == "inside"), sorted(outside)
EOF
for mode in inside outside; do
  extra=()
  [[ $mode == inside ]] && extra=(--cache "$tmp/half.csv")
  if expect_ok "plan --cache ($mode)" plan --config "$cfg" --meta "$meta" --world 1 --rank 0 \
    --seed 5 --epoch 0 --out "$tmp/cached_$mode.jsonl" --quiet --pad-warn 1 "${extra[@]}"; then
    python3 "$tmp/cached.py" "$tmp/half.csv" "$tmp/cached_$mode.jsonl" "$mode" && pass ||
      fail "plan --cache: batches against the manifest ($mode)"
  fi
done
printf 'sample,T,H,W,bucket\n0,1,1,1,0\n' >"$tmp/badman.csv"
expect_error "plan --cache of another config" 1 "badman.csv" plan --config "$cfg" --meta "$meta" \
  --world 1 --rank 0 --seed 5 --epoch 0 --out "$tmp/x.jsonl" --cache "$tmp/badman.csv"

# A manifest's samples are rows of the metadata (4 rows here): sample 5000 names the file and
# the row; a header without entries is an error, not an empty epoch; nothing is written.
head -n 1 "$tmp/half.csv" >"$tmp/headonly.csv"
python3 - "$tmp/half.csv" "$tmp/beyond.csv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
rows[-1]["sample"] = "5000"
with open(sys.argv[2], "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
print(len(rows) + 1, file=open(sys.argv[2] + ".row", "w"))
EOF
expect_error_absent="$tmp/x.jsonl"
expect_error "plan --cache: a sample beyond the metadata" 1 \
  "beyond.csv: row $(cat "$tmp/beyond.csv.row"), column \"sample\": sample 5000 is not a row of the metadata (4 rows)" \
  plan --config "$cfg" --meta "$meta" --world 1 --rank 0 --seed 5 --epoch 0 --out "$tmp/x.jsonl" \
  --cache "$tmp/beyond.csv"
expect_error "plan --cache: a header-only manifest" 1 \
  "headonly.csv: the cache manifest has a header but no entries" \
  plan --config "$cfg" --meta "$meta" --world 1 --rank 0 --seed 5 --epoch 0 --out "$tmp/x.jsonl" \
  --cache "$tmp/headonly.csv"
unset expect_error_absent
expect_error "stats --cache: a sample beyond the metadata" 1 "sample 5000 is not a row" \
  stats --config "$cfg" --meta "$meta" --world 1 --cache "$tmp/beyond.csv"

finish
