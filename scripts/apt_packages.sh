#!/usr/bin/env bash
# Sourced by scripts/setup.sh, python/setup_venv.sh and .ci/run: the one way they install Debian
# packages, and the lists of what each installs (docs/setup.md explains the split).
#
# vbucket_build_packages: building and using vbucket (the core, the CLI, every adapter but CUDA).
# vbucket_test_packages: what scripts/test.sh needs beyond that (doctest suites, the benchmarks it
#   builds, the test media generated with the ffmpeg command, the HTTP tests' nginx). setup.sh
#   installs them: the test command is the user's second command and must pass after set-up.
# vbucket_ci_packages: what only .ci/run uses (format check, fuzzers and sanitizer runtimes, the
#   LibTorch example, Chromium for the report's browser test); never installed by setup.sh.
# The Python package's own list (Debian's python3-* packages) is in python/setup_venv.sh.
# shellcheck disable=SC2034  # used by the scripts that source this file
vbucket_build_packages=(
  g++ cmake ninja-build pkg-config git
  nlohmann-json3-dev libfmt-dev libeigen3-dev
  libavformat-dev libavcodec-dev libswscale-dev libavutil-dev
  libopenmpi-dev openmpi-bin
)
# shellcheck disable=SC2034
vbucket_test_packages=(doctest-dev libbenchmark-dev ffmpeg nginx)
# vbucket_wheel_packages: what scripts/build_wheel.sh needs beyond the build packages, to build
#   the decoders-only FFmpeg the wheel carries (scripts/build_wheel_ffmpeg.sh; it installs them).
# shellcheck disable=SC2034
vbucket_wheel_packages=(curl xz-utils make nasm libdav1d-dev libgnutls28-dev)
# shellcheck disable=SC2034
vbucket_ci_packages=(clang clang-format libclang-rt-14-dev libfuzzer-14-dev libtorch-dev chromium)
#
# install_missing TAG PACKAGE...: installs those of the packages that are not installed yet
# (apt-get update first; as root, else through sudo), printing "TAG: ..." lines. Returns 0 when
# all are installed, 2 on a machine without dpkg-query (not Debian/Ubuntu; nothing is done),
# and apt-get's status when it fails. Callers check the status themselves:
#
#   status=0
#   install_missing setup "${packages[@]}" || status=$?

install_missing() {
  local tag=$1
  shift
  if ! command -v dpkg-query >/dev/null 2>&1; then
    return 2
  fi
  local missing=() pkg
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("${pkg}")
    fi
  done
  if ((${#missing[@]} == 0)); then
    echo "${tag}: all packages already installed"
    return 0
  fi
  echo "${tag}: installing ${missing[*]}"
  local sudo=()
  if [[ "$(id -u)" -ne 0 ]]; then
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update || return
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
}
