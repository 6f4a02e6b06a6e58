#!/usr/bin/env bash
# CLI test of `vbucket assign`: output format, Open-Sora golden reproduction with --rng numpy,
# and the error contract (non-zero exit, exactly one line on stderr naming the file/key/row).
#
#   bash tests/cli/assign.sh <path to vbucket> <absolute path of tests/data>
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" assign "$@"

# ---------------------------------------------------------------------------------------------
# Inputs.
# ---------------------------------------------------------------------------------------------
cfg360="$data/config_360p_example.json"
meta="$tmp/meta.csv"
cat >"$meta" <<'EOF'
path,num_frames,height,width,fps
a.mp4,300,1080,1920,30
"b, with comma.mp4",1,720,1280,
"c ""quoted"".mp4",500,1920,1080,24
d.jpg,1,100,100,nan
EOF
common=(--config "$cfg360" --rule opensora-v2 --rng numpy --seed 42)

# ---------------------------------------------------------------------------------------------
# Help and usage.
# ---------------------------------------------------------------------------------------------
for help in "--help" "-h" "help"; do
  if expect_ok "vbucket $help" "$help"; then
    grep -q "assign" "$tmp/stdout" || fail "vbucket $help: no 'assign' in the usage"
  fi
done
if expect_ok "assign --help" assign --help; then
  grep -q -- "--config" "$tmp/stdout" || fail "assign --help: no --config in the usage"
fi
expect_ok "help assign" help assign
expect_error "no command" 2 "no command" 
expect_error "unknown command" 2 '"frobnicate"' frobnicate
expect_error "unknown flag" 2 "--bogus" assign "${common[@]}" --meta "$meta" --out "$tmp/o.csv" --bogus 1
expect_error "missing --out" 2 "--out" assign "${common[@]}" --meta "$meta"
expect_error "missing all" 2 "--config" assign
expect_error "missing value" 2 "--out" assign "${common[@]}" --meta "$meta" --out
expect_error "flag twice" 2 "--seed" assign "${common[@]}" --seed 1 --meta "$meta" --out "$tmp/o.csv"
expect_error "positional" 2 "stray" assign "${common[@]}" --meta "$meta" --out "$tmp/o.csv" stray
expect_error "switch value" 2 "--quiet" assign "${common[@]}" --meta "$meta" --out "$tmp/o.csv" --quiet=yes
expect_error "bad rule" 2 "opensora-v3" assign --config "$cfg360" --rule opensora-v3 --rng numpy --seed 1 --meta "$meta" --out "$tmp/o.csv"
expect_error "bad rng" 2 '"mt19937"' assign --config "$cfg360" --rule opensora-v2 --rng mt19937 --seed 1 --meta "$meta" --out "$tmp/o.csv"
for seed in -1 abc 1.5 "" " 7" +3; do
  expect_error "bad seed '$seed'" 2 "--seed" assign --config "$cfg360" --rule opensora-v2 --rng numpy --seed "$seed" --meta "$meta" --out "$tmp/o.csv"
done
expect_error "fast seed > 64 bits" 2 "64 bits" assign --config "$cfg360" --rule opensora-v2 --rng fast --seed 18446744073709551616 --meta "$meta" --out "$tmp/o.csv"
expect_ok "fast seed = 2^64-1" assign --config "$cfg360" --rule opensora-v2 --rng fast --seed 18446744073709551615 --meta "$meta" --out "$tmp/o.csv" --quiet
expect_ok "numpy seed 2^100" assign --config "$cfg360" --rule opensora-v2 --rng numpy --seed 1267650600228229401496703205376 --meta "$meta" --out "$tmp/o.csv" --quiet
expect_error "fps-max 0" 2 "--fps-max" assign "${common[@]}" --meta "$meta" --out "$tmp/o.csv" --fps-max 0
expect_error "fps-max nan" 2 "--fps-max" assign "${common[@]}" --meta "$meta" --out "$tmp/o.csv" --fps-max nan
expect_error "fps-max with v1.2" 2 "--fps-max" assign --config "$data/config_opensora_v12.json" --rule opensora-v1.2 --rng numpy --seed 1 --meta "$meta" --out "$tmp/o.csv" --fps-max 8
expect_error "frame-interval 0" 2 "--frame-interval" assign --config "$data/config_opensora_v12.json" --rule opensora-v1.2 --rng numpy --seed 1 --meta "$meta" --out "$tmp/o.csv" --frame-interval 0
expect_error "frame-interval with v2" 2 "--frame-interval" assign "${common[@]}" --meta "$meta" --out "$tmp/o.csv" --frame-interval 2
expect_error "threads -1" 2 "--threads" assign "${common[@]}" --meta "$meta" --out "$tmp/o.csv" --threads -1

