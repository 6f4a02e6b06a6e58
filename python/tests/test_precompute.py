"""vbucket.cache_plan and vbucket.precompute (issue 32): the plan equals the CLI's manifest;
precompute writes every entry once, shards by rank, bounds its memory, and a job killed at
random points (SIGKILL) resumes without re-encoding an entry already written or losing one;
the cached-latents example trains."""

import importlib
import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import vbucket

# The module (the package's attribute `precompute` is the function of that name).
pc = importlib.import_module("vbucket.precompute")

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
CONFIG = {"256px": {"1": (1.0, 4), "5": (1.0, 4), "9": ((0.5, 0.5), 2), "17": ((0.5, 0.4), 2)},
          "768px": {"1": (0.5, 2), "9": ((0.5, 0.5), 1)}}


def _meta(tmp_path, n=60, seed=1):
    rng = random.Random(seed)
    p = tmp_path / "meta.csv"
    sizes = [(1080, 1920), (720, 1280), (1920, 1080), (256, 256), (1024, 1024)]
    with open(p, "w") as f:
        f.write("path,num_frames,height,width,fps\n")
        for i in range(n):
            h, w = sizes[rng.randrange(len(sizes))]
            if rng.random() < 0.2:
                f.write(f"img{i}.jpg,1,{h},{w},\n")
            else:
                f.write(f"v{i}.mp4,{rng.randrange(6, 120)},{h},{w},{rng.choice([16, 24, 30])}\n")
    return p


def test_cache_plan_equals_cli_manifest(tmp_path, cli):
    meta = _meta(tmp_path)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({r: {t: list(v) if not isinstance(v[0], tuple) else [list(v[0]), v[1]]
                                   for t, v in f.items()} for r, f in CONFIG.items()}))
    for cov in (0.6, 0.95, 1.0):
        out = tmp_path / f"cli_{cov}.csv"
        subprocess.run([cli, "cache-plan", "--config", str(cfg), "--meta", str(meta), "--coverage",
                        str(cov), "--seed", "3", "--out", str(out)], check=True,
                       capture_output=True)
        plan = vbucket.cache_plan(meta, CONFIG, coverage=cov, seed=3)
        rows = pc.read_manifest(out)
        assert len(rows) == plan["chosen"]["files"] == len(plan["entries"])
        for a, b in zip(rows, plan["entries"]):
            for k in pc.MANIFEST_COLUMNS:
                if k == "probability":
                    assert a[k] == pytest.approx(b[k], rel=1e-15)
                else:
                    assert str(a[k]) == str(b[k]), (k, a, b)
        assert plan["chosen"]["coverage"] >= cov - 1e-9
        assert plan["every_shape"]["files"] >= plan["chosen"]["files"]


