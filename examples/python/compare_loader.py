"""Side by side: the Python status quo against vbucket.Loader, on the same clips and batches.

(a) torch.utils.data.DataLoader(num_workers=N) whose dataset decodes the whole video with PyAV
    and then takes the temporal crop and Open-Sora's resize-crop (scale to cover, center crop),
    as Open-Sora's ``read_video`` + transforms do;
(b) vbucket.Loader(workers=N): decodes only the frames it needs, straight to the target size,
    on C++ threads.

Both get the batches of one VariableVideoBatchSampler (the same samples, buckets and shapes);
the script checks that the shapes agree and prints samples/s of each (the median of
``--repeats`` alternating runs) and their ratio.

    .venv/bin/python examples/python/compare_loader.py --clips 8 --seconds 10 --size 1280x720 \\
        --workers 2 --repeats 3

The clips are generated once with the ffmpeg command (testsrc2, H.264) into ``--dir``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import torch

import vbucket

from clips import make_clips  # this folder's clip generator


# --- (a) the status quo: PyAV full decode, then crop and resize ---------------------------------


def read_video_pyav(path: str) -> np.ndarray:
    """Every frame of the video as (T, H, W, 3) uint8, as Open-Sora's read_video does."""
    import av

    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.thread_count = 1
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(stream)]
    return np.stack(frames)


def resize_crop(video: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """(T, 3, H0, W0) float -> (T, 3, h, w): scale so h x w is covered, then center crop."""
    h0, w0 = video.shape[-2:]
    r = max(h / h0, w / w0)
    sh, sw = max(h, round(h0 * r)), max(w, round(w0 * r))
    video = torch.nn.functional.interpolate(video, size=(sh, sw), mode="bilinear",
                                            align_corners=False)
    top, left = round((sh - h) / 2), round((sw - w) / 2)
    return video[..., top:top + h, left:left + w]


class PyAVDataset(torch.utils.data.Dataset):
    """Items are (sample, T, H, W, interval, seed): the clip of that sample at that shape."""

    def __init__(self, paths, num_frames):
        self.paths, self.num_frames = list(paths), list(num_frames)

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, item):
        i, t, h, w, interval, seed = item
        video = read_video_pyav(self.paths[i])
        span = (t - 1) * interval + 1
        rng = np.random.default_rng(seed)
        start = int(rng.integers(0, max(1, len(video) - span + 1)))
        clip = torch.from_numpy(video[start:start + span:interval]).permute(0, 3, 1, 2).float()
        clip = resize_crop(clip, h, w)
        return clip.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()


def _worker_init(_):
    torch.set_num_threads(1)


def run_pyav(df, batches, workers: int, interval_of) -> tuple:
    ds = PyAVDataset(df["path"], df["num_frames"])
    items = [[(int(i), t, h, w, interval_of(int(i)), k) for k, i in enumerate(idx)]
             for (_, t, h, w, idx, _) in batches]
    loader = torch.utils.data.DataLoader(ds, batch_sampler=items, num_workers=workers,
                                         worker_init_fn=_worker_init, prefetch_factor=2)
    shapes, samples = [], 0
    t0 = time.perf_counter()
    for b in loader:
        shapes.append(tuple(b.shape))
        samples += b.shape[0]
    return samples / (time.perf_counter() - t0), shapes


# --- (b) vbucket.Loader -------------------------------------------------------------------------


def run_vbucket(sampler, df, workers: int) -> tuple:
    shapes, samples = [], 0
    t0 = time.perf_counter()
    with vbucket.Loader(sampler, df["path"], workers=workers, prefetch=2) as loader:
        for b in loader:
            shapes.append(tuple(b.tensor.shape))
            samples += b.tensor.shape[0]
    return samples / (time.perf_counter() - t0), shapes


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", default="build-rel/compare-clips")
    p.add_argument("--clips", type=int, default=8)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--size", default="1280x720")
    p.add_argument("--fps", type=int, default=30)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--bucket", default="256px:33:2", help="RESOLUTION:FRAMES:BATCH_SIZE")
    a = p.parse_args(argv)

    make_clips(a.dir, a.clips, a.seconds, a.size, a.fps)
    df = vbucket.scan(a.dir, progress=False)
    if (df["error"] != "").any():
        print(df[df["error"] != ""][["path", "error"]].to_string(), file=sys.stderr)
        return 1
    res, frames, bs = a.bucket.split(":")
    config = {res: {frames: (1.0, int(bs))}}
    fps_max = 16.0
    sampler = vbucket.VariableVideoBatchSampler(df, config, num_replicas=1, rank=0, seed=1,
                                                fps_max=fps_max)
    batches = sampler.batches()
    if not batches:
        print("compare_loader: no batch (the clips fit no bucket of the config)", file=sys.stderr)
        return 1
    fps = df["fps"].to_numpy()

    def interval_of(i: int) -> int:  # Open-Sora 2.0's thinning to fps_max, as the rule does
        return max(1, int(np.ceil(fps[i] / fps_max))) if fps[i] >= fps_max else 1

    print(f"{len(df)} clips {a.size} {a.seconds:g} s at {a.fps} fps; {len(batches)} batches of "
          f"{batches[0][1]}x{batches[0][2]}x{batches[0][3]}; {a.workers} workers; "
          f"{a.repeats} repeats")
    ours, theirs = [], []
    for r in range(a.repeats):
        v, v_shapes = run_vbucket(sampler, df, a.workers)
        t, t_shapes = run_pyav(df, batches, a.workers, interval_of)
        if v_shapes != t_shapes:
            print(f"compare_loader: shapes differ: vbucket {v_shapes[:3]}, PyAV {t_shapes[:3]}",
                  file=sys.stderr)
            return 1
        ours.append(v)
        theirs.append(t)
        print(f"  run {r}: vbucket.Loader {v:8.2f} samples/s, DataLoader+PyAV {t:8.2f} "
              f"samples/s, ratio {v / t:6.2f}")
    ratios = [o / t for o, t in zip(ours, theirs)]
    print(f"median: vbucket.Loader {statistics.median(ours):.2f} samples/s, DataLoader+PyAV "
          f"{statistics.median(theirs):.2f} samples/s, ratio {statistics.median(ratios):.2f}x "
          f"(shapes agree)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