# ---------------------------------------------------------------------------------------------
# Output format.
# ---------------------------------------------------------------------------------------------
out="$tmp/out.csv"
if expect_ok "assign small" assign "${common[@]}" --meta "$meta" --out "$out"; then
  [[ $(head -n1 "$out") == "index,resolution,frames,ratio,T,H,W" ]] || fail "OUT header: $(head -n1 "$out")"
  [[ $(wc -l <"$out") -eq 5 ]] || fail "OUT has $(wc -l <"$out") lines, expected 5"
  awk -F, 'NR > 1 {
      if (NF != 7) { print "row " NR ": " NF " fields"; bad = 1 }
      if ($1 != NR - 2) { print "row " NR ": index " $1; bad = 1 }
      empty = ($2 == "" && $3 == "" && $4 == "" && $5 == "" && $6 == "" && $7 == "")
      full = ($2 != "" && $3 ~ /^[0-9]+$/ && $4 != "" && $5 == $3 && $6 ~ /^[0-9]+$/ && $7 ~ /^[0-9]+$/)
      if (!empty && !full) { print "row " NR ": malformed: " $0; bad = 1 }
    } END { exit bad }' "$out" || fail "OUT rows malformed"
  grep -q "samples" "$tmp/stdout" || fail "no totals in the bucket table: $(cat "$tmp/stdout")"
  grep -q "360p" "$tmp/stdout" || fail "no per-resolution total in the table: $(cat "$tmp/stdout")"
fi
expect_ok "assign --quiet" assign "${common[@]}" --meta "$meta" --out "$out" --quiet &&
  { [[ -s $tmp/stdout ]] && fail "--quiet printed: $(cat "$tmp/stdout")" || pass; }
expect_ok "flag=value form" assign --config="$cfg360" --rule=opensora-v2 --rng=numpy --seed=42 --meta="$meta" --out="$tmp/eq.csv" --quiet &&
  { cmp -s "$out" "$tmp/eq.csv" && pass || fail "--flag=value gives another result"; }

# A header-only META gives a header-only OUT.
printf 'num_frames,height,width,fps\n' >"$tmp/header_only.csv"
if expect_ok "header-only META" assign "${common[@]}" --meta "$tmp/header_only.csv" --out "$tmp/header_only_out.csv"; then
  [[ $(cat "$tmp/header_only_out.csv") == "index,resolution,frames,ratio,T,H,W" ]] ||
    fail "header-only OUT: $(cat "$tmp/header_only_out.csv")"
fi

# CRLF, BOM, no final newline, reordered and extra columns: same buckets as the plain file.
printf '\xef\xbb\xbffps,width,extra,height,num_frames\r\n30,1920,x,1080,300\r\n,1280,"y\r\nz",720,1\r\n24,1080,,1920,500\r\nnan,100,,100,1' >"$tmp/crlf.csv"
expect_ok "CRLF/BOM META" assign "${common[@]}" --meta "$tmp/crlf.csv" --out "$tmp/crlf_out.csv" --quiet &&
  { cmp -s "$out" "$tmp/crlf_out.csv" && pass || fail "CRLF/BOM META gives another result"; }

