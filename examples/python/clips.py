"""Test clips for the comparison scripts of this folder: testsrc2 in H.264, generated once with
the ffmpeg command."""

from __future__ import annotations

import os
import subprocess


def make_clips(folder: str, count: int, seconds: float, size: str, fps: int) -> None:
    """Writes ``count`` clips of ``seconds`` at ``size`` ("WxH") and ``fps`` into ``folder``
    (clips already there are kept; a clip appears whole or not at all)."""
    os.makedirs(folder, exist_ok=True)
    for i in range(count):
        path = os.path.join(folder, f"clip_{i:03d}_{size}_{seconds:g}s.mp4")
        if os.path.exists(path):
            continue
        subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                        f"testsrc2=size={size}:rate={fps}", "-t", str(seconds), "-c:v", "libx264",
                        "-preset", "veryfast", "-g", str(fps), "-pix_fmt", "yuv420p",
                        path + ".part.mp4"], check=True)
        os.replace(path + ".part.mp4", path)
