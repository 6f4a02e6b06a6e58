"""vbucket.Loader and scan over URLs served by real nginx servers on 127.0.0.1 and by a server
that misbehaves on purpose (fault_server.py): a server stopped in the middle of an epoch and
started again (a stall: nothing replaced, every batch complete, the bytes of a run without the
outage), an outage past its deadline, a file missing (404: replaced), listings of a server that
never answers, stalls or trickles (in time), no range support, a connection cut inside a member.
Skipped, with a message, where nginx is not installed."""

from __future__ import annotations

import os
import socket
import subprocess
import time

import numpy as np
import pytest

import vbucket
from vbucket import _vbucket

from fault_server import NGINX, FaultServer, Nginx

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter")
torch = pytest.importorskip("torch")

CONFIG = {"256px": {"1": (1.0, 4), "5": (1.0, 3), "9": (1.0, 2)}}

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


def _shard(media, tmp_path, copies=2):
    """The good videos of the test media in one tar shard (Python's tarfile, as webdataset
    writes), `copies` times each; its local scan is the sampler's metadata."""
    import tarfile

    one = _rows(media)
    d = tmp_path / "shards"
    d.mkdir()
    with tarfile.open(d / "s0.tar", "w") as t:
        for c in range(copies):
            for i, p in enumerate(one["path"]):
                t.add(p, arcname=f"c{c}/k{i:03d}{os.path.splitext(p)[1]}")
    df = vbucket.scan(d / "s0.tar", progress=False)
    assert (df["error"] == "").all()
    return d, df


OUTAGE = float(os.environ.get("VBUCKET_OUTAGE_SECONDS", "5"))


def test_server_stopped_mid_epoch_stalls_and_substitutes_nothing(media, servers, tmp_path):
    """A Loader over tar-over-HTTP survives its server stopped mid-epoch for OUTAGE seconds
    (VBUCKET_OUTAGE_SECONDS, 5 in CI; 60 by hand): the workers wait on one health state, every
    batch comes out complete, no clip is replaced for the outage, the stall is counted, and the
    bytes delivered equal those of a run over the local shard without an outage."""
    import threading

    a, _ = servers
    d, df = _shard(media, tmp_path, copies=1)
    a.stop()
    served = Nginx(d, tmp_path / "shard_server")
    local = list(df["path"])
    urls = [served.url(p[len(str(d)) + 1:]) for p in local]
    seed = 5
    s = vbucket.VariableVideoBatchSampler(df, CONFIG, seed=seed, rng="fast")
    total = len(s)
    assert total >= 6, "the scenario needs an epoch of several batches"
    batches, restarted = [], []

    def restart():
        served.start()
        restarted.append(time.monotonic())

    timer = None
    try:
        with vbucket.Loader(s, urls, workers=2, prefetch=1, io_timeout=2, retries=1,
                            outage_deadline=OUTAGE + 60) as loader:
            for i, bt in enumerate(loader):
                batches.append((bt.indices.tolist(), bt.tensor.clone(), list(bt.substitutions)))
                if i == 1:
                    served.stop()
                    stopped = time.monotonic()
                    timer = threading.Timer(OUTAGE, restart)
                    timer.start()
            stats = loader.stats()
    finally:
        if timer is not None:
            timer.cancel()
        served.stop()
    print(f"outage {OUTAGE} s: {len(batches)} batches, stalls {stats['stalls']}, "
          f"stall_seconds {stats['stall_seconds']:.2f}, unavailable {stats['unavailable']}, "
          f"substitutions {stats['substitutions']}")
    assert restarted and restarted[0] - stopped >= OUTAGE - 0.5
    assert len(batches) == total  # every batch of the epoch came out
    assert not any(ss for _, _, ss in batches), "nothing replaced for a transient failure"
    assert stats["substitutions"] == 0
    assert stats["stalls"] >= 1 and stats["unavailable"] >= 1, stats
    assert stats["stall_seconds"] >= OUTAGE * 0.5, stats

    # The bytes of a run over the local shard, without an outage.
    s2 = vbucket.VariableVideoBatchSampler(df, CONFIG, seed=seed, rng="fast")
    compared = 0
    with vbucket.Loader(s2, local, workers=2, prefetch=1) as ref:
        for (idx, t, _), rb in zip(batches, ref):
            assert idx == rb.indices.tolist()
            assert torch.equal(t, rb.tensor)
            compared += 1
    assert compared == total