# ---------------------------------------------------------------------------------------------
# Golden files: --rng numpy reproduces Open-Sora row for row.
# ---------------------------------------------------------------------------------------------
golden_case() {
  local name=$1 golden=$2 rule=$3
  local seed
  seed=$(python3 - "$golden" "$tmp/$name.meta.csv" "$tmp/$name.cfg.json" "$tmp/$name.expected.csv" <<'EOF'
import json, sys
golden, meta, cfg, expected = sys.argv[1:5]
with open(golden) as f:
    head = json.loads(f.readline())
    rows = [json.loads(line) for line in f if line.strip()]
with open(cfg, "w") as f:
    json.dump(head["config"], f)
with open(meta, "w") as m, open(expected, "w") as e:
    # Paths with commas and quotes exercise the CSV quoting on the way.
    m.write("path,num_frames,height,width,fps\n")
    e.write("index,resolution,frames,ratio,T,H,W\n")
    for i, r in enumerate(rows):
        assert r["id"] == i, (i, r["id"])
        fps = "" if r["fps"] is None else repr(r["fps"])
        m.write('"clips/%d, take ""%d"".mp4",%d,%d,%d,%s\n' % (i, i, r["T"], r["H"], r["W"], fps))
        if r["bucket"] is None:
            e.write("%d,,,,,,\n" % i)
        else:
            res, frames, ratio = r["bucket"]
            t, h, w = r["thw"]
            e.write("%d,%s,%d,%s,%d,%d,%d\n" % (i, res, frames, ratio, t, h, w))
print(head["seed"])
EOF
  ) || {
    fail "$name: could not convert $golden"
    return
  }
  for threads in 1 3; do
    if expect_ok "$name golden (threads $threads)" assign --config "$tmp/$name.cfg.json" \
      --meta "$tmp/$name.meta.csv" --rule "$rule" --rng numpy --seed "$seed" \
      --threads "$threads" --quiet --out "$tmp/$name.out.csv"; then
      if cmp -s "$tmp/$name.out.csv" "$tmp/$name.expected.csv"; then
        pass
      else
        fail "$name: OUT differs from the golden file:"$'\n'"$(diff "$tmp/$name.expected.csv" "$tmp/$name.out.csv" | head -n 10)"
      fi
    fi
  done
}
if command -v python3 >/dev/null 2>&1; then
  golden_case v2 "$data/opensora_v2_golden.jsonl" opensora-v2
  golden_case v12 "$data/opensora_v12_golden.jsonl" opensora-v1.2
else
  fail "python3 is needed to convert the golden files"
fi

# The fast source: runs, and the result does not depend on the thread count (40000 rows span
# several worker chunks).
awk 'BEGIN { print "num_frames,height,width,fps"; for (i = 0; i < 40000; i++)
  printf "%d,%d,%d,%s\n", 1 + (i * 7919) % 1200, 360 + (i * 31) % 1800, 360 + (i * 17) % 1800, (i % 5 ? "30" : "") }' \
  >"$tmp/many.csv"
expect_ok "fast threads 1" assign "${common[@]/numpy/fast}" --meta "$tmp/many.csv" --out "$tmp/fast1.csv" --threads 1 --quiet
expect_ok "fast threads 4" assign "${common[@]/numpy/fast}" --meta "$tmp/many.csv" --out "$tmp/fast4.csv" --threads 4 --quiet
cmp -s "$tmp/fast1.csv" "$tmp/fast4.csv" && pass || fail "--rng fast depends on --threads"
[[ $(wc -l <"$tmp/fast1.csv") -eq 40001 ]] && pass || fail "fast OUT has $(wc -l <"$tmp/fast1.csv") lines"

# ---------------------------------------------------------------------------------------------
# Bad config (exit 1; the message names the file and the key).
# ---------------------------------------------------------------------------------------------
bad_config() {
  local name=$1 pattern=$2 json=$3
  printf '%s' "$json" >"$tmp/$name.json"
  expect_error "config $name" 1 "$pattern" assign --config "$tmp/$name.json" --rule opensora-v2 \
    --rng numpy --seed 1 --meta "$meta" --out "$tmp/o.csv"
  grep -qF "$name.json" "$tmp/stderr" || fail "config $name: file not named: $(cat "$tmp/stderr")"
}
bad_config prob_high '"51"' '{"360p": {"51": [1.5, 8]}}'
bad_config prob_negative '"51"' '{"360p": {"51": [-0.1, 8]}}'
bad_config prob_pair_high '"102"' '{"360p": {"102": [[0.5, 2.0], 4]}}'
bad_config batch_zero '"51"' '{"360p": {"51": [0.5, 0]}}'
bad_config batch_negative '"51"' '{"360p": {"51": [0.5, -3]}}'
bad_config batch_fraction '"51"' '{"360p": {"51": [0.5, 2.5]}}'
bad_config unknown_resolution '"999q"' '{"999q": {"51": [0.5, 8]}}'
bad_config malformed 'malformed' '{"360p": {"51": [0.5, 8]'
bad_config duplicate_key '"51"' '{"360p": {"51": [0.5, 8], "51": [0.5, 4]}}'
bad_config frames_key '"abc"' '{"360p": {"abc": [0.5, 8]}}'
bad_config empty_file 'malformed' ''
expect_error "config missing file" 1 "$tmp/nope.json" assign --config "$tmp/nope.json" --rule opensora-v2 --rng numpy --seed 1 --meta "$meta" --out "$tmp/o.csv"
expect_error "config is a directory" 1 "$tmp" assign --config "$tmp" --rule opensora-v2 --rng numpy --seed 1 --meta "$meta" --out "$tmp/o.csv"
# The v1.2 tables do not know the 2.0 names.
expect_error "v2 name under v1.2" 1 '"256px"' assign --config "$data/config_opensora_v2.json" --rule opensora-v1.2 --rng numpy --seed 1 --meta "$meta" --out "$tmp/o.csv"

