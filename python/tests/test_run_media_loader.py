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
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import vbucket
from conftest import ledger_lines, run_cli
from vbucket import _vbucket

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter")
torch = pytest.importorskip("torch")

CONFIG = {"256px": {"1": [1.0, 4], "9": [1.0, 3], "17": [1.0, 2]}}
EPOCHS = 2


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


TRAINER = textwrap.dedent("""
    import json, os, sys, time
    import vbucket

    run_file, ckpt, log_path, ledger, world, paths = sys.argv[1:7]
    world = int(world)
    paths = json.loads(open(paths).read())
    oom_steps = set(json.loads(sys.argv[7]))
    state = json.load(open(ckpt)) if os.path.exists(ckpt) else None

    def save(d):  # atomically: a kill leaves the old checkpoint or the new one
        with open(ckpt + ".tmp", "w") as f:
            json.dump(d, f)
        os.replace(ckpt + ".tmp", ckpt)

    lines = 0 if state is None else state["lines"]
    kept = open(log_path).readlines()[:lines] if os.path.exists(log_path) else []
    with open(log_path, "w") as f:  # the log of trained steps, as the checkpoint has it
        f.writelines(kept)
    log = open(log_path, "a")
    runs = [vbucket.Run.from_file(run_file, rank=r, ledger=ledger, world=world)
            for r in range(world)]
    oom_done = set()
    if state is not None:
        oom_done = set(state["oom"])
        for run in runs:
            run.load_state_dict(state["run"], world=world)
    loaders = [vbucket.Loader(run, paths, workers=2, prefetch=2) for run in runs]
    while runs[0].epoch < %(epochs)d:
        loops = [iter(loader) for loader in loaders]
        while (step := [next(loop, None) for loop in loops])[0] is not None:
            k = step[0].step
            if k in oom_steps and k not in oom_done:
                try:
                    for loader in loaders:
                        loader.out_of_memory([k %% world])
                    oom_done.add(k)
                    continue
                except ValueError:  # the batch size is already 1: trained as it is
                    oom_done.add(k)
            for b in step:  # decoded as planned (no file fails here)
                assert b.source.tolist() == b.planned_source.tolist()
                assert b.row.tolist() == b.planned_row.tolist()
                assert b.tensor.numel() > 0
            log.write(json.dumps([[b.step, b.rank, b.world, b.source.tolist(), b.row.tolist(),
                                   b.pads, b.repeat] for b in step]) + "\\n")
            log.flush()
            lines += 1
            save({"run": loaders[0].state_dict(), "oom": sorted(oom_done), "lines": lines})
""") % {"epochs": EPOCHS}


def reference(run_file, ooms, worlds):
    """The uninterrupted run, step by step on one Run: the world from each step of ``worlds``."""
    ref = vbucket.Run.from_file(run_file)
    out, done = [], set()
    while ref.epoch < EPOCHS:
        k = ref.step
        if k in worlds and worlds[k] != ref.world:
            ref.set_world(worlds[k])
        if k in ooms and k not in done:
            done.add(k)
            try:
                ref.out_of_memory([k % ref.world])
                continue
            except ValueError:
                pass
        out.append([[b["step"], b["rank"], ref.world, b["source"], b["row"], b["pads"],
                     b["repeat"]] for b in (ref.batch(r) for r in range(ref.world))])
        ref.advance()
    return out


def lose_last_trained_record(cli, ledger, ckpt):
    """Removes rank 0's record of the last step the checkpoint counts as trained (the audit's
    text dump of the file, edited, written back in the file's format)."""
    step = int(json.load(open(ckpt))["run"]["state"].split(" step=")[1].split(" ")[0])
    f = ledger / "rank-00000.ledger"
    lines = ledger_lines(cli, f)
    at = [i for i, line in enumerate(lines)
          if line.startswith("B ") and int(line.split(" s=")[1].split(" ")[0]) < step
          and " rep=1" not in line]
    if not at:
        return False
    del lines[at[-1]]
    f.write_text("".join(lines))
    return True


