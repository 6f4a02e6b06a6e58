#!/usr/bin/env bash
# CLI test of `vbucket layout`: the per-bucket layout table of Open-Sora 2.0's stage-2 config
# under given models (every sp allowed, every micro-batch within the memory limit), the epoch
# planned over groups of ranks (steps, idle share), and the error contract (exit code, one line
# on stderr naming the flag or the world). Python's GroupPlan gives the same table
# (python/tests/test_parallel_layout.py).
#
#   bash tests/cli/layout.sh <path to vbucket> <absolute path of tests/data>
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" layout "$@"
cfg="$data/config_opensora_v2_stage2.json"
meta="$(dirname "$data")/../examples/data/sample_meta.csv"
models=(--memory 20,1e-3,1e-8 --memory-limit 80 --time 0.5,1e-4,2e-9 --comm-per-token 5e-6
  --comm-per-micro-step 0.01 --max-accumulation 8 --remainder pad)

expect_ok "table" layout --config "$cfg" "${models[@]}"
# Every enabled row: an allowed sp, a micro-batch within memory, accumulation within 8.
if awk 'NR > 3 && $4 != "disabled" {
          t = $2; sp = $3; micro = $5; acc = $6
          if (sp != 1 && sp != 2 && sp != 4 && sp != 8) exit 1
          if (20 + micro * (1e-3 * t + 1e-8 * t * t) / sp > 80) exit 1
          if (acc < 1 || acc > 8) exit 1
          rows++ }
        END { exit rows > 0 ? 0 : 1 }' "$tmp/stdout"; then
  pass
else
  fail "table: a row breaks sp, memory or accumulation:"$'\n'"$(cat "$tmp/stdout")"
fi
grep -q '^target:  [0-9.]* s per step$' "$tmp/stdout" && pass || fail "table: no target line"

expect_ok "plan" layout --config "$cfg" "${models[@]}" --meta "$meta" --world 8 --seed 3
grep -q '^steps:   [1-9][0-9]* (' "$tmp/stdout" && pass || fail "plan: no steps line: $(cat "$tmp/stdout")"
grep -q '^idle:    [0-9.]* % ' "$tmp/stdout" && pass || fail "plan: no idle line: $(cat "$tmp/stdout")"

# --profile: steps profiled from known models at sp 1, 2 and 4 fit them back exactly.
profile="$tmp/profile.csv"
"$vbucket" layout --config "$cfg" --sp-sizes 1 |
  awk 'BEGIN { print "resolution,frames,batch_size,peak_memory_gib,step_seconds,sp,micro_batch" }
       NR > 3 && $4 != "disabled" && (NR % 5 == 0) {
         split($1, rf, ":"); t = $2
         if (t % 4 != 0) next
         for (sp = 1; sp <= 4; sp *= 2) for (bs = 1; bs <= 3; bs++) {
           micro = bs > 1 ? bs - 1 : 1; steps = int((bs + micro - 1) / micro)
           mem = 20 + micro * (1e-3 * t + 1e-8 * t * t) / sp
           sec = 0.5 + bs * ((1e-4 * t + 2e-9 * t * t) / sp + 5e-6 * t * (sp - 1) / sp) + steps * 0.01 * (sp - 1)
           printf "%s,%s,%d,%.12g,%.12g,%d,%d\n", rf[1], rf[2], bs, mem, sec, sp, micro } }' >"$profile"
expect_ok "profile" layout --config "$cfg" --profile "$profile" --memory-limit 80 --max-accumulation 8 --remainder pad
grep -qF 'memory:  20 + micro·(0.001·tokens + 1e-08·tokens²) / sp' "$tmp/stdout" && pass ||
  fail "profile: memory model not fitted back: $(cat "$tmp/stdout")"
grep -qF 'time:    0.5 + bs·((0.0001·tokens + 2e-09·tokens²) / sp + 5e-06·tokens·(sp−1)/sp) + micro-steps·0.01·(sp−1)' "$tmp/stdout" && pass ||
  fail "profile: time model not fitted back: $(cat "$tmp/stdout")"
sed -n '/^bucket /,$p' "$tmp/stdout" >"$tmp/fitted.txt"
expect_ok "given" layout --config "$cfg" "${models[@]}"
if sed -n '/^bucket /,$p' "$tmp/stdout" | diff -q - "$tmp/fitted.txt" >/dev/null; then
  pass
else
  fail "profile: the fitted models give another table than the same models as flags"
fi

expect_error "world" 1 "does not divide world size 6" \
  layout --config "$cfg" "${models[@]}" --meta "$meta" --world 6
expect_error "model" 2 "--memory: layout option memory: expected three numbers" \
  layout --config "$cfg" --memory 1,2
expect_error "remainder" 2 "--remainder: layout option remainder: \"cut\" is not refuse or pad" \
  layout --config "$cfg" --remainder cut
expect_error "sp sizes" 2 "--sp-sizes: layout option sp_sizes: expected a number, got \"x\"" \
  layout --config "$cfg" --sp-sizes 1,x
expect_error "profile and models" 2 "--memory and --profile" \
  layout --config "$cfg" --memory 1,2,3 --profile "$tmp/none.csv"

finish
