"""The Python results are the CLI's: `vbucket plan` batches per rank, `vbucket assign`'s CSV and
`vbucket stats`' table, for the same arguments."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import vbucket
from conftest import CONFIG_360P, CONFIG_V2, CONFIG_V12, SAMPLE_META, read_jsonl, run_cli

CASES = [
    # config, rule, rng, seed, epoch, world, policy, drop_last, balance
    (CONFIG_360P, "opensora-v2", "numpy", 42, 0, 1, "pad", False, False),
    (CONFIG_360P, "opensora-v2", "fast", 5, 3, 4, "pad", False, True),
    (CONFIG_V2, "opensora-v2", "numpy", 2**70 + 3, 1, 3, "downgrade", False, False),
    (CONFIG_V2, "opensora-v2", "fast", 11, 0, 2, "drop", True, False),
    (CONFIG_V12, "opensora-v1.2", "numpy", 1234, 2, 3, "pad", False, False),
]


def _flags(config, rule, rng, seed, epoch, world, policy, drop_last, balance):
    f = ["--config", config, "--meta", SAMPLE_META, "--rule", rule, "--rng", rng,
         "--seed", seed, "--epoch", epoch, "--world", world, "--policy", policy]
    return f + (["--drop-last"] if drop_last else []) + (["--balance"] if balance else [])


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0].stem}-{c[2]}-w{c[5]}-{c[6]}")
def test_sampler_equals_vbucket_plan(case, cli, tmp_path, sample_df):
    config, rule, rng, seed, epoch, world, policy, drop_last, balance = case
    for rank in range(world):
        out = tmp_path / f"rank{rank}.jsonl"
        run_cli(cli, "plan", *_flags(*case), "--rank", rank, "--out", out, "--quiet")
        expected = read_jsonl(out)
        s = vbucket.VariableVideoBatchSampler(
            sample_df, config, num_replicas=world, rank=rank, seed=seed, drop_last=drop_last,
            rule=rule, rng=rng, policy=policy, balance=balance, output="indices",
            hold_epochs=False)  # each epoch's own length: the plan (held epochs differ from 1 on)
        s.set_epoch(epoch)
        # len() is Open-Sora's (the epoch's global micro-batches); this rank's steps:
        assert s.steps_left() == len(expected) > 0 and len(s) == world * len(expected)
        got = list(s)
        assert got == [e["indices"] for e in expected]
        # the strings carry each step's target shape
        s.set_epoch(epoch)
        s.output, s._strings = "opensora", True
        strings = list(s)
        for e, batch in zip(expected, strings):
            t, h, w = e["thw"]
            assert batch == [f"{i}-{t}-{h}-{w}" for i in e["indices"]]


def test_assign_equals_vbucket_assign(cli, tmp_path):
    out = tmp_path / "assign.csv"
    run_cli(cli, "assign", "--config", CONFIG_V2, "--meta", SAMPLE_META, "--rule",
            "opensora-v2", "--rng", "numpy", "--seed", 9, "--epoch", 2, "--out", out, "--quiet")
    expected = pd.read_csv(out, keep_default_na=False, dtype=str)
    got = vbucket.assign(SAMPLE_META, CONFIG_V2, seed=9, epoch=2, rng="numpy")
    assert len(got) == len(expected)
    # the CLI's T, H, W are Python's bucket_t, bucket_h, bucket_w (df.T is pandas' transpose)
    assert not {"T", "H", "W"} & set(got.columns)
    got = got.rename(columns={"bucket_t": "T", "bucket_h": "H", "bucket_w": "W"})
    as_text = pd.DataFrame({
        "index": got.index.astype(str),
        **{c: got[c].astype(object).where(got.bucket >= 0, "").astype(str)
           for c in ("resolution", "frames", "ratio", "T", "H", "W")}})
    assert (as_text.values == expected.values).all()


@pytest.mark.parametrize("rng,world,balance", [("numpy", 1, False), ("fast", 3, True)])
def test_stats_equals_vbucket_stats(cli, rng, world, balance):
    if not vbucket._vbucket.HAS_FMT:
        pytest.skip("built without {fmt}")
    flags = ["--config", CONFIG_360P, "--meta", SAMPLE_META, "--rng", rng, "--seed", 4,
             "--world", world] + (["--balance"] if balance else [])
    expected = run_cli(cli, "stats", *flags).stdout
    table = vbucket.stats_table(SAMPLE_META, CONFIG_360P, rng=rng, seed=4, world=world,
                                balance=balance)
    # the table, then (in newer CLIs) the plan's fingerprint line
    assert expected.startswith(table) and len(table) > 500
    rest = expected[len(table):]
    if rest:
        s = vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_360P, num_replicas=world, rank=0,
                                              seed=4, rng=rng, balance=balance)
        assert rest.startswith("fingerprint:") and s.fingerprint() in rest
    df = vbucket.stats(SAMPLE_META, CONFIG_360P, rng=rng, seed=4, world=world, balance=balance)
    # each bucket row of the CLI's table: bucket id, then its counts
    for row in df.itertuples():
        line = next(x for x in expected.splitlines()
                    if x.split()[:2] == [str(row.Index), row.resolution])
        assert f"{row.T}x{row.H}x{row.W}" in line.split()
        assert str(row.grouped) in line.split() and str(row.batches) in line.split()
    assert df.attrs["total"]["samples"] + df.attrs["total"]["dropped"] == df.grouped.sum() \
        + df.moved_in.sum() - df.moved_out.sum()
    assert df.attrs["alignment"]["world"] == world


@pytest.mark.parametrize("seed,rng,extra", [
    (2**70 + 3, "numpy", {"policy": "downgrade", "balance": True}),
    (7, "fast", {"batching": "packed", "token_budget": 60000.0, "drop_oversized": True}),
])
def test_a_run_file_gives_the_same_batches_to_the_cli_and_python(cli, tmp_path, seed, rng, extra):
    """One run spec as JSON: `vbucket plan --run` and VariableVideoBatchSampler.from_run give the
    same batches, and so do the same settings as flags and as keyword arguments (the C++ side
    is tests/json/run_spec.cpp: a sampler from the same file equals one made by hand)."""
    import json

    run = dict(config=str(CONFIG_V2), meta=str(SAMPLE_META), rng=rng, seed=str(seed), epoch=2,
               world=3, rank=1, **extra)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    flags = ["--rng", rng, "--seed", seed, "--epoch", 2, "--world", 3]
    for k, v in extra.items():
        flags += [f"--{k.replace('_', '-')}"] + ([] if v is True else [v])
    for rank in range(3):
        by_file = tmp_path / f"file{rank}.jsonl"
        by_flags = tmp_path / f"flags{rank}.jsonl"
        run_cli(cli, "plan", "--run", path, "--rank", rank, "--out", by_file, "--quiet")
        run_cli(cli, "plan", "--config", CONFIG_V2, "--meta", SAMPLE_META, *flags, "--rank", rank,
                "--out", by_flags, "--quiet")
        expected = [e["indices"] for e in read_jsonl(by_file)]
        assert expected and expected == [e["indices"] for e in read_jsonl(by_flags)]
        # epoch 2 as planned (held epochs differ from epoch 1 on)
        s = vbucket.VariableVideoBatchSampler.from_run(path, rank=rank, output="indices",
                                                       hold_epochs=False)
        assert s.epoch == 2 and s.num_replicas == 3 and s.rank == rank
        assert list(s) == expected
        kw = vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_V2, num_replicas=3, rank=rank,
                                               seed=seed, rng=rng, epoch=2, output="indices",
                                               hold_epochs=False, **extra)
        assert list(kw) == expected
    # the file's own rank (1) when none is given
    assert list(vbucket.VariableVideoBatchSampler.from_run(path, output="indices",
                                                           hold_epochs=False)) == [
        e["indices"] for e in read_jsonl(tmp_path / "file1.jsonl")]
