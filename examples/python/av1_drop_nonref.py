"""AV1: what would not sending the packets of unwanted non-reference frames save?

A frame whose header has ``refresh_frame_flags = 0`` is stored in no reference slot, so no later
frame refers to it and ``show_existing_frame`` cannot show it: when it is not wanted, its packet
need not reach the decoder. (libdav1d through FFmpeg takes ``skip_frame`` only when it is opened,
so the per-packet discard ``decode_clip`` uses elsewhere does not reach it.) This script finds
those packets with the ``trace_headers`` bitstream filter of the ``ffmpeg`` command, then decodes
random clips with PyAV (one thread) from the keyframe before each clip, once with every packet and
once without the droppable unwanted ones, and prints frames decoded per frame delivered, CPU
seconds per clip (the better of two rounds) and whether every wanted frame's bytes are equal.

    /tmp/benchvenv/bin/python examples/python/av1_drop_nonref.py /tmp/compare-media/av1_g60.mkv

A measurement for docs/benchmarks.md, not part of CI; needs ``av`` and ``numpy``.
"""

from __future__ import annotations

import re
import resource
import subprocess
import sys

import av
import numpy as np


def droppable_packets(path: str) -> dict[int, bool]:
    """pts -> whether every frame in the packet refreshes no reference slot."""
    log = subprocess.run(["ffmpeg", "-v", "trace", "-i", path, "-c", "copy", "-bsf:v",
                          "trace_headers", "-f", "null", "-"], capture_output=True,
                         text=True).stderr
    out: dict[int, bool] = {}
    cur = None
    for line in log.splitlines():
        m = re.search(r"Packet: \d+ bytes.*?pts (-?\d+)", line)
        if m:
            cur = int(m.group(1))
            out[cur] = True
            continue
        if cur is None:
            continue
        if re.search(r"show_existing_frame\s+1 = 1", line):  # may show a key frame: kept
            out[cur] = False
        m = re.search(r"refresh_frame_flags\s+\d+ = (\d+)", line)
        if m and int(m.group(1)) != 0:
            out[cur] = False
        if re.search(r"frame_type\s+00 = 0", line):  # a key frame
            out[cur] = False
    return out


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def decode(path, droppable, start, frames, interval, drop):
    """The wanted frames (index -> YUV array) and the count of frames out of the decoder."""
    wanted = {start + j * interval for j in range(frames)}
    out, decoded = {}, 0
    with av.open(path) as c:
        s = c.streams.video[0]
        s.codec_context.thread_count = 1
        per = 1 / (s.average_rate * s.time_base)  # pts units a frame
        c.seek(int(start * per), stream=s, backward=True, any_frame=False)
        for pkt in c.demux(s):
            if (drop and pkt.pts is not None and droppable.get(pkt.pts)
                    and round(pkt.pts / per) not in wanted):
                continue
            for f in pkt.decode():
                decoded += 1
                i = round(f.pts / per)
                if i in wanted:
                    out[i] = f.to_ndarray().copy()
            if len(out) == len(wanted):
                break
    return out, decoded


def main() -> None:
    path = sys.argv[1]
    clips = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    droppable = droppable_packets(path)
    print(f"{path}: {len(droppable)} packets, {sum(droppable.values())} droppable")
    with av.open(path) as c:
        total = c.streams.video[0].frames or len(droppable)
    rng = np.random.default_rng(1)
    for interval in (1, 2):
        starts = [int(x) for x in rng.integers(0, total - 32 * interval, clips)]
        runs = {False: [], True: []}
        for drop in (False, True, False, True):
            c0, outs, dec = cpu(), [], 0
            for st in starts:
                o, d = decode(path, droppable, st, 33, interval, drop)
                outs.append(o)
                dec += d
            runs[drop].append((cpu() - c0, dec, outs))
        same = all(a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
                   for a, b in zip(runs[False][0][2], runs[True][0][2]))
        t0, t1 = (min(r[0] for r in runs[d]) for d in (False, True))
        n = clips * 33
        print(f"interval {interval}: decoded/delivered {runs[False][0][1] / n:.2f} -> "
              f"{runs[True][0][1] / n:.2f}, CPU {t0 / clips:.3f} -> {t1 / clips:.3f} s/clip "
              f"({100 * (1 - t1 / t0):.0f}% less), wanted frames equal: {same}")


if __name__ == "__main__":
    main()
