"""A Loader dropped while its workers decode, with PyAV imported: PyAV's FFmpeg log callback
takes the GIL on the workers' threads, so a Loader that joined them with the GIL held hung
forever (the CI's pytest run hung in test_media.py after a PyAV test). Run in a subprocess with
a timeout, so a regression fails instead of hanging the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from vbucket import _vbucket

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter (the Loader)")

SCRIPT = textwrap.dedent("""
    import gc, sys
    import av  # installs its av_log callback (it takes the GIL)
    import vbucket
    media = sys.argv[1]
    meta = vbucket.scan(media, progress=False)
    config = {"256px": {"1": (1.0, 5), "5": (1.0, 3), "9": (0.5, 2), "17": (1.0, 2)}}
    for seed in range(6):
        s = vbucket.VariableVideoBatchSampler(meta, config, num_replicas=1, rank=0, seed=seed,
                                              rng="fast")
        loader = vbucket.Loader(s, meta["path"], workers=2, prefetch=4)
        next(loader)
        del loader  # the workers are still opening and decoding clips
        gc.collect()
    print("ok")
""")


def test_dropping_a_loader_with_pyav_imported_does_not_hang(media, tmp_path):
    pytest.importorskip("av")
    pytest.importorskip("torch")
    script = tmp_path / "drop.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    try:
        r = subprocess.run([sys.executable, str(script), str(media)], capture_output=True,
                           text=True, env=env, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("a Loader dropped with PyAV imported hung (workers waiting for the GIL)")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
