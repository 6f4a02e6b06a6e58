"""Issue 43: a vbucket.Loader over the drop-in sampler with held epochs (the default) follows the
held schedule: ``len(loader)`` is the held length at every epoch, its batches are the held
sampler's own (carried tails, counted repeats), ``batch.step`` follows the plan, and its
``state_dict()`` — saved in one process, loaded in a new one — resumes exactly where it stopped,
over epochs whose real lengths differ from the held one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from vbucket import _vbucket

from tensor_rows import tensor_meta

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter (the Loader)")
pytest.importorskip("torch")

CONFIG = {"256px": {"1": (1.0, 3), "5": (1.0, 2), "9": (0.5, 2)}}
EPOCHS = 4

# A trainer process: one Loader per rank over a held sampler (the default), train.py's order
# (len taken each epoch and checked against the first), the state saved after every step; it
# exits at (stop epoch, stop step) as a stopped job would, and a new process resumes from the file.
TRAINER = textwrap.dedent("""
    import json, os, sys
    import pandas as pd
    import vbucket

    meta, state_path, log_path = sys.argv[1], sys.argv[2], sys.argv[3]
    world, drop_last, epochs = int(sys.argv[4]), sys.argv[5] == "1", int(sys.argv[6])
    stop = (int(sys.argv[7]), int(sys.argv[8]))
    CONFIG = json.loads(sys.argv[9])
    df = pd.read_csv(meta)
    state = json.load(open(state_path)) if os.path.exists(state_path) else {"epoch": 0}

    def save(d):
        with open(state_path + ".tmp", "w") as f:
            json.dump(d, f)
        os.replace(state_path + ".tmp", state_path)

    log = open(log_path, "a")
    for epoch in range(state["epoch"], epochs):
        loaders, samplers = [], []
        for r in range(world):
            s = vbucket.VariableVideoBatchSampler(df, CONFIG, num_replicas=world, rank=r, seed=3,
                                                  rng="fast", drop_last=drop_last)
            if state.get("sampler") is not None and state["epoch"] == epoch:
                s.load_state_dict(state["sampler"])
            else:
                s.set_epoch(epoch)
            samplers.append(s)
            loaders.append(vbucket.Loader(s, None, workers=1, prefetch=1,
                                          tensors={"x": df["tensor"]}))
        log.write(json.dumps({"len": [len(l) for l in loaders], "e": epoch}) + "\\n")
        for _ in range(len(loaders[0])):
            step = None
            for r, loader in enumerate(loaders):
                b = next(loader)
                assert b.tensors["x"][:, 0].tolist() == b.indices.tolist()
                step = b.step
                log.write(json.dumps({"e": epoch, "r": r, "step": b.step, "repeat": b.repeat,
                                      "i": b.indices.tolist()}) + "\\n")
            log.flush()
            save({"epoch": epoch, "sampler": loaders[0].state_dict()})
            if (epoch, step + 1) == stop:
                for loader in loaders:
                    loader.close()
                sys.exit(0)
        for loader in loaders:
            try:
                next(loader)
                raise AssertionError("a batch past len(loader)")
            except StopIteration:
                pass
            loader.close()
        state = {"epoch": epoch + 1}
        save(state)
