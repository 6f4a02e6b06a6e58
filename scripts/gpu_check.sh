#!/usr/bin/env bash
# The NVDEC decoder's checks on a GPU (vbucket::ffmpeg_cuda, docs/ffmpeg.md "NVDEC"): its GPU
# tests (tests/cuda/nvdec_gpu.cpp, the CUDA adapter's tests) and the NVDEC-vs-CPU benchmark
# (bench/cuda/nvdec.cpp), for a session that is lent a GPU machine.
#
# The GPU machine reaches nothing outside and may lack FFmpeg's libraries, the ffmpeg command
# and the test frameworks, so the work is split:
#
#   bash scripts/gpu_check.sh prepare   # here (nvcc, FFmpeg dev packages, ffmpeg, doctest):
#                                       # builds the test and benchmark binaries (Release,
#                                       # sm_80 + sm_90), makes the media, and packs them with
#                                       # the shared libraries they load (but the driver's) into
#                                       # .gpu_bundle/bundle.tar.xz (git-ignored: carry it)
#   bash scripts/gpu_check.sh run       # there: unpacks the bundle, runs the tests and the
#                                       # benchmark, writes the logs to $OUT (or .gpu_bundle/out)
#
# With the device tool:  run(command="bash scripts/gpu_check.sh run", carry=[".gpu_bundle"],
# timeout_s=480; GPU_CHECK_CLIPS=60 for a shorter benchmark). `run` without a bundle builds from source instead, if the machine has the
# toolchain and FFmpeg's dev packages (`bash scripts/gpu_check.sh build-and-run`).
# Exit status: 0 when every test passed (or was skipped) and the benchmark ran.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle_dir="${root}/.gpu_bundle"
mode="${1:-run}"

nvcc_path() {
  command -v nvcc || { [[ -x /usr/local/cuda/bin/nvcc ]] && echo /usr/local/cuda/bin/nvcc; } || true
}

configure_and_build() {  # configure_and_build BUILD_DIR
  local build="$1" nvcc
  nvcc="$(nvcc_path)"
  [[ -n "${nvcc}" ]] || { echo "gpu_check: no nvcc" >&2; exit 1; }
  cmake -S "${root}" -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DVBUCKET_CUDA=ON -DCMAKE_CUDA_COMPILER="${nvcc}" -DCMAKE_CUDA_ARCHITECTURES="80;90" \
    -DVBUCKET_FFMPEG=ON -DVBUCKET_BUILD_TESTS=ON -DVBUCKET_BUILD_BENCH=ON \
    -DVBUCKET_BUILD_TOOLS=OFF -DVBUCKET_BUILD_EXAMPLES=OFF -DVBUCKET_WERROR=OFF >/dev/null
  cmake --build "${build}" --parallel "${GPU_CHECK_JOBS:-$(nproc)}" --target \
    vbucket_nvdec_tests vbucket_nvdec_cpu_tests vbucket_cuda_tests vbucket_nvdec_bench
}

make_bench_media() {  # make_bench_media DIR: 10 s clips of ffmpeg's testsrc2, GOP 60
  local dir="$1"
  mkdir -p "${dir}"
  local ff=(ffmpeg -nostdin -v error -y)
  "${ff[@]}" -f lavfi -i testsrc2=size=1280x720:rate=30:duration=10 -c:v libx264 -preset veryfast \
    -crf 30 -g 60 -pix_fmt yuv420p "${dir}/h264_720p_gop60.mp4"
  local encoders
  encoders="$(ffmpeg -hide_banner -encoders 2>/dev/null || true)"
  if grep -q " libx265 " <<<"${encoders}"; then
    "${ff[@]}" -f lavfi -i testsrc2=size=1920x1080:rate=30:duration=6 -c:v libx265 -preset \
      ultrafast -crf 32 -x265-params keyint=60:log-level=error -pix_fmt yuv420p \
      "${dir}/hevc_1080p_gop60.mp4"
  fi
}

