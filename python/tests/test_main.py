"""`python -m vbucket`: the bucket table the set-up prints, assign's summary, one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd

import vbucket
from conftest import CONFIG_360P, SAMPLE_META


def _run(*args):
    return subprocess.run([sys.executable, "-m", "vbucket", *map(str, args)], capture_output=True,
                          text=True)


def test_stats_prints_the_table():
    r = _run("stats", "--config", CONFIG_360P, "--meta", SAMPLE_META, "--rng", "numpy",
             "--seed", 42)
    assert r.returncode == 0, r.stderr
    assert r.stdout == vbucket.stats_table(SAMPLE_META, CONFIG_360P, rng="numpy", seed=42)


def test_assign_writes_the_csv(tmp_path):
    out = tmp_path / "a.csv"
    r = _run("assign", "--config", CONFIG_360P, "--meta", SAMPLE_META, "--rng", "numpy",
             "--seed", 42, "--out", out)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(out)
    expected = vbucket.assign(SAMPLE_META, CONFIG_360P, rng="numpy", seed=42)
    assert list(df.columns) == ["index", "resolution", "frames", "ratio", "T", "H", "W"]
    assert df["T"].notna().sum() == (expected.bucket >= 0).sum()
    assert f"{(expected.bucket >= 0).sum()} of {len(expected)} samples in buckets" in r.stdout


def test_bad_input_is_one_line_and_exit_1(tmp_path):
    r = _run("stats", "--config", tmp_path / "missing.json", "--meta", SAMPLE_META)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "missing.json" in r.stderr
