#!/usr/bin/env bash
# Builds the decoders-only FFmpeg that the wheel carries (scripts/build_wheel.sh runs it):
#
#   bash scripts/build_wheel_ffmpeg.sh     # prints the install prefix as its last line
#
# The same upstream release as Debian's libavcodec-dev (7:5.1.9-0+deb12u1 -> 5.1.9), so that its
# headers, sonames and symbol versions are those the extension and the CLI are compiled against:
# the tarball from Debian's archive, checked against the SHA-256 of Debian's .dsc (and against
# the one pinned below for a release seen here). Configured with --disable-everything and only
# what vbucket's FFmpeg adapter reads (docs/setup.md lists it): video decoders, their parsers,
# the containers, file/http/https, libswscale; no encoder, muxer, filter, device, libavfilter,
# libswresample or program. LGPL 2.1 or later: no --enable-gpl, --enable-version3 or
# --enable-nonfree. TLS through GnuTLS (LGPL, as Debian's FFmpeg), AV1 through libdav1d (BSD).
#
# Cached in build-py/ffmpeg/ (ignored by git): the download, and the prefix with a stamp naming
# the configure line; a second run with the same release and line does nothing. Needs curl,
# xz, make, nasm and the libdav1d/GnuTLS development files (scripts/apt_packages.sh:
# vbucket_wheel_packages). VBUCKET_FFMPEG_JOBS sets make's -j (default 2).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
die() {
  echo "build_wheel_ffmpeg: $*" >&2
  exit 1
}
log() { echo "build_wheel_ffmpeg: $*" >&2; }

# The releases whose tarball was checked here by hand too (the .dsc says the same).
declare -A pinned_sha256=(
  [5.1.9]=d9b593bb2ba93d4b50f74177e0cdcd41747e708596367deed0c30348a71dd176
)

source_version=$(dpkg-query -W -f='${source:Version}' libavcodec-dev 2>/dev/null) ||
  die "libavcodec-dev is not installed (Debian's FFmpeg headers: scripts/setup.sh installs them)"