# ---------------------------------------------------------------------------------------------
# Bad metadata (exit 1; the message names the file, the row, its line and the column).
# ---------------------------------------------------------------------------------------------
bad_meta() {
  local name=$1 pattern=$2 text=$3
  printf "$text" >"$tmp/$name.csv"
  expect_error "meta $name" 1 "$pattern" assign "${common[@]}" --meta "$tmp/$name.csv" --out "$tmp/o.csv"
  grep -qF "$name.csv" "$tmp/stderr" || fail "meta $name: file not named: $(cat "$tmp/stderr")"
}
hdr='path,num_frames,height,width,fps\n'
bad_meta missing_column 'fps' 'path,num_frames,height,width\na,1,2,3\n'
bad_meta duplicate_column '"height"' 'num_frames,height,width,fps,height\n1,2,3,4,5\n'
bad_meta empty '' ''
bad_meta zero_height 'row 2 (line 3), column "height"' "${hdr}a,1,100,100,24\nb,1,0,100,24\n"
bad_meta negative_width 'row 1 (line 2), column "width"' "${hdr}a,1,100,-5,24\n"
bad_meta zero_frames 'column "num_frames"' "${hdr}a,0,100,100,24\n"
bad_meta nan_height 'column "height"' "${hdr}a,1,nan,100,24\n"
bad_meta inf_width 'column "width"' "${hdr}a,1,100,inf,24\n"
bad_meta huge_height 'column "height"' "${hdr}a,1,16777217,100,24\n"
bad_meta huge_frames 'column "num_frames"' "${hdr}a,99999999999999999999,100,100,24\n"
bad_meta fractional_frames '"12.5"' "${hdr}a,12.5,100,100,24\n"
bad_meta text_frames 'column "num_frames"' "${hdr}a,many,100,100,24\n"
bad_meta negative_fps 'column "fps"' "${hdr}a,10,100,100,-24\n"
bad_meta inf_fps 'column "fps"' "${hdr}a,10,100,100,inf\n"
bad_meta text_fps 'column "fps"' "${hdr}a,10,100,100,fast\n"
bad_meta short_row 'row 2 (line 3)' "${hdr}a,1,100,100,24\nb,1,100,100\n"
bad_meta long_row 'row 1 (line 2)' "${hdr}a,1,100,100,24,extra\n"
bad_meta unterminated 'unterminated' "${hdr}\"a,1,100,100,24\nb,1,100,100,24\n"
# A quoted path spanning lines: the next row's line number counts them.
bad_meta multiline_path 'row 2 (line 4)' "${hdr}\"a\nb\",1,100,100,24\nc,1,100,0,24\n"
expect_error "meta missing file" 1 "$tmp/nope.csv" assign "${common[@]}" --meta "$tmp/nope.csv" --out "$tmp/o.csv"
expect_error "meta is a directory" 1 "$tmp" assign "${common[@]}" --meta "$tmp" --out "$tmp/o.csv"
if [[ $(id -u) -ne 0 ]]; then
  cp "$meta" "$tmp/unreadable.csv" && chmod 000 "$tmp/unreadable.csv"
  expect_error "meta unreadable" 1 "unreadable.csv" assign "${common[@]}" --meta "$tmp/unreadable.csv" --out "$tmp/o.csv"
fi

