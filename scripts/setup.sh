#!/usr/bin/env bash
# Installs what vbucket needs (Debian/Ubuntu): what building and using it needs and what the test
# command (scripts/test.sh) needs, not the tools only CI uses (clang-format, libFuzzer, sanitizer
# runtimes, LibTorch, MkDocs: .ci/run installs those); the lists are in scripts/apt_packages.sh.
# Builds the CLI in build/ (Ninja, Release) and runs the main job: bucket assignment of the sample
# metadata with the 360p example config; then installs the Python package into .venv
# (python/setup_venv.sh) and prints the bucket table from Python. Prints how long it took.
# Idempotent: apt is skipped when every package is already installed, and the build is
# incremental.
#
#   bash scripts/setup.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
started=${SECONDS}

# shellcheck source=scripts/apt_packages.sh
source scripts/apt_packages.sh
packages=("${vbucket_build_packages[@]}" "${vbucket_test_packages[@]}")
status=0
install_missing setup "${packages[@]}" || status=$?
if ((status == 2)); then
  echo "setup: no dpkg-query (not Debian/Ubuntu); install these by hand: ${packages[*]}" >&2
elif ((status != 0)); then
  exit "${status}"
fi

# Configure + build. -G only on a fresh tree: an existing build/ keeps its generator.
generator=()
if [[ ! -f build/CMakeCache.txt ]]; then
  generator=(-G Ninja)
fi
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release
# Only the tool the main job needs; scripts/test.sh builds everything else.
cmake --build build --parallel "$(nproc)" --target vbucket_cli

# The main job.
if [[ -x build/vbucket ]]; then
  ./build/vbucket assign --config tests/data/config_360p_example.json \
    --meta examples/data/sample_meta.csv --rule opensora-v2 --rng numpy --seed 42 \
    --out build/assign_360p.csv
  echo "setup: wrote build/assign_360p.csv ($(($(wc -l <build/assign_360p.csv) - 1)) samples)"
else
  echo "setup: build/vbucket was not built (no tools/vbucket/*.cpp yet?); main job skipped"
fi

# The Python package in .venv (Debian's python3 with its torch, numpy and pandas), and the main
# job's bucket table from Python: the same table `vbucket stats` prints.
bash python/setup_venv.sh
.venv/bin/python -m vbucket stats --config tests/data/config_360p_example.json \
  --meta examples/data/sample_meta.csv --rule opensora-v2 --rng numpy --seed 42
elapsed=$((SECONDS - started))
echo "setup: done in $((elapsed / 60)) min $((elapsed % 60)) s"
