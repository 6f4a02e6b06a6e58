"""Issue 29's process-level property: a trainer process (vbucket.Loader over precomputed tensor
files, its state saved atomically after every step) killed with SIGKILL at random points and
restarted 30 times, also under other world sizes (2, 3, 1, 2, 4, 1, 3, ...; ranks simulated in
one process, one Loader each): the union of the batches it delivered equals the uninterrupted
run's, alignment and counted repeats aside (held epochs, the default)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from vbucket import _vbucket

from tensor_rows import tensor_meta

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter (the Loader)")
pytest.importorskip("torch")

TRAINER = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np
    import pandas as pd
    import vbucket

    meta, state_path, log_path, world, epochs = sys.argv[1], sys.argv[2], sys.argv[3], \\
        int(sys.argv[4]), int(sys.argv[5])
    CONFIG = {"256px": {"1": (1.0, 3), "5": (1.0, 2), "9": (0.5, 2)}}
    df = pd.read_csv(meta)
    state = json.load(open(state_path)) if os.path.exists(state_path) else {"epoch": 0}

    def save(d):  # atomically: a kill leaves the old state or the new one, never half of one
        tmp = state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(d, f)
        os.replace(tmp, state_path)

    log = open(log_path, "a")
    for epoch in range(state["epoch"], epochs):
        loaders = []
        for r in range(world):
            # held epochs (the default): every epoch runs epoch 0's length, under every world
            s = vbucket.VariableVideoBatchSampler(df, CONFIG, num_replicas=world, rank=r, seed=3,
                                                  rng="fast")
            if state.get("sampler") is not None and state["epoch"] == epoch:
                s.load_state_dict(state["sampler"])
            else:
                s.set_epoch(epoch)
                s.reset()
            loaders.append(vbucket.Loader(s, None, workers=1, prefetch=1,
                                          tensors={"x": df["tensor"]}))
        for _ in range(len(loaders[0])):
            for r, loader in enumerate(loaders):
                b = next(loader)
                assert b.tensors["x"][:, 0].tolist() == b.indices.tolist()
                log.write(json.dumps({"e": epoch, "p": b.position, "repeat": b.repeat,
                                      "i": b.indices.tolist()}) + "\\n")
            log.flush()
            save({"epoch": epoch, "sampler": loaders[0].state_dict()})
            time.sleep(0.002)  # the training step: the run lasts long enough for 30 kills
        for loader in loaders:
            loader.close()
        state = {"epoch": epoch + 1}
        save(state)
""")


def _delivered(log_path):
    out = set()
    with open(log_path) as f:
        for line in f:
            if not line.endswith("\n"):
                continue  # a line cut by the kill
            d = json.loads(line)
            if not d["repeat"]:
                out.add((d["e"], d["p"], tuple(d["i"])))
    return out


def test_sigkill_and_restart_under_other_worlds_delivers_the_same_batches(tmp_path):
    tensor_meta(tmp_path).to_csv(tmp_path / "meta.csv", index=False)
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    epochs = 8

    def run(state, log, world):
        return subprocess.Popen([sys.executable, str(script), str(tmp_path / "meta.csv"),
                                 str(state), str(log), str(world), str(epochs)], env=env,
                                stderr=subprocess.PIPE)

    ref = run(tmp_path / "ref.json", tmp_path / "ref.log", 2)
    assert ref.wait(120) == 0, ref.stderr.read().decode()
    expected = _delivered(tmp_path / "ref.log")
    assert len(expected) > 50

    pick = random.Random(11)
    state, log = tmp_path / "killed.json", tmp_path / "killed.log"
    kills, worlds = 0, [2, 3, 1, 2, 4, 1, 3]
    for attempt in range(60):
        world = worlds[attempt % len(worlds)]
        p = run(state, log, world)
        size = os.path.getsize(log) if log.exists() else 0
        deadline = time.time() + 60
        while p.poll() is None and time.time() < deadline:  # kill once it is delivering
            if log.exists() and os.path.getsize(log) > size:
                break
            time.sleep(0.005)
        if p.poll() is None and kills < 30:
            time.sleep(pick.uniform(0.0, 0.05))
            p.send_signal(signal.SIGKILL)
            p.wait()
            kills += 1
            continue
        assert p.wait(120) == 0, p.stderr.read().decode()
        break
    assert kills == 30  # 30 random points (after delivery started, 0-50 ms in)
    assert json.loads(state.read_text()) == {"epoch": epochs}
    assert _delivered(log) == expected


@pytest.mark.parametrize("hold_epochs", [True, False])
def test_an_epoch_ended_under_a_larger_world_closes_under_a_smaller_one(tmp_path, hold_epochs):
    """The deterministic case the SIGKILL test hit: an epoch run to its end under world 2 or 4
    (its last step holds an alignment repeat: the position is one past the epoch's batches),
    killed before the next epoch was saved, restarted under world 1: the Loader delivers
    nothing and ``close()`` gives the sampler back a state it accepts (it recorded world 1 and
    was refused as "past the end of epoch"). Held epochs (the default) and each epoch's own
    length alike."""
    import vbucket

    df = tensor_meta(tmp_path)
    config = {"256px": {"1": (1.0, 3), "5": (1.0, 2), "9": (0.5, 2)}}

    def loaders(world, state=None):
        out = []
        for r in range(world):
            s = vbucket.VariableVideoBatchSampler(df, config, num_replicas=world, rank=r, seed=3,
                                                  rng="fast", hold_epochs=hold_epochs)
            if state is None:
                s.set_epoch(1)
                s.reset()
            else:
                s.load_state_dict(state)
            out.append(vbucket.Loader(s, None, workers=1, prefetch=1,
                                      tensors={"x": df["tensor"]}))
        return out

    for big in (2, 4):
        first = loaders(big)
        for _ in range(len(first[0])):
            for loader in first:
                next(loader)
        end = first[0].state_dict()
        for loader in first:
            loader.close()
        for small in (1, 2, 3):
            again = loaders(small, end)
            assert len(again[0]) == 0
            for loader in again:
                loader.close()  # raised ValueError before the fix
            consumed = [f for f in end["state"].split() if f.startswith("consumed=")]
            assert consumed and consumed[0] in again[0].state_dict()["state"].split()
            last = loaders(small, again[0].state_dict())  # and the state loads again
            assert len(last[0]) == 0
            for loader in last:
                loader.close()