# ---------------------------------------------------------------------------------------------
# A failure never leaves a half-written OUT: an existing OUT is kept, no temporary files stay.
# ---------------------------------------------------------------------------------------------
mkdir -p "$tmp/outdir"
echo "previous content" >"$tmp/outdir/out.csv"
expect_error "bad meta keeps OUT" 1 "zero_height.csv" assign "${common[@]}" --meta "$tmp/zero_height.csv" --out "$tmp/outdir/out.csv"
[[ $(cat "$tmp/outdir/out.csv") == "previous content" ]] && pass || fail "OUT was changed by a failed run"
expect_ok "rewrite OUT" assign "${common[@]}" --meta "$meta" --out "$tmp/outdir/out.csv" --quiet &&
  { cmp -s "$out" "$tmp/outdir/out.csv" && pass || fail "OUT not replaced"; }
[[ $(ls "$tmp/outdir") == "out.csv" ]] && pass || fail "files left behind: $(ls "$tmp/outdir")"
expect_error "OUT in a missing directory" 1 "$tmp/missing/out.csv" assign "${common[@]}" --meta "$meta" --out "$tmp/missing/out.csv"
expect_error "OUT is a directory" 1 "$tmp/outdir" assign "${common[@]}" --meta "$meta" --out "$tmp/outdir"

# An OUT that is not a regular file (a pipe here; /dev/null, /dev/stdout alike) is written in
# place, never replaced by a renamed file.
if mkfifo "$tmp/pipe" 2>/dev/null; then
  cat "$tmp/pipe" >"$tmp/pipe_content" &
  reader=$!
  expect_ok "OUT is a pipe" assign "${common[@]}" --meta "$meta" --out "$tmp/pipe" --quiet
  wait "$reader"
  [[ -p $tmp/pipe ]] && pass || fail "the pipe OUT was replaced"
  cmp -s "$out" "$tmp/pipe_content" && pass || fail "the pipe got another content"
fi
# META from a pipe (process substitution): read in chunks.
expect_ok "META from a pipe" assign "${common[@]}" --meta <(cat "$meta") --out "$tmp/from_pipe.csv" --quiet &&
  { cmp -s "$out" "$tmp/from_pipe.csv" && pass || fail "META from a pipe gives another result"; }

# ---------------------------------------------------------------------------------------------
# --seed S --epoch E mean what they mean to `plan` and `stats`, in both modes: every sample is
# in the bucket `plan` put it in. NumPy seeds may be any non-negative integer everywhere
# (Open-Sora's epoch seed is S + E, also past 2^64); fast seeds are below 2^64 everywhere.
# ---------------------------------------------------------------------------------------------
cfgv2="$data/config_opensora_v2.json"
metav2="$tmp/meta_v2.csv"
web_meta "$metav2" 777 400

# same_buckets NAME ASSIGN.csv PLAN.jsonl: the samples of each bucket of the plan (pads and
# repeats are its own samples again) are exactly the samples `assign` put in that bucket.
same_buckets() {
  if python3 - "$2" "$3" >"$tmp/same.out" 2>&1 <<'EOF'; then
import csv, json, sys
assigned = {}
with open(sys.argv[1], newline="") as f:
    for row in csv.DictReader(f):
        if row["resolution"]:
            assigned[int(row["index"])] = (row["resolution"], int(row["frames"]), row["ratio"])
planned = {}
with open(sys.argv[2]) as f:
    for line in f:
        b = json.loads(line)
        key = (b["bucket"][0], int(b["bucket"][1]), b["bucket"][2])
        for i in b["indices"]:
            if planned.setdefault(i, key) != key:
                sys.exit(f"sample {i} is in two buckets of the plan: {planned[i]} and {key}")
if not assigned:
    sys.exit("assign put no sample in a bucket")
if planned != assigned:
    diff = sorted(i for i in set(planned) | set(assigned) if planned.get(i) != assigned.get(i))
    sys.exit(f"{len(diff)} samples differ, e.g. {[(i, assigned.get(i), planned.get(i)) for i in diff[:3]]}")
EOF
    pass
  else
    fail "$1: $(cat "$tmp/same.out")"
  fi
}

