#!/usr/bin/env bash
# The test command: builds everything (tests, tools, examples, benchmarks; warnings as errors)
# in build-debug/, runs ctest, then checks that vbucket can be consumed by other CMake projects.
#
#   bash scripts/test.sh
#   VBUCKET_BUILD_TYPE=RelWithDebInfo bash scripts/test.sh   # default: Debug (asserts on)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_type="${VBUCKET_BUILD_TYPE:-Debug}"
generator=()
if [[ ! -f build-debug/CMakeCache.txt ]]; then
  generator=(-G Ninja)
fi

cmake -S . -B build-debug "${generator[@]}" -DCMAKE_BUILD_TYPE="${build_type}" \
  -DVBUCKET_BUILD_TESTS=ON -DVBUCKET_BUILD_TOOLS=ON -DVBUCKET_BUILD_EXAMPLES=ON \
  -DVBUCKET_BUILD_BENCH=ON -DVBUCKET_WERROR=ON
cmake --build build-debug --parallel "$(nproc)"
ctest --test-dir build-debug --output-on-failure --no-tests=error --parallel "$(nproc)"
bash tests/consumers/run.sh
