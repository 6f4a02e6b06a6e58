#!/usr/bin/env bash
# CLI test of `vbucket fit-bs`: a profile made from known costs is fitted exactly, NEW.json is
# the input config with the batch sizes replaced (keys in order, disabled buckets untouched),
# the --reference mode, and the error contract (non-zero exit, exactly one line on stderr
# naming the file, row and column, no NEW.json left behind).
#
#   bash tests/cli/fit_bs.sh <path to vbucket> <absolute path of tests/data>
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" fit_bs "$@"
# A failing run leaves no NEW.json ($tmp/err.json, the --out of every failing run).
expect_error_absent="$tmp/err.json"

# expect_file NAME FILE: FILE's content equals stdin.
expect_file() {
  local name=$1 file=$2
  if diff -u - "$file" >"$tmp/diff"; then
    pass
  else
    fail "$name: unexpected content of $(basename "$file"):"$'\n'"$(cat "$tmp/diff")"
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
# Inputs: the 360p config of Open-Sora's docs (v1.2 tables: 360p's largest entry is 350×662,
# 905 latent pixels) and a profile from known costs on a 48 GB device:
#   memory = 3 + bs·(1e-4·tokens + 1e-10·tokens²) GiB,  time = 0.3 + bs·(4e-6·tokens +
#   2e-11·tokens²) s; 360p:408 at bs 5 ran out of memory. Columns in another order, plus one
#   the tool ignores.
# ---------------------------------------------------------------------------------------------
cfg360="$data/config_360p_example.json"
cfg12="$data/config_opensora_v12.json"
profile="$tmp/profile.csv"
awk 'BEGIN {
  print "frames,resolution,batch_size,step_seconds,peak_memory_gib,note"
  split("1 51 102 204 408", f, " "); split("905 11765 23530 46155 92310", t, " ")
  for (i = 1; i <= 5; i++)
    for (b = 1; b <= 4; b *= 2)
      printf "%d,360p,%d,%.9f,%.9f,\"ok, measured\"\n", f[i], b,
        0.3 + b * (4e-6 * t[i] + 2e-11 * t[i] * t[i]), 3 + b * (1e-4 * t[i] + 1e-10 * t[i] * t[i])
  print "408,360p,5,,OOM,out of memory"
}' >"$profile"

# ---------------------------------------------------------------------------------------------
# Fill an 80 GB device (limit 76 GiB): bs = floor((76 - 3) / per-sample cost).
# ---------------------------------------------------------------------------------------------
if expect_ok "80 GB" fit-bs --config "$cfg360" --profile "$profile" --memory-gib 80 \
  --out "$tmp/new80.json"; then
  expect_file "80 GB" "$tmp/new80.json" <<'EOF'
{
 "360p": {
  "1": [
   0.2,
   805
  ],
  "51": [
   0.15,
   61
  ],
  "102": [
   [
    0.15,
    0.33
   ],
   30
  ],
  "204": [
   [
    0.15,
    0.1
   ],
   15
  ],
  "408": [
   [
    0.15,
    0.1
   ],
   7
  ]
 }
}
EOF
  expect_stdout "80 GB" "profile: 16 steps (1 out of memory)"
  expect_stdout "80 GB" "memory:  3 + bs·(0.0001·tokens + 1e-10·tokens²) GiB"
  expect_stdout "80 GB" "time:    0.3 + bs·(4e-06·tokens + 2e-11·tokens²) s"
  expect_stdout "80 GB" "limit:   80 GiB × (1 − 0.05) = 76 GiB"
  expect_stdout "80 GB" "bucket    tokens  old bs  new bs  memory GiB  step s"
  expect_stdout "80 GB" "360p:408   92310       1       7       73.58   4.078"
  expect_stdout "80 GB" "360p:1       905     141     805       75.92   3.227"
fi

# A 24 GB device (limit 22.8 GiB); the output is checked through a second fit: a config
# rescaled from itself with margin 0 and 24 GiB.
if expect_ok "24 GB" fit-bs --config "$cfg360" --profile "$profile" --memory-gib 24 \
  --out "$tmp/new24.json"; then
  for line in "360p:408   92310       1       1       13.08" "360p:204   46155       2       4" \
    "360p:102   23530       4       8" "360p:51    11765       8      16" \
    "360p:1       905     141     218"; do
    expect_stdout "24 GB" "$line"
  done
  expect_ok "24 GB, input from a previous fit" fit-bs --config "$tmp/new24.json" \
    --profile "$profile" --memory-gib 24 --out "$tmp/new24b.json" &&
    expect_stdout "24 GB, input from a previous fit" "360p:1       905     218     218"
fi

# --reference: 360p:102 fills memory (30, 3.456 s); the others match its step time, capped by
# memory (51 frames would want 63, 1 frame 868).
if expect_ok "reference" fit-bs --config "$cfg360" --profile "$profile" --memory-gib 80 \
  --reference 360p:102 --out "$tmp/ref.json"; then
  expect_stdout "reference" "target:  360p:102 at 3.456 s per step"
  for line in "360p:408   92310       1       6" "360p:204   46155       2      14" \
    "360p:102   23530       4      30" "360p:51    11765       8      61" \
    "360p:1       905     141     805"; do
    expect_stdout "reference" "$line"
  done
fi

# Other compressions change the tokens: 360p:51 is 51 latent frames × 350·662/64 pixels.
expect_ok "compressions" fit-bs --config "$cfg360" --profile "$profile" --memory-gib 80 \
  --temporal-compression 1 --spatial-compression 8 --margin 0 --out "$tmp/tc.json" &&
  expect_stdout "compressions" " 184620 "

