#!/usr/bin/env bash
# Sourced by scripts/setup.sh, python/setup_venv.sh and .ci/run: the one way they install Debian
# packages.
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