def test_cache_plan_from_a_dataframe_and_budget(tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.read_csv(_meta(tmp_path))
    a = vbucket.cache_plan(df, CONFIG, coverage=0.9)
    b = vbucket.cache_plan(_meta(tmp_path), CONFIG, coverage=0.9)
    assert a["entries"] == b["entries"]
    budget = sum(r["bytes"] for r in a["entries"]) // 3
    c = vbucket.cache_plan(df, CONFIG, budget_bytes=budget)
    assert 0 < c["chosen"]["bytes"] <= budget
    with pytest.raises(ValueError, match="fallback"):
        vbucket.cache_plan(df, CONFIG, fallback="bogus")
    with pytest.raises(ValueError, match="selection"):
        vbucket.cache_plan(df, CONFIG, select="bogus")
    s = vbucket.cache_plan(df, CONFIG, select="stratified")
    counts = {}
    for r in s["entries"]:
        counts[r["sample"]] = counts.get(r["sample"], 0) + 1
    assert set(counts.values()) == {1} and s["chosen"]["shapes_per_sample"] <= 1


def test_cache_assign_delivers_only_cached_shapes(tmp_path):
    meta = _meta(tmp_path, n=200)
    plan = vbucket.cache_plan(meta, CONFIG, coverage=0.7)
    cached = {}
    for r in plan["entries"]:
        cached.setdefault(r["sample"], set()).add((r["T"], r["H"], r["W"]))
    # (resolution, frames, ratio, T, H, W, batch size) per bucket id
    buckets = {i: (b[3], b[4], b[5]) for i, b in enumerate(_bucket_table())}
    moved = 0
    for epoch in range(5):
        ids = pc.cache_assign(meta, CONFIG, plan["entries"], seed=2, epoch=epoch)
        drawn = vbucket.assign(meta, CONFIG, seed=2, epoch=epoch, rng="fast", as_arrays=True)
        for i, b in enumerate(ids.tolist()):
            if b >= 0:
                assert buckets[b] in cached.get(i, set()), (i, b)
                moved += b != drawn[i]
            elif drawn[i] >= 0:  # dropped only when the sample has no entry
                assert i not in cached
    assert moved > 0  # coverage 0.7 leaves draws to move


def _bucket_table():
    from vbucket import _core

    return _core._config(CONFIG, "opensora-v2").buckets()


# --- precompute -------------------------------------------------------------------------------


def _entries(n=23):
    """Manifest rows of three shapes, without files behind them (a fake decoder)."""
    shapes = [(1, 8, 8), (5, 8, 16), (9, 16, 8)]
    rows = []
    for j in range(n):
        t, h, w = shapes[j % 3]
        rows.append({"sample": j, "path": f"v{j}.mp4", "T": t, "H": h, "W": w, "start": j % 4,
                     "interval": 1, "bytes": 0, "probability": 0.5, "bucket": 0,
                     "resolution": "x", "ratio": "1:1", "file": f"latent/{j}_{t}x{h}x{w}.npy"})
    return rows


def fake_decode(entry):
    """(3, T, H, W) uint8 whose first four values are the sample index, little-endian."""
    x = np.zeros((3, entry["T"], entry["H"], entry["W"]), np.uint8)
    x.reshape(-1)[:4] = np.frombuffer(np.uint32(entry["sample"]).tobytes(), np.uint8)
    return x


def ids_of(batch):
    flat = np.asarray(batch).reshape(len(batch), -1)[:, :4].astype(np.uint8)
    return [int(np.frombuffer(row.tobytes(), np.uint32)[0]) for row in flat]


def fake_encode(batch):
    """One latent per clip: (4, T) float32 filled with the sample index."""
    b = np.asarray(batch)
    return [np.full((4, b.shape[2]), i, np.float32) for i in ids_of(b)]


def test_precompute_writes_every_entry_once(tmp_path):
    rows = _entries()
    decoded, encoded, backlog = [0], [0], []

    def decode(e):
        decoded[0] += 1
        backlog.append(decoded[0] - encoded[0])
        return fake_decode(e)

    def encode(batch):
        time.sleep(0.01)
        out = fake_encode(batch)
        encoded[0] += len(out)
        return out

    s = vbucket.precompute(rows, encode, tmp_path, batch_size=2, decode=decode, prefetch=1,
                           workers=1, to_torch=False)
    assert s["encoded"] == len(rows) and s["skipped"] == 0
    for r in rows:
        a = np.load(tmp_path / r["file"])
        assert a.shape == (4, r["T"]) and (a == r["sample"]).all()
    # Bounded memory: at most prefetch (1) batches wait, one is being encoded, one being built.
    assert max(backlog) <= 3 * 2
    again = vbucket.precompute(rows, encode, tmp_path, decode=decode, to_torch=False)
    assert again["encoded"] == 0 and again["skipped"] == len(rows)


def test_precompute_shards_by_rank(tmp_path):
    rows = _entries(31)
    seen = []
    for rank in range(3):
        s = vbucket.precompute(rows, fake_encode, tmp_path, rank=rank, world=3,
                               decode=fake_decode, to_torch=False)
        seen.append(s["encoded"])
    assert seen == [11, 10, 10]
    assert all((tmp_path / r["file"]).exists() for r in rows)
    with pytest.raises(ValueError, match="rank"):
        vbucket.precompute(rows, fake_encode, tmp_path, rank=3, world=3, decode=fake_decode)


def test_precompute_errors_surface_without_hanging(tmp_path):
    rows = _entries(40)

    def bad_encode(batch):
        raise RuntimeError("encoder out of memory")

    def bad_decode(entry):
        if entry["sample"] == 13:
            raise ValueError("clip 13 is corrupt")
        return fake_decode(entry)

    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="out of memory"):
        vbucket.precompute(rows, bad_encode, tmp_path / "a", batch_size=2, prefetch=1,
                           decode=fake_decode, to_torch=False)
    with pytest.raises(ValueError, match="clip 13"):
        vbucket.precompute(rows, fake_encode, tmp_path / "b", batch_size=2, prefetch=1,
                           decode=bad_decode, to_torch=False)
    assert time.monotonic() - t0 < 30
    with pytest.raises(ValueError, match="encode returned"):
        vbucket.precompute(rows, lambda b: fake_encode(b)[:1], tmp_path / "c", batch_size=2,
                           decode=fake_decode, to_torch=False)


