"""``vbucket.explain`` / ``python -m vbucket explain``: the rule's own walk for one sample (the
library's ``explain_sample``), checked against ``assign`` and against NumPy's own generator."""

from __future__ import annotations

import math

import numpy as np
import pytest

import vbucket
from vbucket.__main__ import main as py_main
from conftest import CONFIG_360P, CONFIG_V12, CONFIG_V2, SAMPLE_META


@pytest.mark.parametrize("rule,config", [("opensora-v2", CONFIG_360P), ("opensora-v2", CONFIG_V2),
                                         ("opensora-v1.2", CONFIG_V12)])
@pytest.mark.parametrize("rng", ["numpy", "fast"])
def test_explain_gives_assigns_bucket(rule, config, rng):
    ids = vbucket.assign(SAMPLE_META, config, rule=rule, rng=rng, seed=3, epoch=1,
                         as_arrays=True)
    for i in range(0, len(ids), 37):
        e = vbucket.explain(SAMPLE_META, config, i, rule=rule, rng=rng, seed=3, epoch=1)
        assert e["bucket"] == ids[i]
        assert e["events"][-1]["step"] == ("chosen" if ids[i] >= 0 else
                                           "none" if ids[i] == -1 else "invalid")


def test_numpy_draws_are_numpys_own():
    # Open-Sora 2.0: sample i draws in sequence from default_rng(seed + epoch + i * num_bucket).
    cfg = vbucket.BucketConfig(CONFIG_360P)
    seed, epoch = 5, 2
    downgraded = 0
    for i in range(0, 2000, 13):
        e = vbucket.explain(SAMPLE_META, cfg, i, seed=seed, epoch=epoch)
        draws = [ev["draw"] for ev in e["events"] if not math.isnan(ev["draw"])]
        expected = np.random.default_rng(seed + epoch + i * cfg.num_buckets).random(len(draws))
        assert draws == expected.tolist()
        for ev in e["events"]:
            if ev["step"] == "keep":
                # the test the rule made: accepted when the draw is at most p_resolution
                assert ev["passed"] == (ev["draw"] <= ev["probability"])
                if not ev["passed"]:
                    downgraded += 1
                    assert "downgraded" in e["text"]
    assert downgraded > 0


def test_explain_names_skips_and_bad_index(capsys):
    assert py_main(["explain", "--config", str(CONFIG_360P), "--meta", str(SAMPLE_META),
                    "--index", "0", "--index", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("sample 0: 1 frames, 3024x4032, fps unknown\n")
    assert "sample 1: 210 frames, 720x1280, fps 24" in out
    assert "360p frames 408: skipped, more frames than the clip has" in out
    with pytest.raises(ValueError, match="sample 2000 is not a row of the metadata"):
        vbucket.explain(SAMPLE_META, CONFIG_360P, 2000)
    with pytest.raises(ValueError, match="index must be a non-negative int"):
        vbucket.explain(SAMPLE_META, CONFIG_360P, -1)
