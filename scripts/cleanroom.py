"""The clean-room install test of the vbucket wheel (scripts/cleanroom_test.sh runs it).

    python3 scripts/cleanroom.py probe              # what of a build machine is visible (exit 1 if any)
    unshare --mount --fork python3 scripts/cleanroom.py enter WHEEL MEDIA OUT

``enter`` (root in a private mount namespace) hides the build machine, then runs ``check``
there, with Debian's Python:

- /usr/bin (and so /bin) becomes an empty tmpfs holding copies of python3.11 and sh only: no
  g++, gcc, cc, c++, cmake, ninja, pkg-config, ffmpeg, ld or as; /usr/local (pip's, CUDA's
  tools) and /usr/lib/gcc (cc1plus, collect2, libstdc++'s headers) are empty tmpfs;
- /usr/include is an empty tmpfs: no FFmpeg, C or C++ headers;
- /usr/lib/x86_64-linux-gnu is a tmpfs of symlinks to the original entries except FFmpeg's
  libraries (libavcodec, libavformat, libavutil, libswscale, libswresample, libavfilter,
  libavdevice, libpostproc: runtime and -dev files), static libraries and pkgconfig/: the
  FFmpeg that vbucket decodes with can only come from the wheel.

``check`` first runs ``probe`` (it must find nothing; the same probe run outside, on the build
machine, must find these things: scripts/cleanroom_test.sh checks that it does, so the probe
cannot pass by looking in the wrong place), then in a fresh venv (``--system-site-packages``
for Debian's numpy, pandas and torch; ``pip install --no-index``: no download, no build):
the import time (median of 7, torch not imported), the libav libraries mapped into the process
(/proc/self/maps: every one from the wheel's vbucket.libs/), ``vbucket plan`` (the wheel's CLI
on PATH; its libraries as the dynamic loader resolves them; its plan equal to the CMake build's
when OUT/plan_cmake.jsonl exists), ``python -m vbucket stats``, and the README's "Start in
Python" block (scan, sampler, Loader decoding) on the test media. That last step needs torch,
whose Debian build links FFmpeg's libraries itself: their runtime files (not the -dev ones) come
back for it, and the process must map the wheel's libavcodec beside torch's. Figures go to
OUT/cleanroom.json.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBDIR = "/usr/lib/x86_64-linux-gnu"
FFMPEG_LIBS = ("libavcodec", "libavformat", "libavutil", "libswscale", "libswresample",
               "libavfilter", "libavdevice", "libpostproc")
BUILD_TOOLS = ("g++", "gcc", "c++", "cc", "cpp", "clang", "clang++", "ld", "as", "cmake",
               "ninja", "make", "pkg-config", "ffmpeg", "nvcc")


def _is_ffmpeg(name: str) -> bool:
    return name.startswith(FFMPEG_LIBS)


def probe() -> list:
    """What of a build machine this process can see: compilers and build tools on PATH or in
    /usr/bin, FFmpeg's and C++'s headers, FFmpeg's libraries by file or by soname."""
    found = []
    path = os.environ.get("PATH", "") + os.pathsep + "/usr/bin:/usr/local/bin"
    for tool in BUILD_TOOLS:
        where = shutil.which(tool, path=path)
        if where:
            found.append(f"tool {tool}: {where}")
    for header in ("/usr/include/x86_64-linux-gnu/libavcodec/avcodec.h",
                   "/usr/include/libavcodec/avcodec.h", "/usr/include/stdio.h",
                   "/usr/include/c++"):
        if os.path.exists(header):
            found.append(f"header {header}")
    found += [f"compiler part {p}" for p in glob.glob("/usr/lib/gcc/*/*/cc1plus")]
    if os.path.isdir(LIBDIR):
        found += [f"library {LIBDIR}/{n}" for n in sorted(os.listdir(LIBDIR)) if _is_ffmpeg(n)]
        if os.path.isdir(f"{LIBDIR}/pkgconfig"):
            found.append(f"pkg-config files {LIBDIR}/pkgconfig")
    # By soname, as the dynamic loader finds them (ld.so.cache still names the hidden files).
    for lib in FFMPEG_LIBS[:4]:
        for name in [f"{lib}.so"] + [f"{lib}.so.{v}" for v in range(50, 70)]:
            try:
                ctypes.CDLL(name)
            except OSError:
                continue
            found.append(f"library {name} (loadable by soname)")
    return found


# --- the mount namespace ------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18


