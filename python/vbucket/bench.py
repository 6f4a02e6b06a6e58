"""``python -m vbucket.bench``: one epoch's plan of 1 M and 10 M samples from a DataFrame through
the sampler, against the same work in C++ (``vbucket_bench --benchmark_filter=plan/epoch``).

The samples are bench/synthetic.hpp's web-video crawl, generated here with numpy bit for bit
(the same SplitMix64 draws, finalised by the library's own mix64), so both sides plan the same epoch: Open-Sora 2.0's rule, fast
draws, tests/data/config_opensora_v2.json, seed 1234, world 64, a new epoch each repetition.

Reported per size:
  convert   DataFrame -> the sampler's table (once per run, not per epoch)
  plan      set_epoch(e) + len(): assignment, plan and dealing (the C++ work, GIL released);
            the fastest of --repetitions epochs
  C++       vbucket_bench's plan/epoch real time per epoch, the fastest of --repetitions runs
            (when the binary is found)
  overhead  plan / C++ - 1
  iterate   every batch of the epoch yielded in Python (world 1), as lists of ints and as
            Open-Sora's "idx-T-H-W" strings

    python -m vbucket.bench [--sizes 1000000 10000000] [--bench build/bench/vbucket_bench]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

GAMMA = np.uint64(0x9E3779B97F4A7C15)  # SplitMix64's increment (the finaliser is _mix)

# bench/synthetic.hpp's tables: (width, height, weight per mille)
VIDEO_SIZES = [(1920, 1080, 250), (1280, 720, 200), (854, 480, 60), (640, 480, 30),
               (640, 360, 90), (426, 240, 20), (3840, 2160, 40), (2560, 1440, 20),
               (1920, 800, 20), (1440, 1080, 20), (1080, 1920, 70), (720, 1280, 50),
               (480, 854, 10), (2160, 3840, 10), (1080, 1080, 15), (720, 720, 10),
               (4096, 2160, 10)]
PHOTO_SIZES = [(4032, 3024, 250), (3024, 4032, 200), (1024, 1024, 200), (2048, 1536, 100),
               (800, 600, 100), (512, 512, 100), (1200, 1800, 50)]
FRAME_RATES = [23.976, 24.0, 25.0, 29.97, 30.0, 50.0, 60.0]
FRAME_RATE_WEIGHTS = [100, 100, 150, 300, 200, 50, 100]
ODD_WEIGHT = 75
IMAGE_PERMILLE = 150

SEED = 1234
WORLD = 64


def _mix(z) -> np.ndarray:
    """SplitMix64's finaliser of every element: the library's own (``_vbucket.mix64``)."""
    from . import _vbucket

    a = np.asarray(z, dtype=np.uint64)
    return _vbucket.mix64(np.ascontiguousarray(a.reshape(-1))).reshape(a.shape)


def _pick(sizes, ticket):
    cum = np.cumsum([s[2] for s in sizes])
    k = np.minimum(np.searchsorted(cum, ticket, side="right"), len(sizes) - 1)
    arr = np.array([(s[0], s[1]) for s in sizes], dtype=np.int64)
    return arr[k, 0], arr[k, 1]


def synthetic(n: int, seed: int = 0) -> dict:
    """bench/synthetic.hpp's `synthetic_table(n, seed)` as numpy columns, bit for bit."""
    with np.errstate(over="ignore"):
        i = np.arange(n, dtype=np.uint64)
        state = _mix(_mix(np.uint64(seed) ^ np.uint64(0x243F6A8885A308D3)) ^ i)

        def draw(d):
            return _mix(state + np.uint64(d) * GAMMA)

        def below(d, m):
            return ((draw(d) >> np.uint64(32)) * np.uint64(m)) >> np.uint64(32)

        def unit(d):
            return (draw(d) >> np.uint64(11)).astype(np.float64) * 2.0**-53

        image = below(1, 1000) < IMAGE_PERMILLE
        ticket = below(2, 1000).astype(np.int64)
        # images: 60 % video-sized (draw 3 below 925), 40 % photo-sized (draw 3 below 1000)
        iw_v, ih_v = _pick(VIDEO_SIZES, below(3, 925).astype(np.int64))
        iw_p, ih_p = _pick(PHOTO_SIZES, below(3, 1000).astype(np.int64))
        video_like = ticket < 600
        # videos: a listed size (ticket), or an odd one from draws 3 and 4
        vw, vh = _pick(VIDEO_SIZES, ticket)
        odd = ticket >= 1000 - ODD_WEIGHT
        ow = (96 + below(3, 4000).astype(np.int64)) & ~np.int64(1)
        aspect = 0.3 + 2.7 * unit(4)
        oh = np.maximum((ow.astype(np.float64) * aspect).astype(np.int64) & ~np.int64(1), 2)
        fps_draw = np.where(odd, 5, 3)
        u_draw = fps_draw + 1
        fps_ticket = np.where(odd, below(5, 1000), below(3, 1000)).astype(np.int64)
        f = np.minimum(np.searchsorted(np.cumsum(FRAME_RATE_WEIGHTS), fps_ticket, side="right"),
                       len(FRAME_RATES) - 1)
        fps = np.array(FRAME_RATES)[f]
        u = np.where(u_draw == 6, unit(6), unit(4))
        seconds = 2.0 + 58.0 * u * u
        frames = (seconds * fps + 0.5).astype(np.int64)

    width = np.where(image, np.where(video_like, iw_v, iw_p), np.where(odd, ow, vw))
    height = np.where(image, np.where(video_like, ih_v, ih_p), np.where(odd, oh, vh))
    return {
        "num_frames": np.where(image, 1, frames),
        "height": height,
        "width": width,
        "fps": np.where(image, np.nan, fps),
    }