@pytest.mark.parametrize("seed", [1, 2])
def test_killed_loader_trainer_trains_the_uninterrupted_batches(tables, cli, tmp_path, seed):
    tmp, paths = tables
    rng = random.Random(seed * 131)
    world = rng.randrange(1, 3)
    run_file = write_run(tmp, f"run_kill{seed}.json", seed=seed, world=world,
                         packed_from=rng.randrange(6, 20), epoch_samples=300)
    ooms = sorted(rng.sample(range(1, 14), 2))
    trainer = tmp_path / "trainer.py"
    trainer.write_text(TRAINER)
    paths_file = tmp_path / "paths.json"
    paths_file.write_text(json.dumps({"a": paths["a"], "b": paths["b"]}))
    for lose in (False, True):
        d = tmp_path / f"lose{lose}"
        d.mkdir()
        ckpt, log, ledger = d / "ckpt.json", d / "log.jsonl", d / "ledger"
        w, worlds, kills, lost = world, {0: world}, 0, False

        def start():
            return subprocess.Popen([sys.executable, str(trainer), str(run_file), str(ckpt),
                                     str(log), str(ledger), str(w), str(paths_file),
                                     json.dumps(ooms)], stderr=subprocess.PIPE, text=True)

        while True:
            p = start()
            if kills < 3:
                lines = json.load(open(ckpt))["lines"] if ckpt.exists() else 0
                until = lines + rng.randrange(1, 4)
                while p.poll() is None and (json.load(open(ckpt))["lines"]
                                            if ckpt.exists() else 0) < until:
                    time.sleep(0.002)
                time.sleep(rng.uniform(0, 0.05))  # anywhere in a step: decoding, saving
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                    p.wait()
                    kills += 1
                    if lose and not lost and ckpt.exists():
                        lost = lose_last_trained_record(cli, ledger, ckpt)
                    if rng.random() < 0.5:  # restarted under another world
                        w = rng.randrange(1, 3)
                    if ckpt.exists():
                        state = json.load(open(ckpt))["run"]["state"]
                        worlds[int(state.split(" step=")[1].split(" ")[0])] = w
                    else:
                        worlds[0] = w
                    continue
            _, err = p.communicate(timeout=600)
            assert p.returncode == 0, err[-3000:]
            break
        got = [json.loads(line) for line in log.read_text().splitlines()]
        want = reference(run_file, ooms, worlds)
        first = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), None)
        assert len(got) == len(want) and got == want, (first, worlds, ooms)
        assert kills == 3
        audit = run_cli(cli, "audit", ledger, check=False)
        if lose:
            assert lost
            assert audit.returncode == 1 and "missing" in audit.stdout, audit.stdout
        else:
            assert audit.returncode == 0, audit.stdout


def test_fields_and_tensor_files_over_the_sources(tables, tmp_path):
    """Per-sample fields and tensor files over a run: one column over the sources' rows,
    gathered by the clips as decoded; names are looked up in every source's CSV."""
    tmp, paths = tables
    import numpy as np
    import pandas as pd

    run_file = write_run(tmp, "run_fields.json")
    fixed_file = write_run(tmp, "run_fields_fixed.json", packed_from=None)
    frames = {n: pd.read_csv(tmp / f"{n}.csv") for n in ("a", "b")}
    npy = {}
    for n, df in frames.items():
        npy[n] = []
        for r in range(len(df)):
            p = tmp_path / f"{n}{r}.npy"
            np.save(p, np.full((2, 3), 1000 * (n == "b") + r, dtype=np.float32))
            npy[n].append(str(p))
    with pytest.raises(ValueError, match='stage "packed" packs'):
        vbucket.Loader(vbucket.Run.from_file(run_file), paths, tensors={"latent": npy})
    batches = packed = stacked = 0
    runs = [vbucket.Run.from_file(run_file), vbucket.Run.from_file(fixed_file)]
    loaders = [vbucket.Loader(runs[0], paths, workers=2, fields=["num_frames", "path"]),
               vbucket.Loader(runs[1], paths, workers=2, fields=["num_frames", "path"],
                              tensors={"latent": npy})]
    for batch in (b for loader in loaders for b in loader):
        names = ["a", "b"]
        want_frames = [int(frames[names[s]].num_frames[r])
                       for s, r in zip(batch.source, batch.row)]
        assert batch.fields["num_frames"].tolist() == want_frames
        assert batch.fields["path"] == [paths[names[s]][r] for s, r in zip(batch.source,
                                                                              batch.row)]
        if batch.packed:
            packed += 1
        elif batch.tensors is not None:  # the second loader's
            stacked += 1
            lat = batch.tensors["latent"]
            assert tuple(lat.shape) == (len(batch.row), 2, 3)
            assert lat[:, 0, 0].tolist() == [1000.0 * s + r for s, r in zip(batch.source,
                                                                            batch.row)]
        batches += 1
    assert batches > packed > 0 and stacked > 0
    with pytest.raises(ValueError, match="source 'b' has"):
        vbucket.Loader(vbucket.Run.from_file(run_file), paths,
                       fields={"x": {"a": list(range(len(frames["a"]))), "b": [1]}})