def _mount(source, target, fstype, flags, data=None) -> None:
    enc = (lambda s: None if s is None else s.encode())
    if _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags),
                   enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def enter(wheel: str, media: str, out: str) -> int:
    """Hides the build machine in this (private) mount namespace, then runs ``check``."""
    if os.geteuid() != 0:
        print("cleanroom: enter needs root in a private mount namespace "
              "(unshare --mount --fork, or unshare --mount --map-root-user)", file=sys.stderr)
        return 2
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    os.makedirs(out, exist_ok=True)
    stash = tempfile.mkdtemp(prefix="room-", dir=out)  # a tmpfs here, gone with the namespace
    _mount("tmpfs", stash, "tmpfs", 0, "mode=0755")
    os.makedirs(f"{stash}/bin")
    os.makedirs(f"{stash}/lib")
    python = os.path.realpath("/usr/bin/python3")  # python3.11, statically linked libpython
    shutil.copy2(python, f"{stash}/bin/")
    shutil.copy2(os.path.realpath("/usr/bin/sh"), f"{stash}/bin/sh")
    # Libraries: the original directory stays reachable under the stash, the public one becomes
    # symlinks to everything but FFmpeg, static libraries and pkg-config files.
    _mount(LIBDIR, f"{stash}/lib", None, MS_BIND | MS_REC)
    _mount("tmpfs", LIBDIR, "tmpfs", 0, "mode=0755")
    hidden = 0
    for name in os.listdir(f"{stash}/lib"):
        if _is_ffmpeg(name) or name.endswith(".a") or name == "pkgconfig":
            hidden += 1
            continue
        os.symlink(f"{stash}/lib/{name}", f"{LIBDIR}/{name}")
    for d in ("/usr/include", "/usr/local", "/usr/lib/gcc"):
        if os.path.isdir(d):
            _mount("tmpfs", d, "tmpfs", 0, "mode=0755")
    _mount("tmpfs", "/usr/bin", "tmpfs", 0, "mode=0755")
    name = os.path.basename(python)
    shutil.copy2(f"{stash}/bin/{name}", f"/usr/bin/{name}")
    shutil.copy2(f"{stash}/bin/sh", "/usr/bin/sh")
    for alias in ("python3", "python"):
        os.symlink(name, f"/usr/bin/{alias}")
    print(f"cleanroom: /usr/bin holds {sorted(os.listdir('/usr/bin'))}; {hidden} FFmpeg, static "
          f"and pkg-config entries of {LIBDIR} hidden; /usr/include, /usr/local, /usr/lib/gcc "
          "empty", flush=True)
    env = {"PATH": "/usr/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
           "TMPDIR": stash, "VBUCKET_CLEANROOM_LIBS": f"{stash}/lib", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    os.execve("/usr/bin/python3", ["python3", "-I", os.path.abspath(__file__), "check", wheel,
                                   media, out], env)
    return 1  # not reached


# --- the checks, in the clean room --------------------------------------------------------------


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"cleanroom: {' '.join(map(str, cmd))} failed ({r.returncode}):\n"
                         f"{r.stdout}\n{r.stderr}")
    return r


def _readme_block(block_id: str) -> str:
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    m = re.search(r"<!-- doc-test:[^>]*\bid=" + re.escape(block_id) + r"\b[^>]*-->\s*```python\n"
                  r"(.*?)```", text, re.S)
    if not m:
        raise SystemExit(f"cleanroom: README.md has no python block with id={block_id}")
    return m.group(1)


MAPS_CODE = """
import json, sys, time, vbucket
from vbucket import _vbucket
libs = sorted({l.split()[-1] for l in open('/proc/self/maps') if '.so' in l.split()[-1]})
print(json.dumps({'libs': libs, 'ffmpeg': bool(_vbucket.HAS_FFMPEG), 'torch': 'torch' in sys.modules,
                  'file': vbucket.__file__}))
"""
IMPORT_CODE = ("import time; t, c = time.perf_counter(), time.process_time(); import vbucket; "
               "print(time.perf_counter() - t, time.process_time() - c)")
README_PRELUDE = """
import torch
seen = []
def train_step(tensor, thw):
    assert tensor.dtype == torch.bfloat16 and tuple(tensor.shape[1:]) == (3, *thw)
    assert float(tensor.min()) >= -1 and float(tensor.max()) <= 1
    seen.append(tensor.shape[0])
"""