# The v1.2 config: disabled buckets stay [0.0, null], other keys keep their order.
if expect_ok "v1.2 config" fit-bs --config "$cfg12" --profile "$profile" --memory-gib 80 \
  --margin 0.1 --out "$tmp/v12.json"; then
  if [[ $(grep -c 'null' "$tmp/v12.json") -eq 3 ]]; then pass; else fail "v1.2: expected 3 nulls"; fi
  if [[ $(grep -o '"[0-9a-z]*": {' "$tmp/v12.json" | tr -d '\n') == \
    '"144p": {"256": {"240p": {"360p": {"512": {"480p": {"720p": {"1024": {"1080p": {"2048": {' ]]; then
    pass
  else
    fail "v1.2: resolution keys out of order: $(grep -o '"[0-9a-z]*": {' "$tmp/v12.json" | tr -d '\n')"
  fi
  expect_stdout "v1.2 config" "480p:408"
  expect_stdout "v1.2 config" "disabled"
fi

expect_ok "help" fit-bs --help && expect_stdout "help" "usage: vbucket fit-bs --config CFG.json"

# ---------------------------------------------------------------------------------------------
# Errors: one line on stderr, exit 1 for bad data, 2 for bad usage, no NEW.json.
# ---------------------------------------------------------------------------------------------
args=(--config "$cfg360" --memory-gib 80 --out "$tmp/err.json")

expect_error "missing flag" 2 "missing required flag --profile" fit-bs "${args[@]}"
expect_error "margin 1" 2 "--margin: expected a fraction in [0, 1), got \"1\"" \
  fit-bs "${args[@]}" --profile "$profile" --margin 1
expect_error "memory 0" 2 "--memory-gib: expected a positive number" \
  fit-bs --config "$cfg360" --profile "$profile" --memory-gib 0 --out "$tmp/err.json"
expect_error "reference without frames" 2 "--reference: expected RES:FRAMES" \
  fit-bs "${args[@]}" --profile "$profile" --reference 360p
expect_error "reference not in the config" 2 "--reference: 360p:100 is not a bucket of" \
  fit-bs "${args[@]}" --profile "$profile" --reference 360p:100
expect_error "reference disabled" 1 "reference bucket 480p:408 is disabled" \
  fit-bs --config "$cfg12" --profile "$profile" --memory-gib 80 --reference 480p:408 \
  --out "$tmp/err.json"
expect_error "unknown rule" 2 "--rule: unknown rule" \
  fit-bs "${args[@]}" --profile "$profile" --rule opensora-v3
expect_error "missing config" 1 "$tmp/none.json: cannot open file" \
  fit-bs --config "$tmp/none.json" --profile "$profile" --memory-gib 80 --out "$tmp/err.json"
printf '{"360p": {"1": [0.2, 0]}}' >"$tmp/bad_config.json"
expect_error "bad config" 1 "bad_config.json" \
  fit-bs --config "$tmp/bad_config.json" --profile "$profile" --memory-gib 80 \
  --out "$tmp/err.json"
expect_error "missing profile" 1 "none.csv: cannot open file" \
  fit-bs "${args[@]}" --profile "$tmp/none.csv"

bad="$tmp/bad.csv"
printf 'resolution,frames,batch_size,peak_memory_gib\n360p,1,1,3.1\n' >"$bad"
expect_error "missing column" 1 "bad.csv: header (line 1): missing required column \"step_seconds\"" \
  fit-bs "${args[@]}" --profile "$bad"
printf 'resolution,frames,batch_size,peak_memory_gib,step_seconds\n' >"$bad"
expect_error "no rows" 1 "bad.csv: no data rows" fit-bs "${args[@]}" --profile "$bad"
{ head -3 "$profile"; echo '51,360p,2,0.4,abc,x'; } >"$bad"
expect_error "bad memory" 1 \
  'bad.csv: row 3 (line 4), column "peak_memory_gib": "abc" is not a positive number of GiB (or "oom")' \
  fit-bs "${args[@]}" --profile "$bad"
{ head -3 "$profile"; echo '51,360p,2,-1,4.0,x'; } >"$bad"
expect_error "negative time" 1 'row 3 (line 4), column "step_seconds": "-1" is not a positive number of seconds' \
  fit-bs "${args[@]}" --profile "$bad"
{ head -3 "$profile"; echo '51,360p,0,0.4,4.0,x'; } >"$bad"
expect_error "batch size 0" 1 'row 3 (line 4), column "batch_size": must be an integer from 1' \
  fit-bs "${args[@]}" --profile "$bad"
{ head -3 "$profile"; echo '51,999p,2,0.4,4.0,x'; } >"$bad"
expect_error "unknown resolution" 1 'row 3 (line 4), column "resolution": unknown resolution "999p"' \
  fit-bs "${args[@]}" --profile "$bad"
{ head -3 "$profile"; echo '51,360p,2,0.4'; } >"$bad"
expect_error "short row" 1 "row 3 (line 4): 4 fields, but the header has 6 columns" \
  fit-bs "${args[@]}" --profile "$bad"
grep -E '^(frames|102,)' "$profile" >"$bad"
expect_error "one token count" 1 "bad.csv: memory model: every point has 23530 tokens" \
  fit-bs "${args[@]}" --profile "$bad"
head -3 "$profile" >"$bad"
expect_error "too few points" 1 "bad.csv: memory model: 2 points cannot identify" \
  fit-bs "${args[@]}" --profile "$bad"
expect_error "does not fit" 1 \
  "bucket 360p:408 (92310 tokens) does not fit in 10 GiB with margin 0.05 (9.5 GiB) even at batch size 1" \
  fit-bs --config "$cfg360" --profile "$profile" --memory-gib 10 --out "$tmp/err.json"

finish
