#!/usr/bin/env bash
# CLI test of `--run RUN.json` (a run spec as JSON: the field names of vbucket::run_spec): plan,
# stats and assign read the file as the same flags; a flag given as well overrides the file's
# field; a relative path is taken from the file's directory; the file may give the required
# flags; a bad value is a data error naming the file and the key, an unknown key one naming the
# key; --help lists every field flag with the default of a default run spec.
#
#   bash tests/cli/run_spec.sh <path to vbucket> <absolute path of tests/data>
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../support/cli.sh" run_spec "$@"

require_python3

meta="$tmp/meta.csv"
web_meta "$meta" 77 400
cp "$data/config_opensora_v2.json" "$tmp/cfg.json"
mkdir -p "$tmp/sub"

# The same run as flags and as a file (relative paths from the file's directory).
flags=(--config "$tmp/cfg.json" --meta "$meta" --seed 1180591620717411303427 --epoch 2
  --world 3 --rng numpy --balance --fps-max 8 --policy downgrade)
cat >"$tmp/sub/run.json" <<JSON
{"config": "../cfg.json", "meta": "$meta", "seed": "1180591620717411303427", "epoch": 2,
 "world": 3, "rank": 1, "rng": "numpy", "balance": true, "fps_max": 8, "policy": "downgrade"}
JSON
for r in 0 1 2; do
  expect_ok_warned "flags rank $r" plan "${flags[@]}" --rank $r --out "$tmp/flags$r.jsonl" --quiet
  expect_ok_warned "run rank $r" plan --run "$tmp/sub/run.json" --rank $r --out "$tmp/run$r.jsonl" --quiet
  if cmp -s "$tmp/flags$r.jsonl" "$tmp/run$r.jsonl" && [[ -s $tmp/run$r.jsonl ]]; then pass; else
    fail "plan --run rank $r differs from the same flags"
  fi
done
# the file's own rank (1), and the file's required fields: only --out is needed
expect_ok_warned "run file's rank" plan --run "$tmp/sub/run.json" --out "$tmp/own.jsonl" --quiet
if cmp -s "$tmp/own.jsonl" "$tmp/flags1.jsonl"; then pass; else fail "the file's rank 1 is not used"; fi
# a flag overrides the file: another seed gives the batches of that seed's flags
expect_ok_warned "override" plan --run "$tmp/sub/run.json" --seed 5 --rank 0 --out "$tmp/o.jsonl" --quiet
expect_ok_warned "override flags" plan "${flags[@]/1180591620717411303427/5}" --rank 0 \
  --out "$tmp/of.jsonl" --quiet
if cmp -s "$tmp/o.jsonl" "$tmp/of.jsonl" && ! cmp -s "$tmp/o.jsonl" "$tmp/run0.jsonl"; then pass
else fail "--seed 5 does not override the file's seed"; fi
# stats and assign read it too
expect_ok_warned "stats flags" stats "${flags[@]}" && cp "$tmp/stdout" "$tmp/stats_flags.txt"
expect_ok_warned "stats run" stats --run "$tmp/sub/run.json"
if cmp -s "$tmp/stdout" "$tmp/stats_flags.txt"; then pass; else fail "stats --run differs"; fi
cat >"$tmp/assign.json" <<JSON
{"config": "$tmp/cfg.json", "meta": "$meta", "rule": "opensora-v2", "seed": 9, "epoch": 1}
JSON
expect_ok "assign flags" assign --config "$tmp/cfg.json" --meta "$meta" --rule opensora-v2 \
  --seed 9 --epoch 1 --out "$tmp/a1.csv" --quiet
expect_ok "assign run" assign --run "$tmp/assign.json" --out "$tmp/a2.csv" --quiet
if cmp -s "$tmp/a1.csv" "$tmp/a2.csv"; then pass; else fail "assign --run differs"; fi

# (the small metadata pads a third of the slots: the pad warning is expected above)

# Errors: bad values name the file and the key (data errors); flags name the flag.
bad() {  # NAME CODE PATTERN JSON
  printf '%s' "$4" >"$tmp/bad.json"
  expect_error "$1" "$2" "$3" plan --run "$tmp/bad.json" --rank 0 --out "$tmp/x.jsonl"
}
base="\"config\": \"$tmp/cfg.json\", \"meta\": \"$meta\", \"seed\": 1, \"epoch\": 0"
bad "world 0" 1 "$tmp/bad.json: key \"world\": expected an integer from 1 to" "{$base, \"world\": 0}"
bad "world text" 1 "$tmp/bad.json: key \"world\": expected an integer, got \"two\"" \
  "{$base, \"world\": \"two\"}"
bad "unknown key" 1 "$tmp/bad.json: unknown key \"wrold\"" "{$base, \"world\": 1, \"wrold\": 2}"
bad "float seed" 1 "key \"seed\": expected an integer (a seed of 2^64 or more as a string" \
  "{\"seed\": 1e30, \"world\": 1}"
bad "not an object" 1 "$tmp/bad.json: a run file must be a JSON object" "[1, 2]"
bad "malformed" 1 "$tmp/bad.json: malformed JSON" "{"
expect_error "missing file" 1 "$tmp/none.json" plan --run "$tmp/none.json" --out "$tmp/x.jsonl"
printf '{"world": 2}' >"$tmp/partial.json"
expect_error "still required" 2 "missing required flags --config, --meta" plan \
  --run "$tmp/partial.json" --rank 0 --seed 1 --epoch 0 --out "$tmp/x.jsonl"
expect_error "flag over file" 2 "--world: expected an integer from 1 to" plan \
  --run "$tmp/sub/run.json" --world 0 --out "$tmp/x.jsonl"
printf '{"world": 2, "rule": "opensora-v1.2", "fps_max": 8}' >"$tmp/combo.json"
expect_error "combination" 2 "--fps-max applies to --rule opensora-v2 only" plan \
  --run "$tmp/combo.json" --config "$tmp/cfg.json" --meta "$meta" --rank 0 --seed 1 --epoch 0 \
  --out "$tmp/x.jsonl"

# --chunk-rows N (a field added to the table: a flag of plan and stats with no CLI edit): the CSV
# is read 7 rows at a time, the batches are the same
expect_ok_warned "chunk rows" plan "${flags[@]}" --rank 0 --chunk-rows 7 --out "$tmp/c.jsonl" --quiet
if cmp -s "$tmp/c.jsonl" "$tmp/flags0.jsonl"; then pass; else fail "--chunk-rows 7 changed the batches"; fi
expect_error "chunk rows 0" 2 "--chunk-rows: expected an integer from 1 to" plan "${flags[@]}" \
  --rank 0 --chunk-rows 0 --out "$tmp/x.jsonl"

# --help: every field flag with its default (rng numpy, fps-max 16, compression 4,8,8).
expect_ok "help" plan --help
for line in "--rng RNG .*(default: numpy)" "--fps-max F .*(default: 16)" \
  "--compression T,H,W .*(default: 4,8,8)" "--run RUN.json"; do
  if grep -q -- "$line" "$tmp/stdout"; then pass; else fail "plan --help has no line $line"; fi
done

finish
