"""Issue 42's property: random runs (2–3 weighted sources, 1–3 stages, worlds 1–4, out-of-memory
steps) driven as a trainer writes the loop — ``for batch in run:`` on every rank, the state saved
after each step — in a process killed with SIGKILL at random points and restarted (under another
world at times) train exactly the batches of an uninterrupted run under the same changes; the
ledger the loops wrote audits clean, and a record of a trained step removed before a kill is
found missing.

The sampler and the Loader over it follow the same convention (a test below).

Bounded for CI (2 scenarios, 3 kills each); ``VBUCKET_RUN_KILL_SCENARIOS=20`` and
``VBUCKET_RUN_KILLS=10`` run longer."""

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

import vbucket
from conftest import CONFIG_V2, ledger_lines, run_cli
from test_run import web_meta

SCENARIOS = int(os.environ.get("VBUCKET_RUN_KILL_SCENARIOS", "2"))
KILLS = int(os.environ.get("VBUCKET_RUN_KILLS", "3"))
EPOCHS = 2

TRAINER = textwrap.dedent("""
    import json, os, sys, time
    import vbucket

    run_file, ckpt, log_path, ledger, world, paths = sys.argv[1:7]
    world = int(world)
    oom_steps = set(json.loads(sys.argv[7]))
    state = json.load(open(ckpt)) if os.path.exists(ckpt) else None

    def save(d):  # atomically: a kill leaves the old checkpoint or the new one
        with open(ckpt + ".tmp", "w") as f:
            json.dump(d, f)
        os.replace(ckpt + ".tmp", ckpt)

    def entry(b):  # what the log keeps of a batch: a Run's dict or a Loader's RunBatch
        if isinstance(b, dict):
            return [b["step"], b["rank"], world, b["source"], b["row"], b["pads"], b["repeat"]]
        # decoded as planned (no file fails here)
        assert b.source.tolist() == b.planned_source.tolist() and b.tensor.numel() > 0
        assert b.row.tolist() == b.planned_row.tolist()
        return [b.step, b.rank, b.world, b.source.tolist(), b.row.tolist(), b.pads, b.repeat]

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
    # `for batch in run:` on every rank, or with paths `for batch in loader:` (decoded)
    ranks = runs if not paths else [vbucket.Loader(run, json.load(open(paths)), workers=2,
                                                   prefetch=2) for run in runs]
    while runs[0].epoch < %(epochs)d:
        loops = [iter(rank) for rank in ranks]
        while (step := [next(loop, None) for loop in loops])[0] is not None:
            k = entry(step[0])[0]
            if k in oom_steps and k not in oom_done:
                failing = [k %% world]
                try:
                    for rank in ranks:
                        rank.out_of_memory(failing)
                    oom_done.add(k)
                    continue
                except ValueError:  # the batch size is already 1: trained as it is
                    oom_done.add(k)
            log.write(json.dumps([entry(b) for b in step]) + "\\n")
            log.flush()
            lines += 1
            save({"run": ranks[0].state_dict(), "oom": sorted(oom_done), "lines": lines})
            time.sleep(0.003)  # the training step
""") % {"epochs": EPOCHS}


def scenario(tmp, seed):
    r = random.Random(seed)
    c = json.loads(CONFIG_V2.read_text())
    k = r.choice([2, 3])
    sources = []
    for s in range(k):
        web_meta(tmp / f"s{s}.csv", seed * 10 + s, r.randrange(150, 400))
        sources.append({"name": f"src{s}", "csv": f"s{s}.csv", "weight": r.randrange(1, 5)})
    stages = [{"name": "a", "config": {"256px": c["256px"]}}]
    for i in range(r.randrange(0, 3)):
        stages.append({"name": f"b{i}", "from_step": 8 + 10 * i + r.randrange(8),
                       "config": {"768px": c["768px"]} if i == 0 else {"256px": c["256px"]}})
    if len(stages) == 3 and r.random() < 0.5:
        stages[2].update(batching="packed", budget=400000)
    run = {"seed": seed, "world": r.randrange(1, 5), "epoch_samples": r.randrange(300, 600),
           "sources": sources, "stages": stages}
    (tmp / "run.json").write_text(json.dumps(run))
    ooms = sorted(r.sample(range(1, 40), 2))
    return run, ooms


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
    """Removes rank 0's record of the last step the checkpoint counts as trained."""
    step = json.load(open(ckpt))["run"]["state"].split(" step=")[1].split(" ")[0]
    f = ledger / "rank-00000.ledger"
    lines = ledger_lines(cli, f)
    at = [i for i, line in enumerate(lines)
          if line.startswith("B ") and int(line.split(" s=")[1].split(" ")[0]) < int(step)
          and " rep=1" not in line]
    if not at:
        return False
    del lines[at[-1]]
    f.write_text("".join(lines))
    return True