def check(wheel: str, media: str, out: str) -> int:
    found = probe()
    if found:
        print("cleanroom: the build machine is still visible:\n  " + "\n  ".join(found),
              file=sys.stderr)
        return 1
    print("cleanroom: probe: no compiler, build tool, ffmpeg command, header or FFmpeg "
          "library visible", flush=True)
    work = tempfile.mkdtemp(prefix="work-")
    venv = os.path.join(work, "venv")
    _run([sys.executable, "-m", "venv", "--system-site-packages", venv])
    py = os.path.join(venv, "bin", "python")
    _run([py, "-m", "pip", "install", "-q", "--no-index", "--only-binary=:all:", wheel])
    env = dict(os.environ, PATH=f"{venv}/bin:/usr/bin")
    figures = {"wheel": os.path.basename(wheel), "wheel_bytes": os.path.getsize(wheel)}

    # Import time without torch: a fresh interpreter each time, the median of 7.
    # Wall time, and CPU time (what a busy machine does not inflate), in seconds.
    times = [[float(v) for v in _run([py, "-c", IMPORT_CODE], cwd=work, env=env).stdout.split()]
             for _ in range(7)]
    figures["import_s_median"] = statistics.median(t[0] for t in times)
    figures["import_cpu_s_median"] = statistics.median(t[1] for t in times)
    figures["import_s_all"] = [t[0] for t in times]
    figures["loadavg"] = open("/proc/loadavg").read().split()[0]
    m = json.loads(_run([py, "-c", MAPS_CODE], cwd=work, env=env).stdout)
    site = os.path.dirname(os.path.dirname(m["file"]))
    assert m["file"].startswith(venv), m["file"]  # the installed package, not the checkout
    assert not m["torch"], "import vbucket imported torch"
    assert m["ffmpeg"], "the wheel's extension has no FFmpeg adapter"
    av = [p for p in m["libs"] if _is_ffmpeg(os.path.basename(p))]
    assert any("libavcodec" in p for p in av), m["libs"]
    outside = [p for p in av if not p.startswith(os.path.join(site, "vbucket.libs") + "/")]
    assert not outside, f"libav libraries mapped from outside the wheel: {outside}"
    figures["libav_mapped"] = [os.path.relpath(p, site) for p in av]

    # The CLI: on PATH as `vbucket` (the wheel's shim), its binary's libraries as the dynamic
    # loader resolves them (what ldd prints; ldd itself is not in the clean room).
    cli = shutil.which("vbucket", path=env["PATH"])
    assert cli and cli.startswith(venv), cli
    binary = os.path.join(site, "vbucket.scripts", "vbucket")
    trace = _run([binary], env=dict(env, LD_TRACE_LOADED_OBJECTS="1")).stdout
    resolved = re.findall(r"^\s*(\S+) => (\S+)", trace, re.M)
    cli_av = [(n, os.path.normpath(p)) for n, p in resolved if _is_ffmpeg(n)]
    assert cli_av and all(p.startswith(os.path.join(site, "vbucket.libs")) for _, p in cli_av), \
        trace
    assert "not found" not in trace, trace
    plan = os.path.join(work, "plan.jsonl")
    config = os.path.join(ROOT, "tests/data/config_360p_example.json")
    meta = os.path.join(ROOT, "examples/data/sample_meta.csv")
    _run(["vbucket", "plan", "--config", config, "--meta", meta, "--world", "2", "--rank", "0",
          "--seed", "42", "--epoch", "0", "--out", plan], cwd=work, env=env)
    rows = [json.loads(line) for line in open(plan)]
    assert rows and all(r["indices"] for r in rows), rows[:2]
    reference = os.path.join(out, "plan_cmake.jsonl")  # the CMake build's, when given
    if os.path.exists(reference):
        assert open(reference).read() == open(plan).read(), "wheel CLI != CMake build's CLI"
        figures["plan_same_as_cmake_build"] = True
    figures["plan_steps_rank0"] = len(rows)

    stats = _run([py, "-m", "vbucket", "stats", "--config", config, "--meta", meta, "--rule",
                  "opensora-v2", "--rng", "numpy", "--seed", "42"], cwd=work, env=env).stdout
    assert "360p" in stats, stats
    figures["stats_lines"] = len(stats.splitlines())

    # The README's "Start in Python" on the test media: scan, sampler, Loader (decoding). It
    # needs torch, and Debian's libtorch_cpu links FFmpeg's libavcodec, libavformat and
    # libavutil itself: their runtime files (never the -dev ones) come back for this step
    # only. vbucket keeps decoding with the wheel's copies (renamed, so the two never mix):
    # the process's maps must show both, the wheel's libavcodec as well as torch's.
    libs = os.environ["VBUCKET_CLEANROOM_LIBS"]
    for name in os.listdir(libs):
        if _is_ffmpeg(name) and re.search(r"\.so\.\d", name):
            os.symlink(os.path.join(libs, name), os.path.join(LIBDIR, name))
    os.symlink(media, os.path.join(work, "videos"))
    code = README_PRELUDE + _readme_block("python-start") + (
        "\nassert len(seen) > 10 and sum(seen) > 40, seen"
        "\nprint('README start:', len(seen), 'batches,', sum(seen), 'clips decoded')"
        "\nprint(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libavcodec' in l}))\n")
    readme = _run([py, "-c", code], cwd=work, env=env).stdout.strip().splitlines()
    codecs = json.loads(readme[-1].replace("'", '"'))
    assert any(os.path.normpath(p).startswith(os.path.join(site, "vbucket.libs")) for p in codecs), \
        codecs
    figures["readme_start"] = readme[-2]
    figures["readme_libavcodec_mapped"] = codecs

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "cleanroom.json"), "w") as f:
        json.dump(figures, f, indent=1)
    print(json.dumps(figures, indent=1))
    print(f"cleanroom: passed (import {figures['import_s_median']:.3f} s wall, "
          f"{figures['import_cpu_s_median']:.3f} s CPU, medians of 7; load {figures['loadavg']})")
    return 0


def main(argv) -> int:
    if len(argv) >= 1 and argv[0] == "probe":
        found = probe()
        print("\n".join(found) or "nothing")
        return 1 if found else 0
    if len(argv) == 4 and argv[0] in ("enter", "check"):
        return (enter if argv[0] == "enter" else check)(*argv[1:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