def _repo_root() -> pathlib.Path:
    """The checkout with tests/data/ (the config the C++ bench uses): the current directory or
    one above it, else the one this file lies in (an editable install)."""
    here = pathlib.Path.cwd().resolve()
    for d in (here, *here.parents, pathlib.Path(__file__).resolve().parents[2]):
        if (d / "tests" / "data" / "config_opensora_v2.json").is_file():
            return d
    raise SystemExit("python -m vbucket.bench: run it inside vbucket's checkout (needs "
                     "tests/data/config_opensora_v2.json)")


def _find_bench(explicit):
    if explicit:
        return explicit
    if os.environ.get("VBUCKET_BENCH"):
        return os.environ["VBUCKET_BENCH"]
    root = _repo_root()
    found = [p for p in (root / "build" / "bench" / "vbucket_bench",
                         root / "build-py" / "bench" / "bench" / "vbucket_bench") if p.is_file()]
    return str(max(found, key=lambda p: p.stat().st_mtime)) if found else None


def _cpp_epoch_seconds(bench: str, n: int, repetitions: int):
    """The fastest of `repetitions` runs of vbucket_bench's plan/epoch/n, in seconds."""
    out = subprocess.run(
        [bench, f"--benchmark_filter=^plan/epoch/{n}/", "--benchmark_format=json",
         f"--benchmark_repetitions={repetitions}"],
        capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    times = []
    for b in data["benchmarks"]:
        if b.get("run_type", "iteration") == "iteration" and b["name"].startswith("plan/epoch"):
            scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
            times.append(b["real_time"] * scale)
    return (min(times), None) if times else (None, None)


def run(sizes, bench, repetitions: int = 3) -> list:
    import pandas as pd

    import vbucket
    from vbucket.sampler import VariableVideoBatchSampler

    root = _repo_root()
    config = vbucket.BucketConfig(root / "tests" / "data" / "config_opensora_v2.json")
    rows = []
    for n in sizes:
        df = pd.DataFrame(synthetic(n))
        t0 = time.perf_counter()
        s = VariableVideoBatchSampler(df, config, num_replicas=WORLD, rank=0, seed=SEED,
                                      rng="fast", output="indices")
        convert = time.perf_counter() - t0
        plan = []
        for e in range(repetitions):
            t0 = time.perf_counter()
            s.set_epoch(e)
            len(s)
            plan.append(time.perf_counter() - t0)
        one = VariableVideoBatchSampler(df, config, num_replicas=1, rank=0, seed=SEED,
                                        rng="fast", output="indices")
        len(one)  # planned outside the timing: this times the iteration alone
        t0 = time.perf_counter()
        count = sum(1 for _ in one)
        iterate_ints = time.perf_counter() - t0
        one.set_epoch(0)
        one.output, one._strings = "opensora", True
        len(one)
        t0 = time.perf_counter()
        sum(1 for _ in one)
        iterate_strings = time.perf_counter() - t0
        cpp = _cpp_epoch_seconds(bench, n, repetitions)[0] if bench else None
        rows.append({
            "samples": n, "batches": count, "convert_s": convert,
            "plan_s": min(plan), "cpp_s": cpp,
            "overhead": None if cpp is None else min(plan) / cpp - 1.0,
            "iterate_ints_s": iterate_ints, "iterate_strings_s": iterate_strings,
        })
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m vbucket.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    p.add_argument("--bench", help="vbucket_bench binary (default: $VBUCKET_BENCH, build/bench)")
    p.add_argument("--repetitions", type=int, default=5)
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    a = p.parse_args(argv)
    bench = _find_bench(a.bench)
    rows = run(a.sizes, bench, a.repetitions)
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"vbucket {'(C++: ' + bench + ')' if bench else '(no vbucket_bench: C++ column empty)'}")
    print(f"{'samples':>10} {'batches':>9} {'convert':>9} {'plan':>9} {'C++':>9} {'overhead':>9}"
          f" {'iter ints':>10} {'iter strs':>10}")
    for r in rows:
        cpp = f"{r['cpp_s']:.3f}s" if r["cpp_s"] is not None else "-"
        over = f"{100 * r['overhead']:+.1f}%" if r["overhead"] is not None else "-"
        print(f"{r['samples']:>10} {r['batches']:>9} {r['convert_s']:>8.3f}s {r['plan_s']:>8.3f}s"
              f" {cpp:>9} {over:>9} {r['iterate_ints_s']:>9.3f}s {r['iterate_strings_s']:>9.3f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
