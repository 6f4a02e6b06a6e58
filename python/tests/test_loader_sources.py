"""Media where it lives, for the Loader (issue 44): ``Loader(sampler, X)`` takes X in every
form ``scan`` takes — a directory, a LIST.txt, a tar shard, a shard URL, or a sequence nesting
them — resolved by the library's one resolver (``ffmpeg::clip_paths``, ``vbucket scan``'s) to the
clip of each metadata row, with the bytes of a Loader over ``scan(X)["path"]``; another number of
clips is an error naming both counts. The media fields (timeout, io_timeout, retries,
outage_deadline) are run-spec fields: one check and one message from the CLI, a run file and
Python, and a run file's values reach the CLI's scan and, through the sampler, the Loader."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import tarfile
import time

import pytest

import vbucket
from vbucket import _core, _vbucket

from fault_server import NGINX, FaultServer, Nginx

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter")
torch = pytest.importorskip("torch")

CONFIG = {"256px": {"1": (1.0, 2), "5": (1.0, 2), "9": (1.0, 2)}}


@pytest.fixture
def tree(media, tmp_path):
    """videos/ (two good clips), s0.tar (two others, in a subdirectory of the shard), inner.txt
    naming the shard, and list.txt naming videos/, inner.txt and (with nginx) the shard's URL."""
    good = vbucket.scan(media / "videos", progress=False)
    good = list(good[good["error"] == ""]["path"])
    assert len(good) >= 4
    videos = tmp_path / "videos"
    videos.mkdir()
    for i, p in enumerate(good[:2]):
        shutil.copy(p, videos / f"v{i}{p[p.rfind('.'):]}")
    with tarfile.open(tmp_path / "s0.tar", "w") as t:  # PAX, as webdataset's TarWriter
        for i, p in enumerate(good[2:4]):
            t.add(p, arcname=f"sub/k{i}{p[p.rfind('.'):]}")
    (tmp_path / "inner.txt").write_text(f"{tmp_path / 's0.tar'}\n")
    sources = [str(videos), str(tmp_path / "inner.txt")]
    srv = None
    if NGINX is not None:
        srv = Nginx(tmp_path, tmp_path / "nginx")
        sources.append(srv.url("s0.tar"))
    (tmp_path / "list.txt").write_text("# nested\n" + "\n".join(sources) + "\n")
    yield tmp_path, sources
    if srv is not None:
        srv.stop()


def _epoch(meta, paths):
    """Every batch of one epoch of a fresh sampler over `meta`, loaded from `paths`: (indices,
    tensor) pairs."""
    s = vbucket.VariableVideoBatchSampler(meta, CONFIG, seed=3, rng="fast")
    with vbucket.Loader(s, paths, workers=2, prefetch=1) as loader:
        out = [(b.indices.tolist(), b.tensor.clone()) for b in loader]
        assert loader.stats()["substitutions"] == 0
    return out


def _same(a, b):
    assert len(a) == len(b) and a
    for (ia, ta), (ib, tb) in zip(a, b):
        assert ia == ib
        assert torch.equal(ta, tb)


def test_every_source_form_loads_the_bytes_of_one_path_per_row(tree):
    d, sources = tree
    meta = vbucket.scan(d / "list.txt", progress=False)
    assert (meta["error"] == "").all(), list(meta["error"])
    assert len(meta) == 2 + 2 * (len(sources) - 1)
    ref = _epoch(meta, meta["path"])
    _same(ref, _epoch(meta, d / "list.txt"))          # a LIST.txt (os.PathLike)
    _same(ref, _epoch(meta, str(d / "list.txt")))     # ... as str
    _same(ref, _epoch(meta, sources))                 # a sequence nesting a directory, a list
    _same(ref, _epoch(meta, list(meta["path"])))      # one path per row, as a list
    # A directory (its clips and shards, in path order) and a lone shard, as scan lists them.
    for where in (d / "videos", d / "s0.tar"):
        m = vbucket.scan(where, progress=False)
        _same(_epoch(m, m["path"]), _epoch(m, where))
    if len(sources) > 2:  # the shard behind nginx, as a URL
        m = vbucket.scan(sources[2], progress=False)
        _same(_epoch(m, m["path"]), _epoch(m, sources[2]))


