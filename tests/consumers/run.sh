#!/usr/bin/env bash
# Proves that vbucket can be consumed three ways: add_subdirectory, FetchContent (from a local
# SOURCE_DIR, no network) and find_package after `cmake --install`, header-only and (from
# add_subdirectory with -DVBUCKET_COMPILED=ON, and find_package COMPONENTS compiled) with
# vbucket::compiled. Each consumer is
# configured, built and run in a fresh directory under /tmp; any failure stops the script with
# a non-zero exit and a message naming the step.
#
#   bash tests/consumers/run.sh            # from anywhere
#   KEEP=1 bash tests/consumers/run.sh     # keep the /tmp build directories for inspection
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$(cd "${here}/../.." && pwd)"
work="$(mktemp -d /tmp/vbucket-consumers.XXXXXX)"

generator=()
if command -v ninja >/dev/null 2>&1; then
  generator=(-G Ninja)
fi

step="setup"
on_exit() {
  local rc=$?
  if [[ ${rc} -ne 0 ]]; then
    echo "=== vbucket consumer tests FAILED at step: ${step} (rc=${rc}); logs in ${work} ===" >&2
  elif [[ -z "${KEEP:-}" ]]; then
    rm -rf "${work}"
  fi
  exit "${rc}"
}
trap on_exit EXIT

run() {  # run <step name> <command...>: echo the step, keep going only on success
  step="$1"
  shift
  echo "--- ${step}"
  "$@"
}

# 1. add_subdirectory
run "add_subdirectory: configure" cmake -S "${here}/add_subdirectory" -B "${work}/add_subdirectory" \
  "${generator[@]}" -DVBUCKET_SOURCE_DIR="${src}"
run "add_subdirectory: build" cmake --build "${work}/add_subdirectory"
run "add_subdirectory: run" "${work}/add_subdirectory/consumer"
run "add_subdirectory: run (vbucket::compiled)" "${work}/add_subdirectory/consumer_compiled"

# 2. FetchContent
run "fetchcontent: configure" cmake -S "${here}/fetchcontent" -B "${work}/fetchcontent" \
  "${generator[@]}" -DVBUCKET_SOURCE_DIR="${src}"
run "fetchcontent: build" cmake --build "${work}/fetchcontent"
run "fetchcontent: run" "${work}/fetchcontent/consumer"

# 3. install, then find_package. vbucket is installed from a default configure that was never
# built (header-only: `cmake --install` must work without building the tests or the CLI).
prefix="${work}/prefix"
run "install: configure vbucket (defaults)" cmake -S "${src}" -B "${work}/vbucket" \
  "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="${prefix}"
run "install: cmake --install, nothing built" cmake --install "${work}/vbucket"

expect_json=OFF
if compgen -G "${prefix}/share/cmake/vbucket/vbucketJsonTargets.cmake" >/dev/null; then
  expect_json=ON
fi
run "find_package: configure (EXPECT_JSON=${expect_json})" cmake -S "${here}/find_package" \
  -B "${work}/find_package" "${generator[@]}" -DCMAKE_PREFIX_PATH="${prefix}" \
  -DEXPECT_JSON="${expect_json}"
run "find_package: build" cmake --build "${work}/find_package"
run "find_package: run" "${work}/find_package/consumer"

# 4. The same tree with vbucket::compiled and vbucket::run built (only those targets), installed
# again: found as the components `compiled` and `run`, linked by consumer_compiled.
run "install: build vbucket::compiled, vbucket::run" cmake --build "${work}/vbucket" \
  --target vbucket_compiled --target vbucket_run
run "install: cmake --install, vbucket::compiled built" cmake --install "${work}/vbucket"
run "find_package compiled: configure" cmake -S "${here}/find_package" \
  -B "${work}/find_package_compiled" "${generator[@]}" -DCMAKE_PREFIX_PATH="${prefix}" \
  -DEXPECT_JSON="${expect_json}" -DEXPECT_COMPILED=ON
run "find_package compiled: build" cmake --build "${work}/find_package_compiled"
run "find_package compiled: run" "${work}/find_package_compiled/consumer_compiled"

step="done"
echo "=== vbucket consumer tests passed (add_subdirectory, fetchcontent, find_package, compiled, run) ==="