n=0
for rng in fast numpy; do
  cases=("7 0" "7 3" "0 18446744073709551615" "18446744073709551615 0")
  [[ $rng == numpy ]] && cases+=("18446744073709551615 2" "1267650600228229401496703205376 5")
  for c in "${cases[@]}"; do
    read -r s e <<<"$c"
    n=$((n + 1))
    name="--rng $rng --seed $s --epoch $e"
    expect_ok "assign $name" assign --config "$cfgv2" --meta "$metav2" --rule opensora-v2 \
      --rng "$rng" --seed "$s" --epoch "$e" --out "$tmp/ep$n.csv" --quiet || continue
    expect_ok_warned "plan $name" plan --config "$cfgv2" --meta "$metav2" --rng "$rng" --seed "$s" \
      --epoch "$e" --world 2 --rank all --out "$tmp/ep$n.jsonl" --quiet || continue
    same_buckets "assign and plan, $name" "$tmp/ep$n.csv" "$tmp/ep$n.jsonl"
    expect_ok_warned "stats $name" stats --config "$cfgv2" --meta "$metav2" --rng "$rng" --seed "$s" \
      --epoch "$e" --world 2
  done
done

# A NumPy seed past 2^64 that assign has always taken: plan and stats take it too (epoch 0).
big=18446744073709551617
expect_ok "assign numpy seed $big" assign --config "$cfgv2" --meta "$metav2" --rule opensora-v2 \
  --rng numpy --seed "$big" --out "$tmp/big.csv" --quiet &&
  expect_ok_warned "plan numpy seed $big" plan --config "$cfgv2" --meta "$metav2" --rng numpy \
    --seed "$big" --epoch 0 --world 3 --rank all --out "$tmp/big.jsonl" --quiet &&
  same_buckets "assign and plan, numpy seed $big" "$tmp/big.csv" "$tmp/big.jsonl"
expect_ok_warned "stats numpy seed $big" stats --config "$cfgv2" --meta "$metav2" --rng numpy --seed "$big"

# Without --epoch: epoch 0, as before --epoch existed.
expect_ok "assign without --epoch" assign --config "$cfgv2" --meta "$metav2" --rule opensora-v2 \
  --rng fast --seed 7 --out "$tmp/noepoch.csv" --quiet &&
  { cmp -s "$tmp/ep1.csv" "$tmp/noepoch.csv" && pass || fail "no --epoch differs from --epoch 0"; }

# NumPy mode: epoch E of seed S draws with Open-Sora's seed S + E (here summed by Python), also
# when the sum passes 2^64.
for c in "42 3" "18446744073709551615 2" "1267650600228229401496703205376 5"; do
  read -r s e <<<"$c"
  sum=$(python3 -c "import sys; print(int(sys.argv[1]) + int(sys.argv[2]))" "$s" "$e")
  expect_ok "numpy seed $s epoch $e" assign --config "$cfgv2" --meta "$metav2" --rule opensora-v2 \
    --rng numpy --seed "$s" --epoch "$e" --out "$tmp/se.csv" --quiet &&
    expect_ok "numpy seed $sum" assign --config "$cfgv2" --meta "$metav2" --rule opensora-v2 \
      --rng numpy --seed "$sum" --out "$tmp/sum.csv" --quiet &&
    { cmp -s "$tmp/se.csv" "$tmp/sum.csv" && pass ||
      fail "--rng numpy --seed $s --epoch $e differs from --seed $sum"; }
done

# One seed rule in every command: fast seeds of 2^64 and more are refused, naming --seed.
for cmd in assign plan stats; do
  extra=()
  [[ $cmd == assign ]] && extra=(--rule opensora-v2 --out "$tmp/o.csv")
  [[ $cmd == plan ]] && extra=(--world 1 --rank 0 --out "$tmp/o.jsonl")
  expect_error "$cmd fast seed 2^64" 2 "--seed: seed 18446744073709551616 does not fit in 64 bits" \
    "$cmd" --config "$cfgv2" --meta "$metav2" --rng fast --seed 18446744073709551616 --epoch 1 \
    "${extra[@]}"
  expect_error "$cmd epoch 2^64" 2 "--epoch" "$cmd" --config "$cfgv2" --meta "$metav2" \
    --rng numpy --seed 1 --epoch 18446744073709551616 "${extra[@]}"
  expect_error "$cmd epoch -1" 2 "--epoch" "$cmd" --config "$cfgv2" --meta "$metav2" \
    --rng numpy --seed 1 --epoch -1 "${extra[@]}"
done

finish
