"""One set of defaults (issue 28 item 5): rng, seed, epoch, policy and world are defined once in
C++ (vbucket::defaults, exposed as ``_vbucket.DEFAULTS``) and every surface takes them from
there: the CLI's flags, the sampler, ``stats``, ``stats_table``, ``assign`` and ``python -m
vbucket``. Each surface is run with its defaults and compared with the others."""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest

import vbucket
from vbucket import _core, _vbucket
from vbucket.__main__ import main as py_main
from conftest import CONFIG_360P, SAMPLE_META, read_jsonl, run_cli


def test_the_defaults_are_the_decided_ones():
    decided = {"rng": "numpy", "seed": 0, "epoch": 0, "policy": "pad", "world": 1,
               "rank": 0, "rule": "opensora-v2", "fps_max": 16.0, "frame_interval": 1,
               "drop_last": False, "balance": False, "balance_group": 0, "threads": 0,
               "batching": "fixed", "drop_oversized": False, "compression": (4, 8, 8),
               "patch": (1, 2, 2), "chunk_rows": 1 << 20,
               # reading media (vbucket::defaults, also ffmpeg::limits' and the loader's)
               "timeout": 120.0, "io_timeout": 10.0, "retries": 2, "outage_deadline": 600.0}
    assert _vbucket.DEFAULTS == decided
    assert vbucket.DEFAULTS == _vbucket.DEFAULTS
    # every field has a default but the paths (the cache manifest and the per-sample costs are
    # optional) and the packed budget (no default: required)
    assert set(_core.FIELDS) - set(decided) == {"meta", "config", "cache", "token_budget",
                                                 "sample_costs"}


def test_every_python_keyword_default_is_the_librarys():
    d = _vbucket.DEFAULTS
    for fn in (vbucket.stats, vbucket.stats_table, vbucket.assign, vbucket.explain,
               vbucket.VariableVideoBatchSampler.__init__):
        params = inspect.signature(fn).parameters
        fields = fn.run_fields
        assert fields and set(fields) <= set(_core.FIELDS)
        for n in fields:
            assert params[n].default == d.get(n), (fn.__qualname__, n)
            # the docstring names each keyword with its help and default
            assert f"    {n}: {_core.FIELDS[n]['help']}" in fn.__doc__, (fn.__qualname__, n)
            if n in d:
                assert f"(default: {d[n]!r})" in fn.__doc__


def test_cli_help_names_the_same_defaults(cli):
    """Every run field flag of `vbucket plan/stats/assign --help` says the library's default,
    the one Python's signatures carry."""
    for cmd in ("stats", "plan", "assign"):
        text = run_cli(cli, cmd, "--help").stdout
        lines = {ln.split()[0][2:].replace("-", "_"): ln for ln in text.splitlines()
                 if ln.startswith("  --")}
        seen = 0
        for name, f in _core.FIELDS.items():
            if name not in lines or f["kind"] == "flag" or name in ("world", "rank") and cmd == "plan":
                continue
            seen += 1
            line = lines[name]
            assert f["help"] in line, (cmd, name)
            if f["default"]:
                assert line.endswith(f"(default: {f['default']})"), (cmd, line)
        assert seen >= 5, cmd
        rng = lines["rng"]
        assert f"(default: {_vbucket.DEFAULTS['rng']})" in rng


def test_stats_with_defaults_agree_on_every_surface(cli, capsys):
    text = run_cli(cli, "stats", "--config", CONFIG_360P, "--meta", SAMPLE_META).stdout
    table = vbucket.stats_table(SAMPLE_META, CONFIG_360P)
    assert text.startswith(table)  # then the CLI's fingerprint line
    assert py_main(["stats", "--config", str(CONFIG_360P), "--meta", str(SAMPLE_META)]) == 0
    assert capsys.readouterr().out == table
    # ... and it is the numpy plan, which the sampler with its defaults runs
    explicit = run_cli(cli, "stats", "--config", CONFIG_360P, "--meta", SAMPLE_META, "--rng",
                       "numpy", "--seed", 0, "--epoch", 0, "--world", 1, "--policy", "pad").stdout
    assert explicit == text
    fast = run_cli(cli, "stats", "--config", CONFIG_360P, "--meta", SAMPLE_META, "--rng",
                   "fast").stdout
    assert fast != text
    s = vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_360P, num_replicas=1, rank=0)
    assert s.fingerprint() in text
    st = vbucket.stats(SAMPLE_META, CONFIG_360P)
    assert _core._plan(SAMPLE_META, CONFIG_360P).fingerprint() == s.fingerprint()
    slots = sum(len(b[4]) for b in s.batches() if not b[5])  # alignment repeats aside
    assert int(st["samples"].sum() + st["pads"].sum()) == slots


def test_batches_and_assignment_with_defaults_agree(cli, tmp_path):
    out = tmp_path / "plan.jsonl"
    run_cli(cli, "plan", "--config", CONFIG_360P, "--meta", SAMPLE_META, "--world", 1, "--rank",
            0, "--seed", 0, "--epoch", 0, "--out", out)
    s = vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_360P, num_replicas=1, rank=0,
                                          output="indices")
    s.set_epoch(0)
    assert [r["indices"] for r in read_jsonl(out)] == list(s)

    csv = tmp_path / "assign.csv"
    run_cli(cli, "assign", "--config", CONFIG_360P, "--meta", SAMPLE_META, "--rule",
            "opensora-v2", "--out", csv, "--quiet")
    cli_df = pd.read_csv(csv)
    py_df = vbucket.assign(SAMPLE_META, CONFIG_360P)
    assert np.array_equal(cli_df["frames"].fillna(-1).to_numpy(),
                          py_df["frames"].fillna(-1).to_numpy().astype(float))
    numpy_ids = vbucket.assign(SAMPLE_META, CONFIG_360P, rng="numpy", seed=0, epoch=0,
                               as_arrays=True)
    assert np.array_equal(vbucket.assign(SAMPLE_META, CONFIG_360P, as_arrays=True), numpy_ids)
    # the sampler's epoch holds exactly the samples the default assignment bucketed
    fresh = vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_360P, num_replicas=1, rank=0)
    seen = {i for b in fresh.batches() for i in b[4].tolist()}
    assert seen == set(np.flatnonzero(numpy_ids >= 0).tolist())


def test_report_header_names_the_defaults(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "r.html"
    assert py_main(["report", "--config", str(CONFIG_360P), "--meta", str(SAMPLE_META),
                    "--out", str(out)]) == 0
    text = out.read_text()
    d = _core.DEFAULTS
    for k in ("rng", "seed", "epoch", "world", "policy"):
        assert f"{k}: {d[k]}" in text, k
