#!/usr/bin/env bash
# The test command: builds everything (tests, tools, examples, benchmarks; warnings as errors)
# in build-debug/, runs ctest, checks that vbucket can be consumed by other CMake projects, then
# installs the Python package into .venv and runs its pytest suite (python/tests).
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

# The CUDA adapter is built whenever nvcc exists (on PATH or in /usr/local/cuda/bin); its GPU
# tests report "Skipped" on a machine without a GPU, its host-backend logic is tested anyway.
cuda=(-DVBUCKET_CUDA=OFF)
nvcc="$(command -v nvcc || true)"
if [[ -z "${nvcc}" && -x /usr/local/cuda/bin/nvcc ]]; then
  nvcc=/usr/local/cuda/bin/nvcc
fi
if [[ -n "${nvcc}" && "${VBUCKET_TEST_CUDA:-1}" != 0 ]]; then
  cuda=(-DVBUCKET_CUDA=ON -DCMAKE_CUDA_COMPILER="${nvcc}")
else
  echo "test: no nvcc, the CUDA adapter is not built"
fi

cmake -S . -B build-debug "${generator[@]}" -DCMAKE_BUILD_TYPE="${build_type}" \
  -DVBUCKET_BUILD_TESTS=ON -DVBUCKET_BUILD_TOOLS=ON -DVBUCKET_BUILD_EXAMPLES=ON \
  -DVBUCKET_BUILD_BENCH=ON -DVBUCKET_WERROR=ON "${cuda[@]}"
cmake --build build-debug --parallel "$(nproc)"
ctest --test-dir build-debug --output-on-failure --no-tests=error --parallel "$(nproc)"
bash tests/consumers/run.sh

# The Python package: installed into .venv from this checkout, its pytest suite run against the
# CLI just built (tests comparing with `vbucket plan`, `assign` and `stats` use it).
bash python/setup_venv.sh
VBUCKET_CLI="${PWD}/build-debug/vbucket" .venv/bin/python -m pytest -q python/tests