def drive_with_kills(cli, tmp_path, run_file, ooms, world, rng, lose, kills_wanted, max_world,
                     paths=None, settle=0.008):
    """Runs TRAINER (over the run, or with ``paths`` a Loader over it) in processes killed with
    SIGKILL a few steps after each start, ``kills_wanted`` times, restarted under another world
    (1 to ``max_world``) at times; with ``lose``, the record of the last step the checkpoint
    counts as trained is removed after the first kill. Checks that the steps trained equal the
    uninterrupted run's under the same changes and the audit's verdict."""
    trainer = tmp_path / "trainer.py"
    trainer.write_text(TRAINER)
    paths_file = ""
    if paths is not None:
        paths_file = tmp_path / "paths.json"
        paths_file.write_text(json.dumps(paths))
    d = tmp_path / f"lose{lose}"
    d.mkdir()
    ckpt, log, ledger = d / "ckpt.json", d / "log.jsonl", d / "ledger"
    worlds, kills, lost = {0: world}, 0, False
    while True:
        p = subprocess.Popen([sys.executable, str(trainer), str(run_file), str(ckpt), str(log),
                              str(ledger), str(world), str(paths_file), json.dumps(ooms)],
                             stderr=subprocess.PIPE, text=True)
        if kills < kills_wanted:
            # Killed a few steps after it started (any point of a step).
            lines = json.load(open(ckpt))["lines"] if ckpt.exists() else 0
            until = lines + rng.randrange(1, 4 if paths else 6)
            while p.poll() is None and (json.load(open(ckpt))["lines"]
                                        if ckpt.exists() else 0) < until:
                time.sleep(0.002)
            time.sleep(rng.uniform(0, settle))
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
                kills += 1
                if lose and not lost and ckpt.exists():
                    lost = lose_last_trained_record(cli, ledger, ckpt)
                if rng.random() < 0.5:  # restarted under another world
                    world = rng.randrange(1, max_world + 1)
                if ckpt.exists():
                    state = json.load(open(ckpt))["run"]["state"]
                    worlds[int(state.split(" step=")[1].split(" ")[0])] = world
                else:
                    worlds[0] = world
                continue
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        break
    got = [json.loads(line) for line in log.read_text().splitlines()]
    want = reference(run_file, ooms, worlds)
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    assert len(got) == len(want) and got == want, (first, worlds, ooms,
                                                   got[first] if first is not None else None,
                                                   want[first] if first is not None else None)
    assert kills == kills_wanted  # (the run outlasts the kills)
    audit = run_cli(cli, "audit", ledger, check=False)
    if lose:
        assert lost
        assert audit.returncode == 1 and "missing" in audit.stdout, audit.stdout
    else:
        assert audit.returncode == 0, audit.stdout


@pytest.mark.parametrize("seed", range(1, SCENARIOS + 1))
def test_killed_trainer_trains_the_uninterrupted_batches(cli, tmp_path, seed):
    run, ooms = scenario(tmp_path, seed)
    rng = random.Random(seed * 977)
    for lose in (False, True):
        drive_with_kills(cli, tmp_path, tmp_path / "run.json", ooms, run["world"], rng, lose,
                         KILLS, 4)


def test_sampler_and_loader_follow_the_same_convention():
    """The sampler and the Loader over it hand out batches as the run does: a state_dict()
    taken in the loop body after batch k resumes at batch k + 1."""
    pd = pytest.importorskip("pandas")
    df = pd.read_csv(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data",
                                  "sample_meta.csv"))
    config = {"256px": {"1": (1.0, 3), "51": (1.0, 2), "102": (1.0, 2)}}

    def sampler():
        return vbucket.VariableVideoBatchSampler(df, config, num_replicas=2, rank=1, seed=3,
                                                 rng="fast")

    def ids(batch):  # the sampler's Open-Sora indices "i-T-H-W" as the sample numbers
        return [int(str(x).split("-")[0]) for x in batch]

    s = sampler()
    s.set_epoch(0)
    full = [ids(b) for b in s]
    assert len(full) > 20
    for k in (0, 7, len(full) - 2):
        s = sampler()
        s.set_epoch(0)
        for i, b in enumerate(s):
            if i == k:
                saved = s.state_dict()
                break
        resumed = sampler()
        resumed.load_state_dict(saved)
        assert [ids(b) for b in resumed] == full[k + 1:]
    if not getattr(vbucket._vbucket, "HAS_FFMPEG", False):
        pytest.skip("vbucket built without the FFmpeg adapter (the Loader)")
    pytest.importorskip("torch")
    rows = {"i": list(range(len(df)))}
    for k in (0, 7, len(full) - 2):
        s = sampler()
        s.set_epoch(0)
        with vbucket.Loader(s, None, workers=1, prefetch=2, fields=rows) as loader:
            for i, b in enumerate(loader):
                assert b.indices.tolist() == full[i]
                if i == k:
                    saved = loader.state_dict()  # the workers have decoded ahead meanwhile
                    break
        resumed = sampler()
        resumed.load_state_dict(saved)
        with vbucket.Loader(resumed, None, workers=1, prefetch=2, fields=rows) as loader:
            assert [b.indices.tolist() for b in loader] == full[k + 1:]
