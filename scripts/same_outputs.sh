#!/usr/bin/env bash
# Byte-equal outputs of two builds of the CLI on a fixed scenario set: what a refactoring that
# keeps behaviour ("the same plans, states and ledgers byte for byte") is checked with. Each CLI
# runs every scenario in its own directory (the same relative paths), then every output file is
# compared; ledgers are compared as `vbucket audit --dump` prints them (with the second CLI), so
# a change of the ledger's on-disk format alone is not a difference.
#
#   bash scripts/same_outputs.sh OLD/vbucket NEW/vbucket   # exit 0: every output equal
#   KEEP=1 bash scripts/same_outputs.sh ...                # keep the directories to look at
#
# Scenarios: assignment (both rules, both random sources), fixed and packed epoch plans with
# step balance, plan statistics, a latent-cache plan, and a run plan of two weighted sources and
# two stages: uninterrupted over two epochs, and stopped twice and resumed under other worlds
# with an out-of-memory step, each with its ledger and audit.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: bash scripts/same_outputs.sh OLD_CLI NEW_CLI" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
old="$(realpath "$1")"
new="$(realpath "$2")"
work="$(mktemp -d /tmp/vbucket-same-outputs.XXXXXX)"
[[ -n "${KEEP:-}" ]] || trap 'rm -rf "${work}"' EXIT
data="${root}/tests/data"
meta="${root}/examples/data/sample_meta.csv"

# The run file: two sources of one metadata file drawn 0.7 : 0.3, a 256px stage then a 768px
# stage from step 12.
python3 - "${data}/config_opensora_v2.json" "${work}/inputs" "${meta}" <<'EOF'
import json, os, shutil, sys
config, out, meta = sys.argv[1:]
os.makedirs(out)
shutil.copy(meta, os.path.join(out, "meta.csv"))
c = json.load(open(config))
json.dump({"256px": c["256px"]}, open(os.path.join(out, "stage1.json"), "w"))
run = {"seed": 7, "world": 4, "rank": 0, "epoch_samples": 600,
       "sources": [{"name": "web", "csv": "meta.csv", "weight": 0.7},
                   {"name": "curated", "csv": "meta.csv", "weight": 0.3}],
       "stages": [{"name": "s1", "config": "stage1.json"},
                  {"name": "s2", "from_step": 12, "config": {"768px": c["768px"]}}]}
json.dump(run, open(os.path.join(out, "run.json"), "w"))
EOF

scenarios() { # CLI DIR: every scenario's outputs under DIR; stops at the first failure
  local cli=$1 d=$2 in="${work}/inputs"
  mkdir -p "$d"
  cd "$d"
  local v2=(--config "${data}/config_opensora_v2.json" --meta "${in}/meta.csv")
  "$cli" assign "${v2[@]}" --rule opensora-v2 --rng numpy --seed 42 --out assign_v2_numpy.csv
  "$cli" assign "${v2[@]}" --rule opensora-v2 --rng fast --seed 42 --out assign_v2_fast.csv
  "$cli" assign --config "${data}/config_360p_example.json" --meta "${in}/meta.csv" \
    --rule opensora-v1.2 --rng fast --seed 3 --out assign_v12_fast.csv
  "$cli" plan "${v2[@]}" --seed 42 --epoch 0 --world 4 --rank all --balance --out plan_fixed.jsonl
  "$cli" plan "${v2[@]}" --seed 42 --epoch 1 --world 4 --rank all --drop-last --policy downgrade \
    --out plan_downgrade.jsonl
  "$cli" plan "${v2[@]}" --seed 5 --epoch 0 --world 2 --rank all --batching packed \
    --token-budget 300000 --drop-oversized --out plan_packed.jsonl
  "$cli" stats "${v2[@]}" --seed 42 --world 8 >stats.txt
  "$cli" cache-plan "${v2[@]}" --seed 42 --out cache.csv >cache_stdout.txt
  "$cli" plan --run "${in}/run.json" --rank all --epochs 2 --quiet --out run_full.jsonl \
    --ledger L0 --save-state state_full
  "$cli" plan --run "${in}/run.json" --rank all --steps 7 --quiet --save-state s1 \
    --out run_p1.jsonl --ledger L1
  "$cli" plan --run "${in}/run.json" --rank all --steps 9 --quiet --state "@s1" --world 3 \
    --save-state s2 --out run_p2.jsonl --ledger L1
  "$cli" plan --run "${in}/run.json" --rank all --epochs 2 --quiet --state "@s2" --world 5 \
    --oom 10 --save-state s3 --out run_p3.jsonl --ledger L1
  "$cli" audit L0 >audit_L0.txt
  "$cli" audit L1 >audit_L1.txt
  cd - >/dev/null
}

for side in old new; do
  cli=$old
  [[ $side == old ]] || cli=$new
  # In a subshell of its own under set -e (not in a condition, where set -e is off): the first
  # failing command stops it.
  set +e
  (
    set -e
    scenarios "$cli" "${work}/${side}"
  ) >"${work}/${side}.log" 2>&1
  rc=$?
  set -e
  if ((rc != 0)); then
    echo "same_outputs: ${cli} failed a scenario (exit ${rc}):" >&2
    tail -5 "${work}/${side}.log" >&2
    exit 1
  fi
done

differ=0
count=0
while IFS= read -r rel; do
  count=$((count + 1))
  a="${work}/old/${rel}"
  b="${work}/new/${rel}"
  case "$rel" in
    L*/*)  # a ledger file: compared as the dump reads it
      cmp -s <(cd "${work}/old" && "$new" audit --dump "$rel" 2>&1) \
        <(cd "${work}/new" && "$new" audit --dump "$rel" 2>&1) && continue ;;
    *)
      [[ -f "$b" ]] && cmp -s "$a" "$b" && continue ;;
  esac
  echo "differs: ${rel}"
  differ=$((differ + 1))
done < <(cd "${work}/old" && find . -type f | sed 's|^\./||' | sort)
extra=$(comm -13 <(cd "${work}/old" && find . -type f | sort) <(cd "${work}/new" && find . -type f | sort))
[[ -z "$extra" ]] || { echo "only in the second: ${extra}"; differ=$((differ + 1)); }
if ((differ)); then
  echo "same_outputs: ${differ} of ${count} outputs differ (KEEP=1 keeps the directories to compare)"
  exit 1
fi
echo "same_outputs: ${count} outputs byte-equal ($(du -sh "${work}/new" | cut -f1) each)"