def test_sources_of_another_count_are_refused_naming_both(tree):
    d, sources = tree
    meta = vbucket.scan(d / "list.txt", progress=False)
    s = vbucket.VariableVideoBatchSampler(meta, CONFIG, seed=3, rng="fast")
    with pytest.raises(ValueError, match=rf"the sources give 2 clips but the metadata has "
                                         rf"{len(meta)} rows"):
        vbucket.Loader(s, d / "videos")
    with pytest.raises(TypeError, match="Loader: source 1 must be a str or os.PathLike"):
        vbucket.Loader(s, [str(d / "videos"), 3])


# ------------------------------------------------------------------------------------------
# The media fields: one check from every surface, a run file's values reach their users
# ------------------------------------------------------------------------------------------

BAD = [("timeout", math.nan, "nan"), ("io_timeout", -1.0, "-1.0"), ("timeout", 2e6, "2000000.0"),
       ("io_timeout", math.inf, "inf"), ("retries", 101, "101"),
       ("outage_deadline", 0.0, "0.0")]


@pytest.mark.parametrize("name,value,text", BAD)
def test_a_bad_media_value_is_refused_alike_by_python_a_run_file_and_the_cli(
        name, value, text, media, tmp_path, cli):
    """NaN, infinite, negative, zero and absurd values are refused by the field table's one
    check: Python's keyword, a run file's key and the CLI's flag give its message, each naming
    the field as that surface writes it."""
    want = _core.FIELDS[name]
    why = ("expected an integer from 0 to 100" if want["kind"] == "count"
           else "expected a positive number up to 1000000")
    meta = vbucket.scan(media / "videos", progress=False)
    with pytest.raises(ValueError, match=rf"^{name}: {why}, got \"{text}\"$"):
        vbucket.VariableVideoBatchSampler(meta, CONFIG, **{name: value})
    clip = next(p for p, e in zip(meta["path"], meta["error"]) if not e)
    if name != "outage_deadline":  # scan's and decode_clip's fields
        with pytest.raises(ValueError, match=rf"^{name}: {why}"):
            vbucket.scan(media / "videos", progress=False, **{name: value})
        with pytest.raises(ValueError, match=rf"^{name}: {why}"):
            vbucket.decode_clip(clip, 0, 1, 1, size=(16, 16), **{name: value})
        r = subprocess.run([cli, "scan", str(media / "videos"), "--out", "-",
                            f"--{name.replace('_', '-')}", text], capture_output=True, text=True)
        assert r.returncode == 2
        assert f"--{name.replace('_', '-')}: {why}, got \"{text}\"" in r.stderr
    s = vbucket.VariableVideoBatchSampler(meta, CONFIG)
    with pytest.raises(ValueError, match=rf"^{name}: {why}"):
        vbucket.Loader(s, meta["path"], **{name: value})
    # a run file (JSON has no NaN or infinity: those are Python's and the CLI's alone)
    if math.isfinite(value):
        run = tmp_path / "run.json"
        run.write_text(json.dumps({name: value}))
        with pytest.raises(ValueError, match=rf"key \"{name}\": {why}"):
            vbucket.VariableVideoBatchSampler.from_run(run)
        r = subprocess.run([cli, "scan", str(media / "videos"), "--out", "-", "--run", str(run)],
                           capture_output=True, text=True)
        assert r.returncode == 1
        assert f"{run}: key \"{name}\": {why}" in r.stderr


