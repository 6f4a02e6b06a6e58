"""Throughput of vbucket.precompute against decode + encode alone (issue 32 target: within
1.1x). Makes N test videos with the ffmpeg command, plans every shape they can draw
(coverage 1), then times, over the same entries batched by shape with the same decoding
threads:

  alone:      decode each batch's clips (vbucket.decode_clip, `workers` threads), stack, encode
  precompute: vbucket.precompute(...) into an empty directory (decode thread + prefetch, the
              encode, an atomic .npy per entry)

The encode is trivial (an 8x8 average pool in torch), so the job's own costs show.

    PYTHONPATH=... python bench/precompute_throughput.py [--videos 24] [--repeats 3]
"""

import argparse
import importlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

import vbucket

pc = importlib.import_module("vbucket.precompute")
CONFIG = {"256px": {"1": (1.0, 4), "17": ((0.5, 0.5), 4), "33": ((0.6, 0.5), 2)},
          "128px": {"1": (1.0, 8), "9": (1.0, 4), "17": (1.0, 4), "33": (1.0, 4)}}


def encode(batch):
    return torch.nn.functional.avg_pool3d(batch.float(), (1, 8, 8))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--videos", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=4)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="vbucket-precompute-bench-")
    try:
        vids = os.path.join(work, "videos")
        os.makedirs(vids)
        for i in range(args.videos):
            size = ["640x360", "360x640", "480x480"][i % 3]
            subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                            f"testsrc2=size={size}:rate=16:duration=4", "-pix_fmt", "yuv420p",
                            "-c:v", "libx264", "-g", "16", os.path.join(vids, f"v{i}.mp4")],
                           check=True)
        df = vbucket.scan(vids, progress=False)
        plan = vbucket.cache_plan(df, CONFIG, coverage=1.0)
        rows = plan["entries"]
        by_shape = {}
        for r in rows:
            by_shape.setdefault((r["T"], r["H"], r["W"]), []).append(r)
        batches = [g[k:k + args.batch_size] for g in by_shape.values()
                   for k in range(0, len(g), args.batch_size)]

        def decode(r):
            return vbucket.decode_clip(r["path"], r["start"], r["T"], r["interval"],
                                       size=(r["H"], r["W"]), layout="cthw")

        def alone():
            t0 = time.perf_counter()
            with ThreadPoolExecutor(max_workers=args.workers) as pool:
                for b in batches:
                    x = torch.from_numpy(np.stack(list(pool.map(decode, b))))
                    out = encode(x)
                    [o.numpy() for o in out]
            return time.perf_counter() - t0

        def job():
            out = os.path.join(work, "out")
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            s = vbucket.precompute(rows, encode, out, batch_size=args.batch_size,
                                   workers=args.workers)
            assert s["encoded"] == len(rows)
            return time.perf_counter() - t0

        alone()  # warm the page cache
        a, j = [], []
        for _ in range(args.repeats):
            a.append(alone())
            j.append(job())
        print(json.dumps({"entries": len(rows), "batches": len(batches),
                          "alone_s": min(a), "precompute_s": min(j),
                          "ratio": min(j) / min(a)}))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
