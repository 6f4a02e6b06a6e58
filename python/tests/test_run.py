"""vbucket.Run (issue 31): a two-source, two-stage run file gives the CLI's batches
(`vbucket plan --run`) for every rank, and a run interrupted at a random step and resumed from
its state_dict under another world size delivers every drawn sample of the epoch exactly once."""

from __future__ import annotations

import collections
import json
import random

import pytest

import vbucket
from conftest import CONFIG_V2, ledger_lines, run_cli

SIZES = [(1080, 1920), (720, 1280), (480, 854), (360, 640), (1920, 1080), (1080, 1080),
         (240, 426), (2160, 3840), (800, 1920), (64, 64)]  # fmt: skip


def web_meta(path, seed, rows):
    r = random.Random(seed)
    with open(path, "w") as f:
        f.write("path,num_frames,height,width,fps\n")
        for i in range(rows):
            h, w = r.choice(SIZES)
            if r.randrange(100) < 15:
                f.write(f"img{i}.jpg,1,{h},{w},\n")
            else:
                f.write(f"v{i}.mp4,{20 + r.randrange(900)},{h},{w},{r.choice([24, 25, 30, 60])}\n")


@pytest.fixture(scope="module")
def run_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    web_meta(d / "web.csv", 11, 900)
    web_meta(d / "curated.csv", 12, 400)
    c = json.loads(CONFIG_V2.read_text())
    (d / "stage1.json").write_text(json.dumps({"256px": c["256px"]}))
    run = {"seed": 7, "world": 4, "rank": 0, "epoch_samples": 1000,
           "sources": [{"name": "web", "csv": "web.csv", "weight": 0.7},
                       {"name": "curated", "csv": "curated.csv", "weight": 0.3}],
           "stages": [{"name": "stage1-256px", "config": "stage1.json"},
                      {"name": "stage2-768px", "from_step": 12,
                       "config": {"768px": c["768px"]}}]}  # fmt: skip
    (d / "run.json").write_text(json.dumps(run))
    return d / "run.json"


def as_cli_line(b):
    """A batch dict in the CLI's JSON-line shape (its key names, lists for tuples)."""
    out = {k: b[k] for k in ("step", "epoch", "stage", "rank")}
    if b["bucket"] is not None:
        out["bucket"] = list(b["bucket"])
    out["thw"] = list(b["thw"])
    out["source"] = list(b["source"])
    out["row"] = list(b["row"])
    out["pads"] = b["pads"]
    out["repeat"] = b["repeat"]
    return out


def all_ranks(run, epochs):
    """Every rank's batches, step by step, until `epochs` begins (what --rank all writes)."""
    lines = []
    while run.epoch < epochs:
        lines += [as_cli_line(run.batch(r)) for r in range(run.world)]
        run.advance()
    return lines


def cli_lines(cli, tmp_path, *args):
    out = tmp_path / "out.jsonl"
    run_cli(cli, "plan", *args, "--rank", "all", "--quiet", "--out", out)
    return [json.loads(line) for line in out.read_text().splitlines()]


def delivered(lines):
    """The (source, row) pairs delivered, pads and rank-alignment repeats left out."""
    c = collections.Counter()
    for b in lines:
        if b["repeat"]:
            continue
        n = len(b["row"]) - b["pads"]
        c.update(zip(b["source"][:n], b["row"][:n]))
    return c


def test_run_gives_the_cli_batches(cli, run_file, tmp_path):
    want = cli_lines(cli, tmp_path, "--run", run_file, "--epochs", "2")
    got = all_ranks(vbucket.Run.from_file(run_file), 2)
    assert len(want) > 4 * 12 and {b["stage"] for b in want} == {0, 1}
    assert {s for b in want for s in b["source"]} == {0, 1}
    assert got == want
    # The iterator of one rank yields that rank's lines of the epoch, then stops.
    run = vbucket.Run.from_file(run_file, rank=2)
    assert [as_cli_line(b) for b in run] == [b for b in want if b["rank"] == 2 and b["epoch"] == 0]
    assert run.epoch == 1