debian_version=${source_version#*:} # 5.1.9-0+deb12u1
upstream=${debian_version%%-*}      # 5.1.9
[[ "${upstream}" =~ ^[0-9]+(\.[0-9]+)+$ ]] ||
  die "cannot read an upstream release from libavcodec-dev's source version ${source_version}"

root="build-py/ffmpeg"
prefix="${PWD}/${root}/prefix-${upstream}"
# shellcheck disable=SC2054  # the commas are configure's lists
config=(
  --prefix="${prefix}"
  --enable-shared --disable-static --disable-programs --disable-doc --disable-debug
  --disable-everything --disable-autodetect
  --disable-avdevice --disable-avfilter --disable-swresample --disable-postproc
  # --disable-autodetect also turns threads off: frame and slice threading need them.
  --enable-pthreads
  # PNG (inflate), compressed MP4 headers, HTTP gzip; the system's libz, which manylinux allows.
  --enable-zlib
  --enable-gnutls   # https:// and the tls protocol
  --enable-libdav1d # AV1 (FFmpeg 5.1's own av1 decoder decodes only through hardware)
  --enable-decoder=h264,hevc,vp8,vp9,libdav1d,mpeg4,mpeg1video,mpeg2video,mjpeg,png,webp,gif
  --enable-decoder=prores,rawvideo
  # Audio parsers: a stream's parameters without decoding it, so probing an MPEG-TS with audio
  # stops early.
  --enable-parser=h264,hevc,vp8,vp9,av1,mpeg4video,mpegvideo,mjpeg,png,webp,gif
  --enable-parser=aac,ac3,mpegaudio,opus
  --enable-demuxer=mov,matroska,avi,mpegts,mpegps,mpegvideo,h264,hevc,ivf,flv,hls,gif
  --enable-demuxer=image2,image_png_pipe,image_jpeg_pipe,image_webp_pipe,yuv4mpegpipe
  --enable-protocol=file,http,https,tcp,tls
)
stamp="${prefix}/vbucket-ffmpeg-build.txt"
line="FFmpeg ${upstream} configure ${config[*]}"
if [[ -f "${stamp}" ]] && [[ "$(head -n 1 "${stamp}")" == "${line}" ]]; then
  log "cached: ${prefix}"
  echo "${prefix}"
  exit 0
fi

for tool in curl xz make nasm pkg-config; do
  command -v "${tool}" >/dev/null || die "${tool} is needed (scripts/apt_packages.sh: vbucket_wheel_packages)"
done
for module in dav1d gnutls; do
  pkg-config --exists "${module}" ||
    die "pkg-config finds no ${module} (Debian: libdav1d-dev libgnutls28-dev)"
done

# The source, from Debian's archive, checked against the .dsc of the same pool directory.
mkdir -p "${root}"
pool=https://deb.debian.org/debian/pool/main/f/ffmpeg
tarball="ffmpeg_${upstream}.orig.tar.xz"
dsc="ffmpeg_${debian_version}.dsc"
fetch() { # fetch NAME: into ${root}/NAME, unless there
  [[ -f "${root}/$1" ]] && return
  log "downloading ${pool}/$1"
  curl -fsSL --retry 3 -o "${root}/$1.part" "${pool}/$1" ||
    die "cannot download ${pool}/$1 (is deb.debian.org reachable? the release still in the pool?)"
  mv "${root}/$1.part" "${root}/$1"
}
fetch "${dsc}"
fetch "${tarball}"
expected=$(awk -v f="${tarball}" '/^Checksums-Sha256:/ {s = 1; next} /^[^ ]/ {s = 0}
                                  s && $3 == f {print $1}' "${root}/${dsc}")
[[ -n "${expected}" ]] || die "${dsc} lists no SHA-256 for ${tarball}"
if [[ -n "${pinned_sha256[${upstream}]:-}" && "${pinned_sha256[${upstream}]}" != "${expected}" ]]; then
  die "${dsc} gives ${tarball} the SHA-256 ${expected}, not the pinned ${pinned_sha256[${upstream}]}"
fi
actual=$(sha256sum "${root}/${tarball}" | cut -d' ' -f1)
if [[ "${actual}" != "${expected}" ]]; then
  rm -f "${root}/${tarball}"
  die "${tarball}: SHA-256 ${actual}, Debian's .dsc says ${expected} (removed; run again)"
fi

src="${root}/ffmpeg-${upstream}"
build="${root}/build-${upstream}"
rm -rf "${src}" "${build}" "${prefix}"
tar -xJf "${root}/${tarball}" -C "${root}"
[[ -x "${src}/configure" ]] || die "${tarball} holds no ffmpeg-${upstream}/configure"
mkdir -p "${build}"
started=${SECONDS}
top=${PWD}
log "configuring FFmpeg ${upstream} (decoders only) in ${build}"
(cd "${build}" && nice -n 10 "${top}/${src}/configure" "${config[@]}" >configure.log 2>&1) ||
  die "configure failed: ${build}/configure.log (tail: $(tail -n 3 "${build}/configure.log"))"

# configure ignores a component name it does not know: every name asked for must be on.
components="${build}/config_components.h"
missing=()
for arg in "${config[@]}"; do
  [[ "${arg}" =~ ^--enable-(decoder|parser|demuxer|protocol)=(.*)$ ]] || continue
  kind=${BASH_REMATCH[1]^^}
  IFS=, read -r -a names <<<"${BASH_REMATCH[2]}"
  for name in "${names[@]}"; do
    grep -q "^#define CONFIG_${name^^}_${kind} 1$" "${components}" || missing+=("${name} ${kind,,}")
  done
done
((${#missing[@]} == 0)) || die "configure did not enable: ${missing[*]} (${build}/configure.log)"
grep -q '^#define HAVE_PTHREADS 1$' "${build}/config.h" || die "configure left threads off"
grep -q '^License: LGPL version 2.1 or later$' "${build}/configure.log" ||
  die "the build is not LGPL 2.1 or later: $(grep '^License:' "${build}/configure.log")"

log "building with make -j${VBUCKET_FFMPEG_JOBS:-2} (nice)"
nice -n 10 make -C "${build}" -j"${VBUCKET_FFMPEG_JOBS:-2}" >"${build}/make.log" 2>&1 ||
  die "make failed: ${build}/make.log (tail: $(tail -n 5 "${build}/make.log"))"
make -C "${build}" install >"${build}/install.log" 2>&1 || die "make install failed: ${build}/install.log"

# What the wheel says about the FFmpeg it carries (LGPL: the license and where the source is).
mkdir -p "${prefix}/licenses"
cp "${src}/COPYING.LGPLv2.1" "${src}/LICENSE.md" "${prefix}/licenses/"
{
  echo "FFmpeg ${upstream} (https://ffmpeg.org), LGPL version 2.1 or later (COPYING.LGPLv2.1)."
  echo "Source: ${pool}/${tarball}"
  echo "SHA-256: ${actual} (as Debian's ${dsc} lists it); unmodified."
  echo "Built by vbucket's scripts/build_wheel_ffmpeg.sh with: configure ${config[*]:1}"
} >"${prefix}/licenses/FFMPEG_BUILD.txt"
echo "${line}" >"${stamp}"
log "built in $((SECONDS - started)) s: ${prefix}"
echo "${prefix}"