def test_outage_past_the_deadline_raises_naming_the_source(media, tmp_path):
    """A source that never comes back: next() raises once the outage deadline has passed,
    naming the URL and the deadline, instead of waiting for ever or replacing every clip."""
    d, df = _shard(media, tmp_path, copies=1)
    dead = f"http://127.0.0.1:{_closed_port()}/s0.tar"  # connections refused
    urls = [dead + p[len(str(d / "s0.tar")):] for p in df["path"]]
    s = vbucket.VariableVideoBatchSampler(df, CONFIG, seed=1, rng="fast")
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=r"unreachable for .* past the outage deadline"):
        with vbucket.Loader(s, urls, workers=2, prefetch=1, retries=0,
                            outage_deadline=2) as loader:
            next(iter(loader))
    assert time.monotonic() - t0 < 10


def _closed_port() -> int:
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]  # closed again: connections are refused


@pytest.mark.parametrize("mode", ["silent", "stall", "trickle"])
def test_listing_a_misbehaving_server_returns_in_time(mode, tmp_path, cli):
    """Listing a shard URL whose server never answers, stalls then closes, or trickles at
    20 kB/s returns within timeout x attempts + 1 s, from Python and from the CLI (a positional
    after the flags), with the shard named in the error column."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:  # ~1 MB of small members: 50 s at 20 kB/s
        for i in range(250):
            info = tarfile.TarInfo(f"k{i:04d}.txt")
            info.size = 3584
            t.addfile(info, io.BytesIO(b"x" * info.size))
    srv = FaultServer(mode, data=buf.getvalue())
    timeout, retries = 1.5, 1
    bound = timeout * (retries + 1) + 1.0
    try:
        url = srv.url("s.tar")
        t0 = time.monotonic()
        df = vbucket.scan(url, progress=False, timeout=timeout, io_timeout=timeout,
                          retries=retries)
        took = time.monotonic() - t0
        assert took < bound, (mode, took)
        assert (df["path"] == url).any() and df["error"].str.contains("s.tar").any(), df
        out = tmp_path / "meta.csv"
        t0 = time.monotonic()
        r = subprocess.run([cli, "scan", "--timeout", str(timeout), "--io-timeout", str(timeout),
                            "--retries", str(retries), url, "--out", str(out)],
                           capture_output=True, text=True)
        took = time.monotonic() - t0
        assert r.returncode == 0, r.stderr
        assert took < bound, (mode, took)
        assert url in out.read_text()
    finally:
        srv.close()


def test_no_range_support_keepalive_decodes_in_time(media, tmp_path):
    """nginx with `max_ranges 0` (200 and the whole body, keep-alive 30 s): a URL decodes within
    1 s, not after the connection's keep-alive; a tar member there decodes with the local bytes
    or fails with a clear error."""
    if NGINX is None:
        pytest.skip("nginx not found (Debian: apt-get install nginx)")
    d, df = _shard(media, tmp_path, copies=1)
    one = _rows(media)
    clip = one["path"].iloc[0]
    srv = Nginx(media, tmp_path / "noranges", extra="    max_ranges 0;\n    keepalive_timeout 30;\n"
                "    location /shards/ { alias %s/; }\n" % d)
    try:
        want = vbucket.decode_clip(clip, 2, 4, 2, size=(64, 64))
        t0 = time.monotonic()
        got = vbucket.decode_clip(srv.url(os.path.relpath(clip, media)), 2, 4, 2, size=(64, 64))
        took = time.monotonic() - t0
        np.testing.assert_array_equal(got, want)
        assert took < 1.0, took
        member = df["path"].iloc[0]
        url = srv.url("shards/" + member[len(str(d)) + 1:])
        t0 = time.monotonic()
        try:
            m = vbucket.decode_clip(url, 0, 2, 1, size=(64, 64))
            np.testing.assert_array_equal(m, vbucket.decode_clip(member, 0, 2, 1, size=(64, 64)))
        except vbucket.DecodeError as e:
            assert "range" in str(e).lower(), str(e)
        assert time.monotonic() - t0 < 3.0
    finally:
        srv.stop()


def test_connection_cut_inside_a_member_is_a_cut_read(media, tmp_path):
    """A server that closes the connection inside a tar member's body: the error says the read
    was cut (where, and that the connection closed), not that the clip is too short."""
    d, df = _shard(media, tmp_path, copies=1)
    srv = FaultServer("cut", data=(d / "s0.tar").read_bytes(), cut_after=20000)
    try:
        member = df["path"].iloc[0]
        url = srv.url("s0.tar" + member[len(str(d / "s0.tar")):])
        with pytest.raises(vbucket.DecodeError, match="cut read") as e:
            vbucket.decode_clip(url, 0, 4, 2, size=(64, 64), retries=0)
        assert "too short" not in str(e.value)
    finally:
        srv.close()


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
