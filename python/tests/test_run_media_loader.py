"""``vbucket.Loader(run, paths)``, a loader over a run (issue 42): it hands out the run's batches
decoded from each source's own files, fixed and packed stages alike; failed clips are replaced in
their bucket, counted per source and recorded in the ledger the run writes; and a trainer that
writes ``for batch in loader:`` with the state saved after each step, killed with SIGKILL at
random points and restarted (under another world at times), trains the uninterrupted run's
batches, with a ledger that audits clean (and a record removed before a kill is found missing).
"""

from __future__ import annotations

import hashlib
import json
import random

import pytest

import vbucket
from conftest import run_cli
from test_run_loader import drive_with_kills
from vbucket import _vbucket

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter")
torch = pytest.importorskip("torch")

CONFIG = {"256px": {"1": [1.0, 4], "9": [1.0, 3], "17": [1.0, 2]}}


@pytest.fixture(scope="module")
def tables(media, tmp_path_factory):
    """Two sources' tables (scanned media) and their clip paths: "a" the videos of videos/a,
    "b" those of videos/b and the images."""
    tmp = tmp_path_factory.mktemp("run_media")
    a = vbucket.scan([str(media / "videos" / "a")], progress=False)
    b = vbucket.scan([str(media / "videos" / "b"), str(media / "images")], progress=False)
    a.to_csv(tmp / "a.csv", index=False)
    b.to_csv(tmp / "b.csv", index=False)
    return tmp, {"a": list(a.path), "b": list(b.path)}


def write_run(tmp, name, seed=3, world=1, packed_from=6, epoch_samples=0, b_csv="b.csv"):
    stages = [{"name": "fixed", "config": CONFIG}]
    if packed_from is not None:
        stages.append({"name": "packed", "from_step": packed_from, "config": CONFIG,
                       "batching": "packed", "budget": 40000})
    run = {"seed": seed, "world": world, "epoch_samples": epoch_samples,
           "sources": [{"name": "a", "csv": str(tmp / "a.csv"), "weight": 1},
                       {"name": "b", "csv": str(tmp / b_csv), "weight": 2}],
           "stages": stages}
    path = tmp / name
    path.write_text(json.dumps(run))
    return path


def digest(t) -> str:
    return hashlib.sha1(t.contiguous().view(-1).numpy().tobytes()).hexdigest()


def test_the_runs_batches_decoded_per_source(tables):
    tmp, paths = tables
    run_file = write_run(tmp, "run.json")
    reference = vbucket.Run.from_file(run_file)
    seen, packed = [], 0
    loader = vbucket.Loader(vbucket.Run.from_file(run_file), [paths["a"], paths["b"]],
                            workers=2)
    assert isinstance(loader, vbucket.RunLoader)
    for batch in loader:
        want = reference.batch()
        reference.advance()
        assert (batch.step, batch.epoch, batch.stage) == (want["step"], want["epoch"],
                                                          want["stage"])
        assert batch.planned_source.tolist() == want["source"]
        assert batch.planned_row.tolist() == want["row"]
        assert batch.source.tolist() == want["source"]  # nothing failed
        assert batch.row.tolist() == want["row"]
        if batch.packed:
            packed += 1
            assert len(batch.tensors) == len(batch.row)
            assert int(batch.cu_seqlens[-1]) > 0
            for clip, (t, h, w) in zip(batch.tensors, batch.thw):
                assert tuple(clip.shape) == (t, h, w, 3)
        else:
            t, h, w = batch.thw
            assert tuple(batch.tensor.shape) == (len(batch.row), t, h, w, 3)
        seen.append(digest(batch.tensor))
    assert packed > 0 and len(seen) > packed
    # The same run again decodes the same pixels (the crops are the run's).
    again = vbucket.Loader(vbucket.Run.from_file(run_file), {"b": paths["b"], "a": paths["a"]},
                           workers=3, prefetch=1)
    assert [digest(b.tensor) for b in again] == seen
    assert loader.stats()["batches"] == len(seen)


def test_failed_clips_are_replaced_counted_per_source_and_recorded(tables, media, cli):
    tmp, paths = tables
    import pandas as pd

    b = pd.read_csv(tmp / "b.csv")
    garbled = str(media / "bad" / "garbled.mp4")  # probes as 320x240, 25 frames; fails to decode
    bad = b.iloc[:6].copy()
    bad["path"], bad["num_frames"], bad["height"], bad["width"] = garbled, 25, 240, 320
    bad["fps"], bad["stored_height"], bad["stored_width"], bad["rotation"] = 25.0, 240, 320, 0
    with_bad = pd.concat([b, bad], ignore_index=True)
    with_bad.to_csv(tmp / "b_bad.csv", index=False)
    run_file = write_run(tmp, "run_bad.json", packed_from=None, b_csv="b_bad.csv")
    ledger = tmp / "ledger_bad"
    loader = vbucket.Loader(vbucket.Run.from_file(run_file, ledger=ledger),
                            [paths["a"], list(with_bad.path)], workers=2)
    base_b = len(paths["a"])
    by_id = paths["a"] + list(with_bad.path)  # the ledger's global ids: a's rows, then b's
    subs = []
    for batch in loader:
        for s in batch.substitutions:
            subs.append(s)
            assert s["failed"] - base_b >= len(b)  # one of the garbled rows of source b
            assert "garbled" not in by_id[s["replacement"]]  # a sample of the same bucket
            c = s["clip"]
            assert by_id[s["replacement"]] == by_id[
                [0, base_b][batch.source[c]] + batch.row[c]]  # the clip holds it
            assert batch.planned_row[c] + base_b == s["failed"]
    assert subs, "no garbled row was drawn"
    assert loader.substitutions_by_source() == {"a": 0, "b": len(subs)}
    assert loader.stats()["substitutions"] == len(subs)
    audit = run_cli(cli, "audit", ledger, check=False)
    assert audit.returncode == 0, audit.stdout
    dump = run_cli(cli, "audit", "--dump", ledger / "rank-00000.ledger").stdout
    for s in subs:  # each in its batch's record: " sub=CLIP:FAILED>REPLACEMENT:why"
        assert f"{s['clip']}:{s['failed']}>{s['replacement']}:" in dump, dump[-2000:]


def test_paths_must_name_every_source(tables):
    tmp, paths = tables
    run = vbucket.Run.from_file(write_run(tmp, "run_args.json"))
    with pytest.raises(ValueError, match="2 sources"):
        vbucket.Loader(run, [paths["a"]])
    with pytest.raises(ValueError, match="missing \\['b'\\]"):
        vbucket.Loader(run, {"a": paths["a"]})
    with pytest.raises(ValueError, match="one entry per source"):
        vbucket.Loader(run, "/tmp")


@pytest.mark.parametrize("seed", [1, 2])
def test_killed_loader_trainer_trains_the_uninterrupted_batches(tables, cli, tmp_path, seed):
    tmp, paths = tables
    rng = random.Random(seed * 131)
    world = rng.randrange(1, 3)
    run_file = write_run(tmp, f"run_kill{seed}.json", seed=seed, world=world,
                         packed_from=rng.randrange(6, 20), epoch_samples=300)
    ooms = sorted(rng.sample(range(1, 14), 2))
    for lose in (False, True):  # the trainer writes `for batch in loader:`
        drive_with_kills(cli, tmp_path, run_file, ooms, world, rng, lose, 3, 2,
                         paths={"a": paths["a"], "b": paths["b"]}, settle=0.05)