def epoch_lines(lines, epoch):
    return [b for b in lines if b["epoch"] == epoch]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_resumed_under_another_world_delivers_each_sample_once(cli, run_file, tmp_path, seed):
    """Interrupted at a random step of epoch 1 (all of it in stage 2, so the samples the stage
    can place are fixed) and resumed under another world: each sample the uninterrupted epoch
    delivers, once. Interrupted in epoch 0 (across the stage change): no sample twice, and the
    CLI resumed from the same state line under the same world writes the same lines."""
    rng = random.Random(seed)
    full = all_ranks(vbucket.Run.from_file(run_file), 2)
    for epoch in (0, 1):
        want = delivered(epoch_lines(full, epoch))
        assert len(want) > 100 and max(want.values()) == 1  # no replacement: each pair once
        run = vbucket.Run.from_file(run_file)
        part1 = []
        while run.epoch < epoch:
            run.advance()
        steps = len(epoch_lines(full, epoch)) // 4
        k = rng.randrange(1, steps - 1)
        for _ in range(k):
            part1 += [as_cli_line(run.batch(r)) for r in range(run.world)]
            run.advance()
        saved = json.loads(json.dumps(run.state_dict()))
        assert saved["format"] == "vbucket-run-1"
        assert saved["state"].startswith("vbucket-run v=1 ")

        world = rng.choice([2, 3, 5])
        resumed = vbucket.Run.from_file(run_file, rank=0)
        resumed.load_state_dict(saved)
        assert resumed.step == run.step and resumed.epoch == epoch
        resumed.set_world(world)
        part2 = all_ranks(resumed, epoch + 1)
        assert {b["rank"] for b in part2} == set(range(world))
        got = delivered(part1 + part2)
        assert max(got.values()) == 1
        if epoch == 1:
            assert got == want
        assert part2 == cli_lines(cli, tmp_path, "--run", run_file, "--state", saved["state"],
                                  "--world", world, "--epochs", epoch + 1)  # fmt: skip


def test_out_of_memory_keeps_each_sample_once(run_file):
    full = all_ranks(vbucket.Run.from_file(run_file), 2)
    run = vbucket.Run.from_file(run_file)
    while run.epoch < 1:
        run.advance()
    lines = []
    for _ in range(3):
        lines += [as_cli_line(run.batch(r)) for r in range(run.world)]
        run.advance()
    while not [r for r in range(run.world) if len(run.batch(r)["row"]) > 1]:
        lines += [as_cli_line(run.batch(r)) for r in range(run.world)]
        run.advance()
    rank = [r for r in range(run.world) if len(run.batch(r)["row"]) > 1][0]
    assert " caps=- " in run.state()
    run.out_of_memory([rank])
    assert " caps=- " not in run.state()  # that rank's bucket got a smaller batch size
    lines += all_ranks(run, 2)
    assert run.epoch == 2
    assert delivered(lines) == delivered(epoch_lines(full, 1))