prepare() {
  local build="${root}/build-gpu-check" stage
  configure_and_build "${build}"
  stage="$(mktemp -d)"
  mkdir -p "${stage}/bin" "${stage}/lib" "${stage}/media" "${stage}/bench_media"
  cp "${build}/tests/cuda/vbucket_nvdec_tests" "${build}/tests/cuda/vbucket_cuda_tests" \
    "${build}/tests/cuda/vbucket_nvdec_cpu_tests" "${build}/bench/cuda/vbucket_nvdec_bench" \
    "${stage}/bin/"
  strip "${stage}"/bin/* || true
  # The test media (tests/ffmpeg/make_media.sh), only the files the GPU tests read.
  local media_all="${build}/media_all"
  bash "${root}/tests/ffmpeg/make_media.sh" "${media_all}" >/dev/null
  for f in h264_320x240_24fps.mp4 h264_160x120_25fps_rotate90.mp4 h264_180x120_sar32x27.mp4 \
    h264_64x48_25fps_long.mp4 h264_64x48_25fps_long.mkv h264_160x120_25fps.mp4 \
    vp9_160x90_30fps.webm image_100x60.png bad_text.mp4 bad_zero_bytes.mp4 \
    bad_header_only.mp4; do
    if [[ -e "${media_all}/${f}" ]]; then cp "${media_all}/${f}" "${stage}/media/"; fi
  done
  make_bench_media "${stage}/bench_media"
  # Every shared library the binaries load, but the C library's and the driver's (libcuda,
  # libnvcuvid: the GPU machine's own must be used).
  ldd "${stage}"/bin/* | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
    case "$(basename "${lib}")" in
      libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux* | \
        libcuda.so.* | libnvcuvid.so.* | libnvidia-*) ;;
      *) cp -L "${lib}" "${stage}/lib/" ;;
    esac
  done
  mkdir -p "${bundle_dir}"
  grep -qx '/.gpu_bundle/' "${root}/.git/info/exclude" 2>/dev/null ||
    echo '/.gpu_bundle/' >>"${root}/.git/info/exclude"
  tar -C "${stage}" -cf - bin lib media bench_media | xz -T0 -9 >"${bundle_dir}/bundle.tar.xz"
  rm -rf "${stage}"
  echo "gpu_check: ${bundle_dir}/bundle.tar.xz, $(du -h "${bundle_dir}/bundle.tar.xz" | cut -f1)" \
    "(the working tree and the carried paths travel within 64 MiB together)"
}

# Runs the binaries in BIN with the libraries in LIB (may be empty), media in MEDIA, bench
# media in BENCH; logs into OUT_DIR.
run_checks() {
  local bin="$1" lib="$2" media="$3" bench="$4" out="$5" status=0
  mkdir -p "${out}"
  {
    echo "== machine"
    nvidia-smi -L || echo "no nvidia-smi"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
    ldconfig -p | grep -E "libcuda\.so|libnvcuvid" || echo "no libcuda/libnvcuvid in ldconfig"
  } >"${out}/machine.txt" 2>&1
  cat "${out}/machine.txt"
  export LD_LIBRARY_PATH="${lib:+${lib}:}${LD_LIBRARY_PATH:-}"
  export VBUCKET_NVDEC_MEDIA_DIR="${media}"
  for t in vbucket_cuda_tests vbucket_nvdec_tests; do
    echo "== ${t}"
    local rc=0
    "${bin}/${t}" --success=false >"${out}/${t}.txt" 2>&1 || rc=$?
    tail -n 40 "${out}/${t}.txt"
    if [[ ${rc} -eq 77 ]]; then
      echo "gpu_check: ${t} skipped (no device)"
    elif [[ ${rc} -ne 0 ]]; then
      echo "gpu_check: ${t} FAILED (exit ${rc})"
      status=1
    fi
  done
  local videos=("${bench}"/*.mp4)
  if [[ -e "${videos[0]}" ]]; then
    for threads in 1 4; do
      for geometry in "256 256" "192 336"; do
        read -r h w <<<"${geometry}"
        echo "== vbucket_nvdec_bench --threads ${threads} ${h}x${w}"
        "${bin}/vbucket_nvdec_bench" --clips "${GPU_CHECK_CLIPS:-100}" --frames 33 --interval 2 \
          --height "${h}" --width "${w}" --threads "${threads}" "${videos[@]}" 2>&1 |
          tee -a "${out}/bench.txt" || status=1
      done
    done
  else
    echo "gpu_check: no benchmark media in ${bench}" | tee -a "${out}/bench.txt"
  fi
  echo "gpu_check: logs in ${out}"
  return "${status}"
}

case "${mode}" in
  prepare)
    prepare
    ;;
  run)
    out="${OUT:-${bundle_dir}/out}"
    if [[ -f "${bundle_dir}/bundle.tar.xz" ]]; then
      work="$(mktemp -d)"
      if command -v xz >/dev/null; then
        tar -C "${work}" -xJf "${bundle_dir}/bundle.tar.xz"
      else  # no xz there: Python's lzma
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
          "${bundle_dir}/bundle.tar.xz" "${work}"
      fi
      chmod +x "${work}"/bin/*
      run_checks "${work}/bin" "${work}/lib" "${work}/media" "${work}/bench_media" "${out}"
    else
      echo "gpu_check: no ${bundle_dir}/bundle.tar.xz: building here"
      exec bash "$0" build-and-run
    fi
    ;;
  build-and-run)
    build="${root}/build-gpu-check"
    configure_and_build "${build}"
    media="${build}/media_all"
    [[ -d "${media}" ]] || bash "${root}/tests/ffmpeg/make_media.sh" "${media}" >/dev/null
    make_bench_media "${build}/bench_media"
    mkdir -p "${build}/gpu_bin"
    for b in tests/cuda/vbucket_nvdec_tests tests/cuda/vbucket_cuda_tests \
      bench/cuda/vbucket_nvdec_bench; do
      ln -sf "${build}/${b}" "${build}/gpu_bin/"
    done
    status=0
    run_checks "${build}/gpu_bin" "" "${media}" "${build}/bench_media" "${OUT:-${build}/out}" ||
      status=$?
    exit "${status}"
    ;;
  *)
    echo "usage: gpu_check.sh prepare | run | build-and-run" >&2
    exit 2
    ;;
esac
