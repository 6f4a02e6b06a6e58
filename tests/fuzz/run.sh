#!/usr/bin/env bash
# Builds vbucket's libFuzzer targets with clang in build-fuzz/ and runs each one for a bounded
# time from its seed corpus (tests/fuzz/corpus/<target>/, never written to: new inputs go to
# build-fuzz/corpus/<target>/). Exits non-zero on the first crash, leak, timeout or UB report;
# the reproducer is left in build-fuzz/artifacts/ and the log's tail is printed.
#
#   bash tests/fuzz/run.sh            # 45 s per target
#   bash tests/fuzz/run.sh 60         # seconds per target
#   bash tests/fuzz/run.sh 0          # no fuzzing: replay the seed corpora once (regressions)
#   FUZZ_TARGETS="config_json assign" bash tests/fuzz/run.sh 30   # only these targets
#   Reproduce a crash: build-fuzz/fuzz/fuzz_<target> build-fuzz/artifacts/<target>/crash-...
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root="$(pwd)"
seconds="${1:-45}"
if ! [[ "${seconds}" =~ ^[0-9]+$ ]]; then
  echo "usage: bash tests/fuzz/run.sh [seconds per target]" >&2
  exit 2
fi

cxx="${FUZZ_CXX:-clang++}"
if ! command -v "${cxx}" >/dev/null 2>&1; then
  echo "fuzz: ${cxx} not found (the fuzz targets need clang with libFuzzer)" >&2
  exit 1
fi

generator=()
if [[ ! -f build-fuzz/CMakeCache.txt ]] && command -v ninja >/dev/null 2>&1; then
  generator=(-G Ninja)
fi
# -O1 with asserts on: fast enough to fuzz, and the library's precondition checks stay armed.
# Warnings are not errors (instrumentation causes false positives; the dev build gates them).
cmake -S . -B build-fuzz "${generator[@]}" -DCMAKE_CXX_COMPILER="${cxx}" \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" \
  -DVBUCKET_BUILD_FUZZ=ON -DVBUCKET_BUILD_TESTS=OFF -DVBUCKET_BUILD_TOOLS=OFF \
  -DVBUCKET_BUILD_EXAMPLES=OFF -DVBUCKET_BUILD_BENCH=OFF -DVBUCKET_INSTALL=OFF \
  -DVBUCKET_WERROR=OFF >/dev/null
cmake --build build-fuzz --parallel "$(nproc)"

# Targets this clang cannot compile (listed in build-fuzz/fuzz/skipped.txt) are built without
# libFuzzer by GCC with ASan + UBSan in build-fuzz-gcc/ and fuzzed by the standalone driver
# (blind mutation of the corpus, not coverage guided).
skipped=()
if [[ -s build-fuzz/fuzz/skipped.txt ]]; then
  mapfile -t skipped <build-fuzz/fuzz/skipped.txt
fi
if ((${#skipped[@]} > 0)); then
  echo "fuzz: ${skipped[*]}: not buildable by ${cxx}; building with ${FUZZ_FALLBACK_CXX:-g++}"
  generator=()
  if [[ ! -f build-fuzz-gcc/CMakeCache.txt ]] && command -v ninja >/dev/null 2>&1; then
    generator=(-G Ninja)
  fi
  cmake -S . -B build-fuzz-gcc "${generator[@]}" -DCMAKE_CXX_COMPILER="${FUZZ_FALLBACK_CXX:-g++}" \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" \
    -DVBUCKET_SANITIZE=address,undefined,float-cast-overflow -DVBUCKET_FUZZ_REPLAY=ON \
    -DVBUCKET_BUILD_TESTS=ON -DVBUCKET_BUILD_TOOLS=OFF -DVBUCKET_BUILD_EXAMPLES=OFF \
    -DVBUCKET_BUILD_BENCH=OFF -DVBUCKET_INSTALL=OFF -DVBUCKET_WERROR=OFF >/dev/null
  fallback_targets=()
  for target in "${skipped[@]}"; do fallback_targets+=(--target "fuzz_${target}_replay"); done
  cmake --build build-fuzz-gcc --parallel "$(nproc)" "${fallback_targets[@]}"
fi

targets=()
if [[ -n "${FUZZ_TARGETS:-}" ]]; then
  read -r -a targets <<<"${FUZZ_TARGETS}"
else
  for src in tests/fuzz/fuzz_*.cpp; do
    targets+=("$(basename "${src}" .cpp | sed 's/^fuzz_//')")
  done
fi
if ((${#targets[@]} == 0)); then
  echo "fuzz: no targets" >&2
  exit 1
fi

# Deterministic per run, different between targets; override with FUZZ_SEED.
seed="${FUZZ_SEED:-$(date +%s)}"
failed=()
for target in "${targets[@]}"; do
  bin="build-fuzz/fuzz/fuzz_${target}"
  kind="libFuzzer"
  if [[ ! -x "${bin}" && -x "build-fuzz-gcc/fuzz/fuzz_${target}_replay" ]] &&
    printf '%s\n' "${skipped[@]}" | grep -qx "${target}"; then
    bin="build-fuzz-gcc/fuzz/fuzz_${target}_replay"
    kind="standalone driver, GCC"
  fi
  seeds="tests/fuzz/corpus/${target}"
  work="build-fuzz/corpus/${target}"
  artifacts="build-fuzz/artifacts/${target}/"
  log="build-fuzz/logs/${target}.log"
  if [[ ! -x "${bin}" ]]; then
    echo "fuzz: ${bin} was not built" >&2
    failed+=("${target}")
    continue
  fi
  if [[ ! -d "${seeds}" ]]; then
    echo "fuzz: no seed corpus ${seeds}/" >&2
    failed+=("${target}")
    continue
  fi
  mkdir -p "${work}" "${artifacts}" "$(dirname "${log}")"
  options=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1
    -artifact_prefix="${root}/${artifacts}")
  if [[ -f "tests/fuzz/${target}.dict" ]]; then
    options+=(-dict="tests/fuzz/${target}.dict")
  fi
  if [[ -f "tests/fuzz/${target}.options" ]]; then  # extra libFuzzer flags, one line
    read -r -a extra <"tests/fuzz/${target}.options"
    options+=("${extra[@]}")
  fi
  if ((seconds == 0)); then
    echo "=== fuzz ${target} (${kind}): replaying ${seeds}/ ($(find "${seeds}" -type f | wc -l) inputs)"
    run=("${bin}" "${options[@]}" -runs=0 "${seeds}")
  else
    echo "=== fuzz ${target} (${kind}): ${seconds} s from ${seeds}/ ($(find "${seeds}" -type f | wc -l) seeds)"
    run=("${bin}" "${options[@]}" -seed="${seed}" -max_total_time="${seconds}" "${work}" "${seeds}")
  fi
  # A hang the -timeout does not catch (e.g. in start-up) still ends.
  if timeout --kill-after=10 $((seconds + 120)) "${run[@]}" >"${log}" 2>&1; then
    grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|Done|replayed|ran)" "${log}" |
      sed 's/^/  /' || true
  else
    echo "fuzz ${target}: FAILED (rc=$?); log ${log}, reproducer in ${artifacts}" >&2
    tail -n 60 "${log}" >&2
    failed+=("${target}")
  fi
done

if ((${#failed[@]} > 0)); then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets clean (${targets[*]})"