def test_media_defaults_are_the_librarys_on_every_surface(cli):
    d = _vbucket.DEFAULTS
    assert {n: d[n] for n in _core.MEDIA_FIELDS} == {
        "timeout": 120.0, "io_timeout": 10.0, "retries": 2, "outage_deadline": 600.0}
    import inspect
    for fn in (vbucket.scan, vbucket.decode_clip):
        params = inspect.signature(fn).parameters
        for n in ("timeout", "io_timeout", "retries"):
            assert params[n].default == d[n]
            assert f"    {n}: {_core.FIELDS[n]['help']} (default: {d[n]!r})" in fn.__doc__
    # the Loader's None is the sampler's value; its docstring says the library's default
    for n in _core.MEDIA_FIELDS:
        assert inspect.signature(vbucket.Loader).parameters[n].default is None
        assert f"(default: {d[n]!r})" in vbucket.Loader.__init__.__doc__
    for cmd in ("scan", "decode"):
        text = subprocess.run([cli, cmd, "--help"], capture_output=True, text=True).stdout
        for n in ("timeout", "io_timeout", "retries"):
            line = next(ln for ln in text.splitlines()
                        if ln.startswith(f"  --{n.replace('_', '-')} "))
            assert line.endswith(f"(default: {_core.FIELDS[n]['default']})"), line
    # a plan's flags have no media field (a run file may carry them: the plan ignores them)
    text = subprocess.run([cli, "plan", "--help"], capture_output=True, text=True).stdout
    assert "--timeout" not in text and "--outage-deadline" not in text


def test_the_same_bounds_from_flags_a_run_file_and_python(tmp_path, cli):
    """A shard URL whose server never answers: with io_timeout 1 and no retries, the listing
    fails after about a second whether the bounds come from the CLI's flags, a run file
    (scan --run) or Python's keywords — and after the default 10 s would not have."""
    srv = FaultServer("silent")
    url = srv.url("s.tar")
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"io_timeout": 1, "retries": 0, "seed": 5}))
    took = {}
    try:
        for how, extra in (("flags", ["--io-timeout", "1", "--retries", "0"]),
                           ("run file", ["--run", str(run)]),
                           ("run file, a flag over it", ["--run", str(run), "--io-timeout",
                                                         "2"])):
            t0 = time.monotonic()
            r = subprocess.run([cli, "scan", url, "--out", str(tmp_path / "m.csv"), "--quiet",
                                *extra], capture_output=True, text=True, timeout=30)
            took[how] = time.monotonic() - t0
            assert r.returncode == 0, r.stderr
            assert url in (tmp_path / "m.csv").read_text()
        t0 = time.monotonic()
        df = vbucket.scan(url, progress=False, io_timeout=1, retries=0)
        took["python"] = time.monotonic() - t0
        assert df["error"].iloc[0] != ""
    finally:
        srv.close()
    for how in ("flags", "run file", "python"):
        assert 0.9 < took[how] < 3.5, took
    assert took["run file, a flag over it"] > took["run file"] + 0.6, took


def test_a_run_files_outage_deadline_reaches_the_loader_through_the_sampler(media, tmp_path):
    """A run file's media fields ride with the sampler (``from_run``) to its Loader: a source
    that never comes back fails the Loader after the file's outage deadline, not the default
    600 s; a keyword of the Loader overrides the file."""
    meta = vbucket.scan(media / "videos", progress=False)
    meta = meta[meta["error"] == ""].reset_index(drop=True)
    meta_csv = tmp_path / "meta.csv"
    meta.to_csv(meta_csv, index=False)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(CONFIG))
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"meta": "meta.csv", "config": "cfg.json", "rng": "fast",
                               "seed": 1, "retries": 0, "io_timeout": 1,
                               "outage_deadline": 1.5}))
    s = vbucket.VariableVideoBatchSampler.from_run(run)
    assert s._run.values()["outage_deadline"] == 1.5
    srv = FaultServer("silent")  # connections accepted, nothing answered: a timeout each
    urls = [srv.url(f"v{i}.mp4") for i in range(len(meta))]
    try:
        t0 = time.monotonic()
        with pytest.raises(ValueError, match=r"past the outage deadline \(1.5"):
            with vbucket.Loader(s, urls, workers=2, prefetch=1) as loader:
                next(iter(loader))
        assert time.monotonic() - t0 < 8
        t0 = time.monotonic()
        with pytest.raises(ValueError, match=r"past the outage deadline \(0.5"):
            with vbucket.Loader(s, urls, workers=2, prefetch=1, outage_deadline=0.5,
                                io_timeout=0.25) as loader:
                next(iter(loader))
        assert time.monotonic() - t0 < 4
    finally:
        srv.close()