def test_ledger_is_the_clis_and_audits_clean(cli, run_file, tmp_path):
    """Python's ledger of the whole run is the CLI's (--ledger), byte for byte; a run
    interrupted, resumed under world 3 and hit by an out-of-memory step audits clean."""
    run_cli(cli, "plan", "--run", run_file, "--rank", "all", "--epochs", "2", "--quiet",
            "--out", tmp_path / "full.jsonl", "--ledger", tmp_path / "cli")  # fmt: skip
    run = vbucket.Run.from_file(run_file)
    while run.epoch < 2:
        run.write_ledger(tmp_path / "py", ranks=[])
        run.advance()
    names = sorted(p.name for p in (tmp_path / "cli").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "py").iterdir()) and len(names) == 4
    for n in names:
        assert (tmp_path / "py" / n).read_bytes() == (tmp_path / "cli" / n).read_bytes(), n

    runs = [vbucket.Run.from_file(run_file, rank=r) for r in range(4)]
    for _ in range(7):
        for r in runs:
            r.write_ledger(tmp_path / "L")
        for r in runs:
            r.advance()
    saved = runs[0].state_dict()
    runs = [vbucket.Run.from_file(run_file, rank=r) for r in range(3)]
    for r in runs:
        r.load_state_dict(saved)
        r.set_world(3)
    oom = False
    while runs[0].epoch < 2:
        if not oom and runs[0].stage == 0 and runs[0].step > 9:
            for r in runs:
                r.out_of_memory()
            oom = True
        for r in runs:
            r.write_ledger(tmp_path / "L")
        for r in runs:
            r.advance()
    assert oom
    out = run_cli(cli, "audit", tmp_path / "L")
    assert "clean: " in out.stdout
    # A ledger with a batch missing does not.
    f = tmp_path / "L" / names[1]
    lines = ledger_lines(cli, f)
    batch_lines = [i for i, line in enumerate(lines) if line.startswith("B")]
    del lines[batch_lines[len(batch_lines) // 2]]
    f.write_text("".join(lines))
    assert run_cli(cli, "audit", tmp_path / "L", check=False).returncode == 1


def test_bad_state_and_rank(run_file):
    run = vbucket.Run.from_file(run_file)
    with pytest.raises(ValueError, match="format"):
        run.load_state_dict({"format": "other", "state": run.state()})
    with pytest.raises(ValueError, match="rank 4 is not below world 4"):
        vbucket.Run.from_file(run_file, rank=4)
    with pytest.raises(ValueError, match="run.json"):
        vbucket.Run.from_file(run_file.parent / "missing" / "run.json")


def lockstep(runs):
    """One step of every rank's ``for b in run:`` loop (None at the end of the epoch)."""
    got = [next(it, None) for it in runs]
    assert len({b is None for b in got}) == 1
    return None if got[0] is None else got


def test_state_taken_in_the_loop_body_resumes_at_the_next_batch(run_file):
    """Regression (issue 42): a state_dict() taken after batch k was handed out resumed at batch
    k again (its samples trained twice)."""
    want = [as_cli_line(b) for b in vbucket.Run.from_file(run_file, rank=1)]
    for k in (0, 5, len(want) - 2):
        run = vbucket.Run.from_file(run_file, rank=1)
        for i, b in enumerate(run):
            if i == k:
                saved = run.state_dict()
                break
        resumed = vbucket.Run.from_file(run_file, rank=1)
        resumed.load_state_dict(saved)
        assert [as_cli_line(b) for b in resumed] == want[k + 1:]
    # Taken after the epoch's last batch: the next epoch's first batch.
    run = vbucket.Run.from_file(run_file, rank=1)
    for b in run:
        saved = run.state_dict()
    assert run.epoch == 1 and vbucket.Run.from_file(run_file).world == 4
    resumed = vbucket.Run.from_file(run_file, rank=1)
    resumed.load_state_dict(saved)
    assert next(iter(resumed))["epoch"] == 1


def test_out_of_memory_in_the_loop_body_replans_that_step(run_file):
    """Regression (issue 42): out_of_memory() after batch k was handed out skipped the step
    planned again (its samples never delivered). Now the next batch handed out is step k again,
    smaller, and the epoch delivers each of its samples once."""
    full = all_ranks(vbucket.Run.from_file(run_file), 2)
    runs = [vbucket.Run.from_file(run_file, rank=r) for r in range(4)]
    its = [iter(r) for r in runs]
    while lockstep(its) is not None:  # epoch 0
        pass
    its = [iter(r) for r in runs]
    lines, failed = [], None
    while (step := lockstep(its)) is not None:
        big = [b["rank"] for b in step if len(b["row"]) > 1]
        if failed is None and len(lines) > 8 and big:
            failed = step
            for r in runs:
                r.out_of_memory([big[0]])
            continue
        if failed is not None and failed != "checked":
            assert step[0]["step"] == failed[0]["step"]  # the same step, planned again
            failed = "checked"
        lines += [as_cli_line(b) for b in step]
    assert failed == "checked"
    assert runs[0].epoch == 2
    assert delivered(lines) == delivered(epoch_lines(full, 1))


def test_load_state_dict_restores_the_world_it_was_saved_under(run_file):
    """Regression (issue 42): a state saved at world 1 loaded under the run file's world 4."""
    run = vbucket.Run.from_file(run_file)
    run.set_world(1)
    it = iter(run)
    for _ in range(3):
        next(it)
    saved = run.state_dict()
    want = [as_cli_line(b) for b in run]
    resumed = vbucket.Run.from_file(run_file)
    assert resumed.world == 4
    resumed.load_state_dict(saved)
    assert resumed.world == 1
    assert [as_cli_line(b) for b in resumed] == want
    other = vbucket.Run.from_file(run_file, rank=1)
    with pytest.raises(ValueError, match="rank 1 is not below world 1"):
        other.load_state_dict(saved)
    other.load_state_dict(saved, world=2)
    assert other.world == 2 and other.step == resumed.step - len(want)


def test_the_loop_writes_the_ledger_and_a_kill_leaves_it_agreeing(cli, run_file, tmp_path):
    """Every rank's loop writes its ledger; killed with batches in hand (records written, state
    not saved) and resumed under another world, the ledger is cut back to the state: the audit
    is clean. A record of a trained step lost before a kill is found missing."""
    for lose in (False, True):
        d = tmp_path / f"L{lose}"
        runs = [vbucket.Run.from_file(run_file, rank=r, ledger=d) for r in range(4)]
        its = [iter(r) for r in runs]
        saved, kills, n = runs[0].state_dict(), 0, 0
        while runs[0].epoch < 2:
            step = lockstep(its)
            if step is None:
                its = [iter(r) for r in runs]
                continue
            n += 1
            if n % 9 == 0 or (lose and n == 20):  # a kill -9 ...
                if lose and n == 20:  # ... the record of the last step saved is lost
                    f = d / "rank-00000.ledger"
                    lines = ledger_lines(cli, f)
                    trained = [i for i, line in enumerate(lines) if line.startswith("B ")][:-1]
                    last = trained[-1]  # (the last record is the batch in hand's)
                    assert " rep=1" not in lines[last]
                    f.write_text("".join(lines[:last] + lines[last + 1:]))
                kills += 1
                world = [3, 4, 2][kills % 3]
                runs = [vbucket.Run.from_file(run_file, rank=r, ledger=d, world=world)
                        for r in range(world)]
                for r in runs:
                    r.load_state_dict(saved, world=world)
                its = [iter(r) for r in runs]
                continue
            states = {r.state_dict()["state"] for r in runs}
            assert len(states) == 1
            saved = runs[0].state_dict()
        assert kills >= 3
        out = run_cli(cli, "audit", d, check=False)
        assert (out.returncode == 0) == (not lose), out.stdout
        if lose:
            assert "missing" in out.stdout


def test_refused_state_leaves_the_run_unchanged(run_file):
    """A state the run refuses (past the end, an edited field, a duplicated or unknown field,
    world 0) raises and leaves the position as it was: the next batch is the same (it used to
    be overwritten, and batch() crashed)."""
    run = vbucket.Run.from_file(run_file)
    saved = run.state_dict()
    for _ in range(3):
        run.advance()
    before = run.state()
    batch = run.batch(0)
    line = saved["state"]
    bad = [line.replace(" consumed=0 ", " consumed=999999 "),
           line.replace(" epoch=0 ", " epoch=5 "),
           line.replace(" world=4 ", " world=0 "),
           line.replace(" world=4 ", " world=4 world=4 "),
           line.replace(" world=4 ", " world=4 colour=blue ")]
    assert all(b != line for b in bad)
    for b in bad:
        with pytest.raises(ValueError, match="run state"):
            run.load_state_dict({"format": saved["format"], "state": b})
        assert run.state() == before
        assert run.batch(0) == batch
    run.advance()  # the run goes on
