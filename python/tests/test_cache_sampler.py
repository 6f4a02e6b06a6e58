"""The sampler over a latent cache (issue 32, item 3): ``VariableVideoBatchSampler(...,
cache=MANIFEST)`` plans with the rule wrapped in ``cached_rule``. A partial cache
(``vbucket.cache_plan(coverage=0.8)``): no batch holds an uncached (sample, shape); a resume from
``state_dict`` equals the uninterrupted run; the CLI's ``plan --cache`` gives the same batches;
the distance reported by ``stats()`` and ``vbucket stats --cache`` equals the one derived here
from the full and the partial manifests' probabilities."""

from __future__ import annotations

import random
import re

import pytest

import vbucket
from conftest import CONFIG_V2, read_jsonl, run_cli


@pytest.fixture(scope="module")
def meta(tmp_path_factory):
    """300 valid videos and images of assorted sizes, lengths and frame rates."""
    rng = random.Random(11)
    path = tmp_path_factory.mktemp("cache") / "meta.csv"
    with open(path, "w") as f:
        f.write("path,num_frames,height,width,fps\n")
        for i in range(300):
            frames = rng.choice([1, rng.randint(2, 400)])
            f.write(f"v{i}.mp4,{frames},{rng.choice([360, 480, 720, 1080])},"
                    f"{rng.choice([480, 640, 854, 1280, 1920])},{rng.choice([16, 24, 30])}\n")
    return path


@pytest.fixture(scope="module")
def manifests(meta, tmp_path_factory):
    d = tmp_path_factory.mktemp("manifests")
    part = vbucket.cache_plan(meta, CONFIG_V2, coverage=0.8, out=d / "part.csv")
    full = vbucket.cache_plan(meta, CONFIG_V2, coverage=1.0, out=d / "full.csv")
    assert 0 < len(part["entries"]) < len(full["entries"])
    return d / "part.csv", part, full


def _cached(plan):
    return {(r["sample"], (r["T"], r["H"], r["W"])) for r in plan["entries"]}


def _pairs(batches):
    out = set()
    for b in batches:
        for s in b:
            i, t, h, w = (int(x) for x in s.split("-"))
            out.add((i, (t, h, w)))
    return out


def _sampler(meta, cache, **kw):
    return vbucket.VariableVideoBatchSampler(meta, CONFIG_V2, num_replicas=1, rank=0, seed=7,
                                             cache=cache, **kw)


def test_only_cached_pairs(meta, manifests):
    path, part, _ = manifests
    cached = _cached(part)
    for epoch in range(3):
        s = _sampler(meta, path)
        s.set_epoch(epoch)
        got = _pairs(list(s))
        assert got and got <= cached, sorted(got - cached)[:5]
    # without the cache the same run draws uncached pairs: the check above can fail
    plain = vbucket.VariableVideoBatchSampler(meta, CONFIG_V2, num_replicas=1, rank=0, seed=7)
    assert _pairs(list(plain)) - cached


def test_dataframe_form_and_entries_equal_path(meta, manifests):
    import pandas as pd

    path, part, _ = manifests
    expected = list(_sampler(meta, path))
    assert list(_sampler(meta, part)) == expected
    assert list(_sampler(meta, pd.DataFrame(part["entries"]))) == expected


def test_resume_equals_uninterrupted(meta, manifests):
    path = manifests[0]
    whole = list(_sampler(meta, path))
    assert len(whole) > 4
    s = _sampler(meta, path)
    it = iter(s)
    head = [next(it) for _ in range(3)]
    state = s.state_dict()
    resumed = _sampler(meta, path)
    resumed.load_state_dict(state)
    assert head + list(resumed) == whole


def test_cli_plan_cache_same_batches(cli, meta, manifests, tmp_path):
    path = manifests[0]
    for world in (1, 2):
        for rank in range(world):
            out = tmp_path / f"b{world}{rank}.jsonl"
            run_cli(cli, "plan", "--config", CONFIG_V2, "--meta", meta, "--world", world,
                    "--rank", rank, "--seed", 7, "--epoch", 0, "--cache", path, "--out", out,
                    "--quiet", "--pad-warn", 1)
            s = vbucket.VariableVideoBatchSampler(meta, CONFIG_V2, num_replicas=world, rank=rank,
                                                  seed=7, cache=path, output="indices")
            assert list(s) == [e["indices"] for e in read_jsonl(out)]


def test_distance_reported(cli, meta, manifests):
    """With the nearest fallback every uncached draw moves to a cached shape of its sample:
    per sample the total variation is its uncached mass, and the share that fell back is the
    uncached mass over all the bucketed mass (both from the manifests' probabilities)."""
    path, part, full = manifests
    n = 300  # every row is valid (bucketable)
    full_mass = sum(r["probability"] for r in full["entries"])
    cached_mass = sum(r["probability"] for r in part["entries"])
    tv_sample = (full_mass - cached_mass) / n
    share = 1.0 - cached_mass / full_mass
    got = _sampler(meta, path).stats()["cache"]
    assert got["tv_sample"] == pytest.approx(tv_sample, rel=1e-9, abs=1e-12)
    assert got["fallback_share"] == pytest.approx(share, rel=1e-9, abs=1e-12)
    # the histogram's distance is at most the per-sample one (moves between samples cancel)
    assert 0.0 <= got["tv_buckets"] <= got["tv_sample"] + 1e-12
    assert got["tv_buckets"] == pytest.approx(part["chosen"]["tv_buckets"], abs=1e-12)
    r = run_cli(cli, "stats", "--config", CONFIG_V2, "--meta", meta, "--seed", 7, "--cache", path,
                "--pad-warn", 1)
    m = re.search(r"cache: .*: ([0-9.]+) total variation .*, ([0-9.]+) \(mean per sample\), "
                  r"([0-9.]+) of the bucketed draws fell back", r.stdout)
    assert m, r.stdout
    assert float(m.group(2)) == pytest.approx(tv_sample, abs=1e-6)
    assert float(m.group(3)) == pytest.approx(share, abs=1e-6)
    assert float(m.group(1)) == pytest.approx(got["tv_buckets"], abs=1e-6)
    assert "cache" not in vbucket.VariableVideoBatchSampler(meta, CONFIG_V2, num_replicas=1,
                                                           rank=0, seed=7).stats()


def test_manifest_of_another_config(meta, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("sample,T,H,W,bucket\n0,1,1,1,0\n")
    with pytest.raises(ValueError, match="bad.csv: row 2"):
        _sampler(meta, bad)