JOB = r"""
import json, os, sys, time
import numpy as np
sys.path.insert(0, sys.argv[3])
import test_precompute as t
import vbucket
rows, out, log = json.load(open(sys.argv[1])), sys.argv[2], open(sys.argv[4], "a")

def encode(batch):
    ids = t.ids_of(batch)
    for i in ids:  # an entry encoded again although its file is written: a re-encode
        f = os.path.join(out, rows[i]["file"])
        log.write(json.dumps({"id": i, "existed": os.path.exists(f)}) + "\n")
    log.flush()
    time.sleep(0.02)
    return t.fake_encode(batch)

vbucket.precompute(rows, encode, out, batch_size=3, decode=t.fake_decode, prefetch=2,
                   to_torch=False)
print("done", flush=True)
"""


def test_precompute_killed_at_random_points_resumes(tmp_path):
    rows = _entries(60)
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    job = tmp_path / "job.py"
    job.write_text(JOB)
    out, log = tmp_path / "out", tmp_path / "encode.log"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    args = [sys.executable, str(job), str(tmp_path / "rows.json"), str(out),
            str(pathlib.Path(__file__).parent), str(log)]
    rng = random.Random(7)
    kills = 0
    for _ in range(40):
        p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.3, 1.2))  # the interpreter's start, then some batches
        if p.poll() is not None:
            o, e = p.communicate()
            assert p.returncode == 0, e.decode()
            break
        p.send_signal(signal.SIGKILL)
        p.wait()
        kills += 1
    else:
        p = subprocess.run(args, env=env, capture_output=True, timeout=120)
        assert p.returncode == 0, p.stderr.decode()
    assert kills >= 3, "the job finished before it was killed three times"
    # Complete: every entry is there, whole, with its own values; no temporary file is left.
    for r in rows:
        a = np.load(out / r["file"])
        assert a.shape == (4, r["T"]) and (a == r["sample"]).all()
    left = [p for p in out.rglob("*") if p.is_file() and not p.name.endswith(".npy")]
    assert left == []
    # Never re-encoded: no entry reached encode once its file existed; each entry's encodes
    # beyond the first are those a kill cut off before the file was renamed into place.
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert not any(e["existed"] for e in events)
    counts = {}
    for e in events:
        counts[e["id"]] = counts.get(e["id"], 0) + 1
    assert set(counts) == {r["sample"] for r in rows}
    assert sum(counts.values()) - len(rows) <= kills * 3 * 3  # at most the in-flight batches


