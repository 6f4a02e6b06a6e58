"""vbucket.Loader over URLs served by real nginx servers on 127.0.0.1, with faults made by the
servers themselves (issue 34, item 3): one server stopped in the middle of an epoch and started
again; a file missing (404); every batch still complete, every failed clip counted, named by its
URL and replaced by a sample of its bucket; the pixels those of the local files; no batch waits
past the clips' retry budget. Skipped, with a message, where nginx is not installed."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time

import numpy as np
import pytest

import vbucket
from vbucket import _vbucket

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter")
torch = pytest.importorskip("torch")

CONFIG = {"256px": {"1": (1.0, 4), "5": (1.0, 3), "9": (1.0, 2)}}
NGINX = next((p for p in ("/usr/sbin/nginx", "/usr/bin/nginx") if os.access(p, os.X_OK)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Nginx:
    """nginx in the foreground (a child of this process), serving `root` on a free port."""

    def __init__(self, root, prefix):
        self.port = _free_port()
        self.prefix = prefix
        (prefix / "logs").mkdir(parents=True, exist_ok=True)
        temps = "".join(f"  {t}_temp_path {prefix}/{t};\n"
                        for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        user = "user root;\n" if os.geteuid() == 0 else ""
        (prefix / "nginx.conf").write_text(
            f"daemon off;\nmaster_process off;\nworker_processes 1;\npid {prefix}/nginx.pid;\n"
            f"error_log {prefix}/logs/error.log;\n{user}events {{ worker_connections 64; }}\n"
            f"http {{\n  access_log off;\n  default_type application/octet-stream;\n{temps}"
            f"  server {{\n    listen 127.0.0.1:{self.port};\n    root {root};\n  }}\n}}\n")
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen([NGINX, "-p", str(self.prefix), "-c",
                                      str(self.prefix / "nginx.conf")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):
            if _accepts(self.port):
                return
            time.sleep(0.01)
        raise RuntimeError(f"nginx did not start; see {self.prefix}/logs/error.log")

    def stop(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)
            self.proc = None
        for _ in range(100):  # the port is closed once the process is gone
            if not _accepts(self.port):
                return
            time.sleep(0.01)

    def url(self, rel: str) -> str:
        return f"http://127.0.0.1:{self.port}/{rel}"


@pytest.fixture
def servers(media, tmp_path):
    if NGINX is None:
        pytest.skip("nginx not found (Debian: apt-get install nginx): the HTTP tests are skipped")
    a = Nginx(media, tmp_path / "a")
    b = Nginx(media, tmp_path / "b")
    yield a, b
    a.stop()
    b.stop()


def _rows(media):
    """The good videos of the test media, scanned locally: the sampler's metadata."""
    df = vbucket.scan(media / "videos", progress=False)
    df = df[df["error"] == ""].reset_index(drop=True)
    return df


def test_server_stopped_mid_epoch_every_batch_complete(media, servers):
    """Rows 0..n-1 are served by A, rows n..3n-1 by B (the same files). A is stopped after the
    first batches and started again later: each clip of A that fails while it is down is counted,
    named by its URL and replaced by another sample of its bucket; every batch is complete and
    holds the pixels of the local files of the samples it holds (compared with a loader over the
    local paths that makes the same substitutions)."""
    a, b = servers
    one = _rows(media)
    n = len(one)
    rel = [os.path.relpath(p, media) for p in one["path"]]
    import pandas as pd
    df = pd.concat([one] * 3, ignore_index=True)
    urls = [a.url(r) for r in rel] + [b.url(r) for r in rel] * 2
    local = list(one["path"]) * 3

    seed = 3
    s = vbucket.VariableVideoBatchSampler(df, CONFIG, seed=seed, rng="fast")
    total = len(s)
    assert total >= 8, "the scenario needs an epoch of several batches"
    stop_at, restart_at = 2, 5
    batches, waits = [], []
    with vbucket.Loader(s, urls, workers=2, prefetch=1) as loader:
        t0 = time.monotonic()
        for i, bt in enumerate(loader):
            waits.append(time.monotonic() - t0)
            batches.append((bt.indices.tolist(), bt.planned.tolist(), bt.tensor.clone(),
                            list(bt.substitutions)))
            if i + 1 == stop_at:
                a.stop()
            if i + 1 == restart_at:
                a.start()
            t0 = time.monotonic()
        stats = loader.stats()

    assert len(batches) == total  # every batch of the epoch came out
    subs = [x for _, _, _, ss in batches for x in ss]
    assert stats["substitutions"] == len(subs)
    assert stats["failed"] >= len(subs)
    assert subs, "stopping A must have made some clip of A fail"
    for idx, planned, t, ss in batches:
        assert len(idx) == len(planned) == t.shape[0]  # complete
        for x in ss:
            assert x["failed"] < n, "only A's rows fail"  # a row served by A
            assert f"127.0.0.1:{a.port}/" in x["error"], x["error"]
            assert x["replacement"] != x["failed"]
            assert idx[x["clip"]] == x["replacement"]
    # No batch waited past the budget of its clips: each failed clip costs at most its retries
    # (0.2 + 0.4 s of backoff plus refused connects), each batch holds at most 4 clips that may
    # each try up to 8 replacements, and the workers decode in parallel.
    assert max(waits) < 30.0, waits
    # Before A stopped nothing failed; after it is back, A's rows that did not fail meanwhile
    # decode again (the rows that failed stay failed for the epoch).
    assert not any(ss for _, _, _, ss in batches[:stop_at])
    failed_rows = {x["failed"] for x in subs}
    later_a = [i for idx, _, _, ss in batches[restart_at + 2:] for i in idx
               if i < n and i not in failed_rows]
    assert later_a, "some of A's rows are delivered after A is started again"

    # Pixels: a loader over the local files, with the samples each batch finally held.
    s2 = vbucket.VariableVideoBatchSampler(df, CONFIG, seed=seed, rng="fast")
    with vbucket.Loader(s2, local, workers=2, prefetch=1) as ref:
        for (idx, planned, t, ss), rb in zip(batches, ref):
            assert rb.planned.tolist() == planned
            by_clip = {x["clip"]: x["replacement"] for x in ss}
            for c in range(len(idx)):
                if c not in by_clip:  # the clips that were not replaced
                    assert torch.equal(t[c], rb.tensor[c]), (c, idx[c])


def test_missing_file_is_named_and_replaced(media, servers, tmp_path):
    """A URL that answers 404 is not retried: its clip is replaced at once, the error names the
    URL and the status."""
    a, b = servers
    one = _rows(media)
    rel = [os.path.relpath(p, media) for p in one["path"]]
    s = vbucket.VariableVideoBatchSampler(one, CONFIG, seed=1, rng="fast")
    # A row of this epoch's plan in a batch of several samples, so that its bucket has others to
    # replace it (Open-Sora's batch items: "index-frames-height-width").
    missing = next(int(str(b[0]).split("-")[0]) for b in s if len(b) > 1)
    s.reset()
    urls = [b.url(r) for r in rel]
    urls[missing] = b.url("videos/no_such_clip.mp4")
    found = []
    t0 = time.monotonic()
    with vbucket.Loader(s, urls, workers=2, prefetch=1) as loader:
        for bt in loader:
            assert len(bt.indices) == len(bt.planned) == bt.tensor.shape[0]
            found += bt.substitutions
    assert [x["failed"] for x in found] == [missing]
    assert "no_such_clip.mp4" in found[0]["error"]
    assert "404" in found[0]["error"] or "Not Found" in found[0]["error"], found[0]["error"]
    assert time.monotonic() - t0 < 60
