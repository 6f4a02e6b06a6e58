#!/usr/bin/env bash
# The clean-room install test: the wheel that scripts/build_wheel.sh made, installed and used
# where no compiler, CMake, Ninja, pkg-config, ffmpeg command, header or FFmpeg library of this
# machine is visible (a private mount namespace hides them; scripts/cleanroom.py says how, and
# docs/setup.md). Run as root (or where unprivileged user namespaces are allowed):
#
#   bash scripts/build_wheel.sh && bash scripts/cleanroom_test.sh [WHEEL]
#
# Writes build-wheel/cleanroom/cleanroom.json: the wheel's size, import time, the libav files
# mapped, what the checks ran.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
wheel="${1:-}"
if [[ -z "${wheel}" ]]; then
  wheels=(build-wheel/dist/vbucket-*.whl)
  wheel="${wheels[0]}"
fi
[[ -f "${wheel}" ]] || { echo "cleanroom: no wheel ${wheel} (bash scripts/build_wheel.sh)" >&2; exit 1; }
out=build-wheel/cleanroom
media=build-wheel/media
rm -rf "${out}"
mkdir -p "${out}"

# The test media of the README's block (tests/e2e/make_dataset.sh, the ffmpeg command), made
# here: the clean room has no ffmpeg command.
bash tests/e2e/make_dataset.sh "${media}"

# The probe must see this machine's build tools from outside, or its silence inside proves
# nothing.
if /usr/bin/python3 -I scripts/cleanroom.py probe >"${out}/probe_outside.txt"; then
  echo "cleanroom: the probe finds no build tool even outside the clean room" >&2
  exit 1
fi
echo "cleanroom: outside, the probe sees $(wc -l <"${out}/probe_outside.txt") build-machine items"

# The CMake build's CLI, when built: the wheel's must print the same plan.
config=tests/data/config_360p_example.json
meta=examples/data/sample_meta.csv
if [[ -x build/vbucket ]]; then
  build/vbucket plan --config "${config}" --meta "${meta}" --world 2 --rank 0 --seed 42 \
    --epoch 0 --out "${out}/plan_cmake.jsonl" >/dev/null
fi

ns=(--mount --fork)
if [[ "$(id -u)" -ne 0 ]]; then
  ns+=(--map-root-user)
fi
unshare "${ns[@]}" /usr/bin/python3 -I scripts/cleanroom.py enter "$(realpath "${wheel}")" \
  "$(realpath "${media}")" "$(realpath "${out}")"
