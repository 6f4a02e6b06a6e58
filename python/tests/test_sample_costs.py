"""Per-sample costs (run spec field ``sample_costs``, a file of one number per metadata row):
Python's ``sample_costs=`` gives the batches of ``vbucket plan --sample-costs``, the costs
reorder them, the resume state records their hash (a state is refused under other costs), and a
bad file is a ValueError naming it."""

from __future__ import annotations

import random

import pytest

import vbucket
from conftest import CONFIG_V2, SAMPLE_META, read_jsonl, run_cli


def _rows() -> int:
    with open(SAMPLE_META) as f:
        return sum(1 for line in f if line.strip()) - 1  # less the header


def _write_costs(path, seed: int, rows: int | None = None) -> str:
    """Skewed costs: a tenth of the rows cost 40, the rest 0.5 (with a header line)."""
    r = random.Random(seed)
    n = _rows() if rows is None else rows
    path.write_text("cost\n" + "".join(f"{r.choice([0.5] * 9 + [40.0])}\n" for _ in range(n)))
    return str(path)


def test_sample_costs_kwarg_gives_the_cli_batches(cli, tmp_path):
    costs = _write_costs(tmp_path / "costs.txt", 1)
    common = ["--config", CONFIG_V2, "--meta", SAMPLE_META, "--rng", "fast", "--seed", 5,
              "--epoch", 1, "--world", 2, "--balance-group", 8, "--quiet"]
    for rank in range(2):
        out, plain = tmp_path / f"cost{rank}.jsonl", tmp_path / f"plain{rank}.jsonl"
        run_cli(cli, "plan", *common, "--rank", rank, "--out", out, "--sample-costs", costs)
        run_cli(cli, "plan", *common, "--rank", rank, "--out", plain)
        expected = [e["indices"] for e in read_jsonl(out)]
        without = [e["indices"] for e in read_jsonl(plain)]
        assert expected and expected != without  # the costs reorder the batches
        s = vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_V2, num_replicas=2, rank=rank,
                                              seed=5, rng="fast", balance=8,
                                              sample_costs=costs, output="indices",
                                              hold_epochs=False)  # epoch 1 as planned
        s.set_epoch(1)
        assert list(s) == expected


def test_sample_costs_state_is_refused_under_other_costs(tmp_path):
    costs = _write_costs(tmp_path / "costs.txt", 2)
    other = _write_costs(tmp_path / "other.txt", 3)
    kw = dict(num_replicas=2, rank=0, seed=9, rng="fast", balance=8, output="indices")
    s = vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_V2, sample_costs=costs, **kw)
    s.set_epoch(0)
    first = list(s)
    state = s.state_dict(num_steps=3)
    assert " sample_cost=" in state["state"]
    same = vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_V2, sample_costs=costs, **kw)
    same.load_state_dict(state)
    assert list(same) == first[3:]
    for name, sampler in [
        ("none", vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_V2, **kw)),
        ("other", vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_V2, sample_costs=other,
                                                    **kw)),
    ]:
        with pytest.raises(ValueError, match="per-sample costs"):
            sampler.load_state_dict(state)


def test_sample_costs_bad_files_are_named(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("1\n2\nabc\n")
    with pytest.raises(ValueError, match=r"bad\.txt:3: expected one per-sample cost"):
        vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_V2, sample_costs=bad)
    negative = tmp_path / "negative.txt"
    negative.write_text("1\n-1\n")
    with pytest.raises(ValueError, match=r"negative\.txt:2: a per-sample cost must be"):
        vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_V2, sample_costs=negative)
    short = _write_costs(tmp_path / "short.txt", 4, rows=10)
    with pytest.raises(ValueError, match=rf"short\.txt holds 10 per-sample costs for the "
                                         rf"{_rows()} samples"):
        s = vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_V2, sample_costs=short)
        list(s)
    with pytest.raises(ValueError, match="sample_costs applies to batching fixed only"):
        vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_V2, sample_costs=short,
                                          batching="packed", token_budget=60000.0)
    with pytest.raises(TypeError, match="sample_costs must be a path"):
        vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_V2, sample_costs=[1.0, 2.0])
