"""vbucket.GroupPlan (issue 45) from Python, and the trainer of
examples/python/parallel_layout_trainer.py run with torch.distributed on gloo: world 4 stops after
two steps, a new process resumes at world 2 and finishes the epoch. Checked from the ranks' logs:
the ranks of a group ran the same batch, every rank logged the same (all-reduced) loss, losses are
finite, every batch of the plan ran exactly once and every assigned sample was seen, and the
resumed run started from the saved model and the saved position; the run's ledger audits clean
(``vbucket audit``), and with a group's delivery left out it does not."""

import importlib.util
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import vbucket
from conftest import ledger_lines

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "python", "parallel_layout_trainer.py")


def load_example():
    spec = importlib.util.spec_from_file_location("parallel_layout_trainer", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_logs(folder, world):
    return [[json.loads(line) for line in open(os.path.join(folder, f"rank{r}.jsonl"))]
            for r in range(world)]


def test_group_plan_deals_every_batch_once_and_resumes_under_another_world():
    pytest.importorskip("torch")  # the example module imports torch
    ex = load_example()
    plan = ex.make_plan()
    assert plan.sp_sizes == [2, 1]
    first = plan.deal(4)
    state = first.state_after(2)
    rest = plan.deal(2, state)
    positions = []
    for sched, steps in ((first, range(2)), (rest, range(rest.steps))):
        for k in steps:
            for r in range(sched.world):
                w = sched.work(k, r)
                assert w["first_rank"] % w["sp"] == 0 and w["first_rank"] <= r < w["first_rank"] + w["sp"]
                if w["sp_rank"] == 0 and not w["repeat"]:
                    positions.append(w["position"])
    assert sorted(positions) == list(range(plan.num_batches))


def test_group_plan_errors_name_what_is_wrong():
    pytest.importorskip("torch")
    ex = load_example()
    meta = ex.metadata()
    with pytest.raises(ValueError, match="256px:65.*batch size must be at least 1|256px -> 65"):
        vbucket.GroupPlan(meta, ex.CONFIG, layouts={"256px:1": (1, 4, 2), "256px:33": (2, 2, 1)},
                          remainder="pad")
    with pytest.raises(ValueError, match='layout "256px:7": no such RES:FRAMES pair'):
        vbucket.GroupPlan(meta, ex.CONFIG, layouts={**ex.LAYOUTS, "256px:7": (1, 1, 1)},
                          remainder="pad")
    with pytest.raises(ValueError, match="remainder.*not refuse or pad"):
        vbucket.GroupPlan(meta, ex.CONFIG, layouts=ex.LAYOUTS, remainder="cut")
    with pytest.raises(ValueError, match="sequence-parallel size 2 does not divide world size 3"):
        ex.make_plan().deal(3)
    with pytest.raises(ValueError, match="group state: .*does not start with vbucket-groups"):
        ex.make_plan().deal(2, "vbucket-plan seed=3")


def test_trainer_runs_the_plan_on_gloo_and_resumes_at_another_world(tmp_path, cli):
    torch = pytest.importorskip("torch")
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    ex = load_example()
    a, b, ledger = tmp_path / "a", tmp_path / "b", tmp_path / "ledger"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for args in (["--world", "4", "--stop", "2", "--out", str(a), "--ledger", str(ledger)],
                 ["--world", "2", "--resume", str(a), "--out", str(b), "--ledger", str(ledger)]):
        subprocess.run([sys.executable, EXAMPLE, *args, "--port", str(free_port())], check=True,
                       env=env, timeout=120)

    plan = ex.make_plan()
    saved_state = plan.deal(4).state_after(2)
    runs = [(read_logs(a, 4), plan.deal(4)), (read_logs(b, 2), plan.deal(2, saved_state))]
    # The resumed run started at the saved position with the saved weights.
    assert runs[1][0][0][0]["state"] == saved_state
    saved_checksum = json.load(open(a / "checksum.json"))
    assert all(log[0]["checksum"] == pytest.approx(saved_checksum, rel=1e-12) for log in runs[1][0])

    positions, seen = [], set()
    for logs, schedule in runs:
        steps = [log[1:] for log in logs]
        assert len({len(s) for s in steps}) == 1  # every rank ran every step: no deadlock
        for k in range(len(steps[0])):
            losses = {s[k]["loss"] for s in steps}
            assert len(losses) == 1 and np.isfinite(losses.pop())
            for r, s in enumerate(steps):
                planned = schedule.work(k, r)
                entry = s[k]
                assert entry["position"] == planned["position"] and entry["sp"] == planned["sp"]
                group = steps[entry["first_rank"]][k]  # the group's first rank ran the same batch
                assert group["position"] == entry["position"] and group["indices"] == entry["indices"]
                if r == entry["first_rank"] and not entry["repeat"]:
                    positions.append(entry["position"])
                    seen.update(entry["indices"])
    assert sorted(positions) == list(range(plan.num_batches))
    ids = vbucket.assign(ex.metadata(), ex.CONFIG, seed=3, rng="fast", as_arrays=True)
    assert seen == {i for i, b in enumerate(ids) if b >= 0}

    # The ledger: clean, across world 4 and the resume at world 2 ...
    audit = subprocess.run([cli, "audit", str(ledger)], capture_output=True, text=True)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "clean" in audit.stdout
    # ... and a group's delivery left out is found, naming a sample as missing.
    lines = ledger_lines(cli, ledger / "rank-00000.ledger")
    batch = next(i for i, line in enumerate(lines) if line.startswith("B ") and "rep=1" not in line)
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in os.listdir(ledger):
        if f == "rank-00000.ledger":
            (broken / f).write_text("".join(lines[:batch] + lines[batch + 1:]))
        else:
            (broken / f).write_bytes((ledger / f).read_bytes())
    audit = subprocess.run([cli, "audit", str(broken)], capture_output=True, text=True)
    assert audit.returncode == 1 and "missing" in audit.stdout, audit.stdout + audit.stderr


def test_cli_layout_gives_python_s_layouts_and_plan(cli):
    """`vbucket layout` and vbucket.GroupPlan with the same options: the same table, steps."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cfg = os.path.join(root, "tests", "data", "config_opensora_v2_stage2.json")
    meta = os.path.join(root, "examples", "data", "sample_meta.csv")
    options = dict(memory=(20, 1e-3, 1e-8), memory_limit=80, time=(0.5, 1e-4, 2e-9),
                   comm_per_token=5e-6, comm_per_micro_step=0.01, max_accumulation=8,
                   remainder="pad")
    assert set(options) <= set(vbucket.layout.LAYOUT_OPTIONS)
    flags = []
    for k, v in options.items():
        flags += ["--" + k.replace("_", "-"),
                  ",".join(map(str, v)) if isinstance(v, tuple) else str(v)]
    out = subprocess.run([cli, "layout", "--config", cfg, "--meta", meta, "--world", "8",
                          "--seed", "3", *flags], capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 7 and ":" in parts[0] and parts[3] != "disabled":
            rows[parts[0]] = (int(parts[2]), int(parts[3]), int(parts[4]), int(parts[5]))
    plan = vbucket.GroupPlan(meta, cfg, seed=3, **options)
    mine = {l["name"]: (l["sp"], l["batch_size"], l["micro_batch"], l["accumulation"])
            for l in plan.layouts() if l["batch_size"] > 0}
    assert rows == mine and len(rows) > 10
    steps = int(next(l for l in out.splitlines() if l.startswith("steps:")).split()[1])
    assert steps == plan.deal(8).steps