def test_cached_latents_example_trains(tmp_path):
    import shutil

    if shutil.which("ffmpeg") is None or not vbucket._vbucket.HAS_FFMPEG:
        pytest.skip("the example makes its videos with the ffmpeg command and decodes them")
    pytest.importorskip("torch")
    p = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / "cached_latents.py"),
                        "--workdir", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    result = json.loads(p.stdout.strip().splitlines()[-1])
    assert result["entries"] > 0 and result["written"] == result["entries"]
    assert result["steps"] > 0
    assert result["loss_last"] < result["loss_first"]


@pytest.mark.parametrize("row,says", [
    ("a.mp4,51.5,720,1280,24", "num_frames"),
    ("a.mp4,-5,720,1280,24", "num_frames"),
    ("a.mp4,51,720,1280,-24", "fps"),
    ("a.mp4,abc,720,1280,24", "num_frames"),
])
def test_cache_plan_reads_csv_as_the_cli_does(tmp_path, cli, row, says):
    """The metadata CSV goes through the library's reader: what the CLI refuses, cache_plan
    refuses, naming the file, the row and the column."""
    meta = tmp_path / "bad.csv"
    meta.write_text("path,num_frames,height,width,fps\nb.mp4,33,720,1280,24\n" + row + "\n")
    with pytest.raises(ValueError) as e:
        vbucket.cache_plan(meta, CONFIG)
    msg = str(e.value)
    assert "bad.csv" in msg and "row 2" in msg and says in msg, msg
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(CONFIG))
    r = subprocess.run([cli, "cache-plan", "--config", str(cfg), "--meta", str(meta)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "row 2" in r.stderr, r.stderr


def test_cache_plan_refuses_coverage_zero(tmp_path):
    with pytest.raises(ValueError, match=r"coverage must be in \(0, 1\]"):
        vbucket.cache_plan(_meta(tmp_path), CONFIG, coverage=0)


def test_cache_plan_reads_the_path_column_with_the_library(tmp_path):
    meta = tmp_path / "q.csv"
    meta.write_text('path,num_frames,height,width,fps\n"a, b.mp4",33,720,1280,24\n')
    plan = vbucket.cache_plan(meta, CONFIG, coverage=1.0)
    assert plan["entries"] and all(r["path"] == "a, b.mp4" for r in plan["entries"])
    meta.write_bytes(b"path,num_frames,height,width,fps\n\xff\xfe.mp4,33,720,1280,24\n")
    with pytest.raises(ValueError, match=r"q.csv: row 1 .*column \"path\": is not UTF-8 text"):
        vbucket.cache_plan(meta, CONFIG)


def test_messages_quoting_non_utf8_bytes_are_readable(tmp_path):
    """A library message quoting bytes that are not UTF-8 reaches Python readable (escaped), not
    as ValueError('')."""
    meta = tmp_path / "m.csv"
    meta.write_bytes(b"num_frames,height,width,fps\n\xff1,720,1280,24\n")
    with pytest.raises(ValueError) as e:
        vbucket.cache_plan(meta, CONFIG)
    assert "m.csv" in str(e.value) and "\\xff" in str(e.value), repr(str(e.value))


@pytest.mark.parametrize("bad", ["../escape.npy", "/tmp/vbucket_abs.npy", "a/../../b.npy", ""])
def test_precompute_refuses_paths_outside_out_dir(tmp_path, bad):
    rows = _entries(4)
    rows[2]["file"] = bad
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ValueError, match="entry 2: column 'file'"):
        vbucket.precompute(rows, fake_encode, out, decode=fake_decode, to_torch=False)
    assert not any(out.rglob("*.npy")) and not (tmp_path / "escape.npy").exists()
    pc.write_manifest(tmp_path / "m.csv", rows)
    with pytest.raises(ValueError, match="m.csv: row 3: column 'file'"):
        vbucket.precompute(tmp_path / "m.csv", fake_encode, out, decode=fake_decode,
                           to_torch=False)
