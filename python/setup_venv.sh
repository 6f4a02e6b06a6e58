#!/usr/bin/env bash
# Makes .venv (Debian's python3 with --system-site-packages, so Debian's python3-torch,
# python3-numpy and python3-pandas are used) and installs the vbucket Python package into it
# from this checkout. Installs the Debian packages it needs when missing. Idempotent: the venv
# is kept, and the extension builds incrementally in build-py/.
#
#   bash python/setup_venv.sh        # scripts/setup.sh and scripts/test.sh call it
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Debian's interpreter, never a pyenv or conda python3 that lacks the Debian packages.
python=/usr/bin/python3
packages=(python3-venv python3-dev python3-numpy python3-pandas python3-torch
  python3-pytest python3-matplotlib python3-av python3-tqdm nlohmann-json3-dev libfmt-dev cmake
  ninja-build g++)

# shellcheck source=scripts/apt_packages.sh
source scripts/apt_packages.sh
status=0
install_missing python "${packages[@]}" || status=$?
if ((status != 0 && status != 2)); then
  exit "${status}"
fi
if ((status == 2)) && [[ ! -x "${python}" ]]; then
  python="$(command -v python3)"
  echo "python: not Debian; using ${python} (needs numpy, pandas, torch, pytest)" >&2
fi

if [[ ! -x .venv/bin/python ]]; then
  echo "python: creating .venv with ${python} --system-site-packages"
  "${python}" -m venv --system-site-packages .venv
fi
pip=(.venv/bin/python -m pip --disable-pip-version-check)
# The build backend (into the venv, not the system: Debian's pip refuses system installs), so
# the package builds without an isolated environment and reuses build-py/ between runs.
if ! .venv/bin/python -c "import scikit_build_core, nanobind" >/dev/null 2>&1; then
  "${pip[@]}" install -q "scikit-build-core>=0.8" "nanobind>=2.0"
fi
# pyarrow is optional (parquet metadata); its tests skip without it. Debian's numpy is 1.x,
# which pyarrow 17 and later refuse.
if ! .venv/bin/python -c "import pyarrow" >/dev/null 2>&1; then
  pyarrow="pyarrow"
  if .venv/bin/python -c "import numpy, sys; sys.exit(int(numpy.__version__.split('.')[0]) >= 2)"; then
    pyarrow="pyarrow<17"
  fi
  "${pip[@]}" install -q "${pyarrow}" || echo "python: pyarrow not installed (optional)" >&2
fi
# The loaders video trainers use, for python/tests/test_frameworks.py: torchdata's
# StatefulDataLoader and HF Accelerate. Debian's torch is 1.13: torchdata 0.8 (the first with
# StatefulDataLoader) pins torch 2.4, so it goes in without its dependencies (its
# StatefulDataLoader runs on 1.13; the test proves it); Accelerate 0.34 is the last release for
# torch < 2 (it brings huggingface_hub, safetensors, psutil and pyyaml).
if ! .venv/bin/python -c "import torchdata.stateful_dataloader" >/dev/null 2>&1; then
  if .venv/bin/python -c "import torch, sys; sys.exit(int(torch.__version__.split('.')[0]) >= 2)"; then
    "${pip[@]}" install -q --no-deps "torchdata==0.8.0"
  else
    "${pip[@]}" install -q "torchdata>=0.8"
  fi
fi
if ! .venv/bin/python -c "import accelerate" >/dev/null 2>&1; then
  accelerate="accelerate"
  if .venv/bin/python -c "import torch, sys; sys.exit(int(torch.__version__.split('.')[0]) >= 2)"; then
    accelerate="accelerate==0.34.2"
  fi
  "${pip[@]}" install -q "${accelerate}"
fi
# webdataset: python/tests/test_scan_shards.py checks shards its own TarWriter writes (pax
# headers for non-ASCII and long names).
if ! .venv/bin/python -c "import webdataset" >/dev/null 2>&1; then
  "${pip[@]}" install -q "webdataset" || echo "python: webdataset not installed (its test skips)" >&2
fi
"${pip[@]}" install -q --no-build-isolation .
echo "python: vbucket $(.venv/bin/python -c 'import vbucket; print(vbucket.__version__)') installed in .venv"