""")


def _sampler(df, world, rank, drop_last, **kw):
    import vbucket

    return vbucket.VariableVideoBatchSampler(df, CONFIG, num_replicas=world, rank=rank, seed=3,
                                             rng="fast", drop_last=drop_last, output="indices",
                                             **kw)


@pytest.mark.parametrize("world,drop_last", [(1, False), (3, False), (3, True)])
def test_loader_over_held_epochs_resumes_in_new_processes(tmp_path, world, drop_last):
    df = tensor_meta(tmp_path)
    df.to_csv(tmp_path / "meta.csv", index=False)

    # The data epochs' real lengths (each epoch's own plan, world 1: every global batch in
    # order) differ from the held length, epoch 0's: some epoch is carried or filled.
    stream, real = [], []
    for e in range(EPOCHS + 1):
        s = _sampler(df, 1, 0, drop_last, hold_epochs=False)
        s.set_epoch(e)
        batches = [list(b) for b in s]
        real.append(len(batches))
        stream += [(e, b) for b in batches]
    quota = real[0]
    assert any(n != quota for n in real[1:EPOCHS]), real

    # The held sampler's own batches (its iteration), rank by rank, epoch by epoch.
    held = {}  # (epoch, step, rank) -> (indices, repeat)
    steps = None
    for r in range(world):
        s = _sampler(df, world, r, drop_last)
        if steps is None:
            steps = len(s) // world  # global micro-batches (num_groups=1): steps · world
        for e in range(EPOCHS):
            s.set_epoch(e)
            assert len(s) == steps * world
            got = list(s)
            assert len(got) == steps
            for k, b in enumerate(got):
                held[(e, k, r)] = list(b)
    assert steps == (quota // world if drop_last else -(-quota // world))
    reports = [_sampler(df, world, 0, drop_last).held_epoch(e) for e in range(EPOCHS)]
    repeats = sum(rep["repeats"] for rep in reports)
    carried = sum(rep["start"][0] < e for e, rep in enumerate(reports))
    print(f"world {world} drop_last {drop_last}: data epochs {real}, held to {quota}; "
          f"{repeats} counted repeat slots, {carried} epochs open with a carried tail")
    assert repeats + carried > 0

    # The trainer, stopped in epochs 0 and 2 and resumed each time in a new process.
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    state, log = tmp_path / "state.json", tmp_path / "log.jsonl"
    for stop in ((0, 5), (2, 7), (-1, -1)):
        p = subprocess.run([sys.executable, str(script), str(tmp_path / "meta.csv"), str(state),
                            str(log), str(world), "1" if drop_last else "0", str(EPOCHS),
                            str(stop[0]), str(stop[1]), json.dumps(CONFIG)],
                           env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        if stop[0] >= 0:
            saved = json.loads(state.read_text())
            assert saved["epoch"] == stop[0]
            assert saved["sampler"]["consumed_batches"] == stop[1] * world
    assert json.loads(state.read_text()) == {"epoch": EPOCHS}

    lines = [json.loads(line) for line in log.read_text().splitlines()]
    lens = [d for d in lines if "len" in d]
    # len(loader) is the held length (train.py's, taken once) at every epoch; after a resume,
    # the steps left.
    assert [d["e"] for d in lens] == [0, 0, 1, 2, 2, 3]
    assert [d["len"] for d in lens] == [[n] * world for n in (steps, steps - 5, steps, steps,
                                                                steps - 7, steps)]

    delivered = [d for d in lines if "len" not in d]
    k = {}
    trained = {}
    for d in delivered:
        key = (d["e"], d["r"])
        trained[(d["e"], d["step"], d["r"])] = d["i"]
        # the steps follow the plan: consecutive within an epoch, across the resumes too
        assert d["step"] == k.get(key, 0), d
        k[key] = d["step"] + 1
    assert trained == held  # every batch of every rank, each step once, none past the end
    # The trained non-repeat batches are the data epochs' batches in stream order, once each
    # (with drop_last, an epoch's incomplete last step is dropped: at most world - 1 a epoch).
    order = sorted((d["e"], d["step"], d["r"]) for d in delivered if not d["repeat"])
    firsts = [trained[x] for x in order]
    skipped, at = 0, 0
    for b in firsts:
        while stream[at][1] != b:
            at += 1
            skipped += 1
        at += 1
    assert skipped <= (EPOCHS * (world - 1) if drop_last else 0)
    n_repeat = sum(d["repeat"] for d in delivered)
    print(f"trained {len(delivered)} batches, {n_repeat} counted repeats, {skipped} dropped")
    assert len(firsts) + n_repeat == EPOCHS * steps * world
