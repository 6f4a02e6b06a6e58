#!/usr/bin/env python3
"""Generates examples/data/sample_meta.csv: synthetic metadata of a small web-video dataset.

The table has the columns vbucket reads (`num_frames,height,width,fps`) plus a `path`, as
Open-Sora's metadata CSVs do. It is the README's default job:

    ./build/vbucket assign --config tests/data/config_360p_example.json \
        --meta examples/data/sample_meta.csv --rule opensora-v2 --rng numpy --seed 42 \
        --out build/assign_360p.csv

What it holds (fixed seed, so the file is reproducible byte for byte; standard library only):
  - about 15% images: num_frames 1, empty fps (unknown), paths ending in .jpg;
  - videos at common web sizes, weighted roughly as found on the web: 1920x1080, 1280x720,
    854x480, 640x360, 3840x2160, 2560x1440, vertical 1080x1920 and 720x1280, squares
    (1080x1080, 720x720, 480x480) and a few odd sizes (cinema 2.39:1, 4:3, phone crops, and
    small random sizes, some below every resolution of the example config);
  - fps in {23.976, 24, 25, 29.97, 30, 50, 60}; durations 2-60 s, skewed towards short clips;
    num_frames = round(duration * fps);
  - a few paths with commas and quotes, so the file also exercises CSV quoting.

Run from the repository root: python3 examples/data/make_sample_meta.py
(writes examples/data/sample_meta.csv; --rows and --seed change the size and the draw).
"""

import argparse
import csv
import os
import random

# (width, height, weight): landscape first, then vertical, squares and odd sizes.
SIZES = [
    (1920, 1080, 30),
    (1280, 720, 22),
    (854, 480, 8),
    (640, 360, 8),
    (3840, 2160, 5),
    (2560, 1440, 3),
    (1080, 1920, 8),
    (720, 1280, 5),
    (1080, 1080, 3),
    (720, 720, 2),
    (480, 480, 1),
    (1920, 800, 2),  # cinema 2.39:1
    (1440, 1080, 2),  # 4:3
    (640, 480, 2),  # 4:3 SD
    (886, 1920, 1),  # phone screen recording
]
IMAGE_SIZES = [
    (1024, 1024, 3),
    (1920, 1080, 3),
    (1080, 1350, 2),  # 4:5 portrait
    (1200, 800, 2),  # 3:2 photo
    (4032, 3024, 2),  # phone camera 4:3
    (800, 600, 1),
    (512, 512, 1),
]
FPS = [(23.976, 20), (24.0, 15), (25.0, 15), (29.97, 20), (30.0, 20), (50.0, 4), (60.0, 6)]


def weighted(rng, items):
    return rng.choices([i[:-1] for i in items], weights=[i[-1] for i in items])[0]


def odd_size(rng):
    """A small or unusual size: even numbers between 144 and 1000 on each side."""
    return rng.randrange(144, 1000, 2), rng.randrange(144, 1000, 2)


def make_rows(n, seed):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        if rng.random() < 0.15:
            w, h = odd_size(rng) if rng.random() < 0.1 else weighted(rng, IMAGE_SIZES)
            rows.append((f"images/{i:05d}.jpg", 1, h, w, ""))
            continue
        w, h = odd_size(rng) if rng.random() < 0.05 else weighted(rng, SIZES)
        (fps,) = weighted(rng, FPS)
        # Durations 2-60 s, most of them short (log-uniform).
        duration = 2.0 * (30.0 ** rng.random())
        frames = max(2, round(duration * fps))
        name = f"videos/{i:05d}.mp4"
        if i % 250 == 17:
            name = f'videos/interview, part "{i % 7}".mp4'
        fps_text = f"{fps:g}" if fps != int(fps) else f"{int(fps)}"
        rows.append((name, frames, h, w, fps_text))
    return rows


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--out", default=os.path.join(here, "sample_meta.csv"))
    args = parser.parse_args()
    with open(args.out, "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["path", "num_frames", "height", "width", "fps"])
        writer.writerows(make_rows(args.rows, args.seed))


if __name__ == "__main__":
    main()
