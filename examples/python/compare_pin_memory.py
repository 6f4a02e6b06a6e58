"""pin_memory=True on a GPU: vbucket's pinned staging ring against torch's pin_memory().

(a) vbucket.Loader(pin_memory=True) built with the CUDA adapter (``vbucket.HAS_CUDA``): the
    workers decode and normalise straight into page-locked slots of vbucket's staging ring, and
    each batch is copied to the GPU on the loader's stream;
(b) the same Loader with the adapter's path switched off: batches come out in ordinary host
    memory and go to the GPU as ``tensor.pin_memory().to(device, non_blocking=True)`` — what
    torch's DataLoader(pin_memory=True) does (one more host copy, on the trainer's thread).

Same clips, same sampler batches, same dtype; the script checks the device tensors agree bit
for bit. The trainer is simulated by ``--step-ms`` of work per batch (a sleep, as a GPU step
leaves the CPU free), so that with enough workers batches are ready when asked for; it prints,
for each path (median of ``--repeats`` alternating runs): the milliseconds the trainer's thread
spends in ``next()`` per batch (the median over the epoch's batches after the first two: what
the hand-over costs the training loop), samples/s over the same batches, and the ratios.

    python3 examples/python/compare_pin_memory.py --dir /tmp/pinclips --clips 16 \\
        --size 640x360 --dtype float32 --workers 8 --repeats 3

The clips are generated with the ffmpeg command when ``--dir`` holds none (testsrc2, H.264).
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import time

import torch

import vbucket

from clips import make_clips  # this folder's clip generator
from vbucket import _vbucket


def run(meta, config, args, adapter: bool):
    """One epoch; returns (samples/s, median trainer seconds in next() per batch, checksums),
    both over the batches after the first two (pinned buffers are allocated at the start)."""
    saved = getattr(_vbucket, "HAS_CUDA", False)
    _vbucket.HAS_CUDA = saved and adapter  # (b): the Loader then takes torch's path
    try:
        sampler = vbucket.VariableVideoBatchSampler(meta, config, num_replicas=1, rank=0, seed=3)
        loader = vbucket.Loader(sampler, meta["path"], workers=args.workers, prefetch=4,
                                dtype=args.dtype, pin_memory=True)
    finally:
        _vbucket.HAS_CUDA = saved
    assert (loader._stream is not None) == adapter
    torch.cuda.synchronize()
    samples, in_next, sums = 0, [], []
    t0 = time.perf_counter()
    while True:
        t1 = time.perf_counter()
        try:
            batch = next(loader)
        except StopIteration:
            break
        if len(sums) == 2:
            torch.cuda.synchronize()
            samples, t0 = 0, time.perf_counter()
        elif len(sums) > 2:
            in_next.append(time.perf_counter() - t1)
        samples += batch.tensor.shape[0]
        sums.append(batch.tensor.float().sum())  # queued work that reads the batch
        time.sleep(args.step_ms / 1e3)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    loader.close()
    if len(sums) < 4:
        raise SystemExit("compare_pin_memory: too few batches to time (raise --copies)")
    return samples / elapsed, statistics.median(in_next), [float(s) for s in sums]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", default="/tmp/vbucket_pin_clips")
    p.add_argument("--clips", type=int, default=16)
    p.add_argument("--copies", type=int, default=8, help="each clip listed this many times")
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--size", default="640x360")
    p.add_argument("--fps", type=int, default=30)
    p.add_argument("--dtype", default="float32", choices=["uint8", "float32", "bfloat16"])
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--frames", default="17", help="the bucket's frame count")
    p.add_argument("--step-ms", type=float, default=60.0,
                   help="simulated training step per batch (ms)")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("compare_pin_memory: needs a CUDA torch and a GPU", file=sys.stderr)
        return 2
    if not vbucket.HAS_CUDA:
        print("compare_pin_memory: this vbucket build has no CUDA adapter", file=sys.stderr)
        return 2
    if not glob.glob(os.path.join(args.dir, "*.mp4")):
        make_clips(args.dir, args.clips, args.seconds, args.size, args.fps)
    paths = sorted(glob.glob(os.path.join(args.dir, "*.mp4")))[: args.clips] * args.copies
    meta = vbucket.scan(paths, progress=False)
    height = int(args.size.split("x")[1])
    res = {360: "360p", 480: "480p", 720: "720p"}.get(height, "360p")
    config = {res: {args.frames: (1.0, args.batch)}}
    if len(vbucket.VariableVideoBatchSampler(meta, config, num_replicas=1, rank=0, seed=3)) == 0:
        print(f"compare_pin_memory: no batch: the clips have fewer than {args.frames} frames at "
              f"the rule's frame interval (try --frames or longer --seconds)", file=sys.stderr)
        return 2
    figures = {True: [], False: []}
    reference = None
    for r in range(args.repeats):
        for adapter in (True, False) if r % 2 == 0 else (False, True):
            rate, per_batch, sums = run(meta, config, args, adapter)
            if reference is None:
                reference = sums
            elif sums != reference:
                print("compare_pin_memory: the two paths delivered different batches",
                      file=sys.stderr)
                return 1
            figures[adapter].append((rate, per_batch))
            print(f"  run {r}: {'vbucket ring' if adapter else 'torch pin_memory()':>18}: "
                  f"{rate:8.1f} samples/s, trainer in next() {per_batch * 1e3:7.2f} ms/batch",
                  flush=True)
    med = {k: (statistics.median(x for x, _ in v), statistics.median(y for _, y in v))
           for k, v in figures.items()}
    print(f"device {torch.cuda.get_device_name()}, {len(paths)} samples of {args.size}, "
          f"dtype {args.dtype}, {args.workers} workers, batch {args.batch}, "
          f"step {args.step_ms:g} ms")
    print(f"vbucket pinned ring: {med[True][0]:.1f} samples/s, {med[True][1] * 1e3:.2f} ms/batch "
          f"in next()")
    print(f"torch pin_memory():  {med[False][0]:.1f} samples/s, {med[False][1] * 1e3:.2f} "
          f"ms/batch in next()")
    print(f"ratio (vbucket / torch): {med[True][0] / med[False][0]:.2f}x samples/s, "
          f"{med[True][1] / med[False][1]:.3f}x trainer time in next()")
    return 0


if __name__ == "__main__":
    sys.exit(main())
