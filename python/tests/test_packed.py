"""Packed batches in the Python sampler (``batching="packed"``): mixed-shape "idx-T-H-W"
strings whose latent tokens, recomputed here, stay within the budget; every sample once across
ranks apart from the counted alignment repeats; each string's shape is the sample's own bucket
(``vbucket.assign``); state_dict resumes under another world size; the CLI writes the same
batches; bad arguments are refused."""

from __future__ import annotations

import collections
import json
import subprocess

import pytest

import vbucket
from conftest import CONFIG_V2, SAMPLE_META

BUDGET = 80000.0  # above every bucket's sample of the Open-Sora 2.0 config


def tokens(t: int, h: int, w: int) -> float:
    """Latent tokens, written out from the documented formula."""
    return (1 + (t - 1) // 4) * (h / 16) * (w / 16)


def _packed(**kw):
    kw.setdefault("seed", 3)
    kw.setdefault("batching", "packed")
    kw.setdefault("token_budget", BUDGET)
    return vbucket.VariableVideoBatchSampler(str(SAMPLE_META), CONFIG_V2, **kw)


def _parse(text: str):
    return tuple(int(v) for v in text.split("-"))


def test_mixed_shape_strings_within_the_budget_and_each_sample_once():
    world = 2
    samplers = [_packed(num_replicas=world, rank=r) for r in range(world)]
    assigned = vbucket.assign(str(SAMPLE_META), CONFIG_V2, seed=3, rng="numpy")
    shape_of = {i: (int(row["bucket_t"]), int(row["bucket_h"]), int(row["bucket_w"]))
                for i, row in assigned.iterrows() if row["bucket"] >= 0}
    st = samplers[0].stats()  # from the epoch's start (iterating advances the state)
    seen = collections.Counter()
    mixed = 0
    lens = set()
    for s in samplers:
        batches = list(s)
        lens.add(len(batches))
        for b in batches:
            parsed = [_parse(x) for x in b]
            assert sum(tokens(t, h, w) for _, t, h, w in parsed) <= BUDGET
            assert all(shape_of[i] == (t, h, w) for i, t, h, w in parsed)
            mixed += len({(t, h, w) for _, t, h, w in parsed}) > 1
            seen.update(i for i, *_ in parsed)
    assert len(lens) == 1, "every rank runs the same number of steps"
    assert mixed > 0, "a budget this large mixes shapes"
    assert st["batching"] == "packed"
    assert sum(c - 1 for c in seen.values()) == st["alignment"]["repeat_samples"]
    assert set(seen) == set(shape_of) and st["samples"] == len(shape_of)
    assert 0 < st["fill"] <= 1 and st["step_balance"]["worst_step_ratio"] >= 1


def test_batches_view_lists_a_shape_per_entry():
    s = _packed()
    for bucket, t, h, w, idx, repeat in s.batches():
        assert len(bucket) == len(t) == len(h) == len(w) == len(idx) > 0
        assert sum(tokens(int(a), int(b), int(c)) for a, b, c in zip(t, h, w)) <= BUDGET


def test_state_dict_resumes_under_another_world_size():
    whole = [tuple(b) for b in _packed(output="indices")]
    a = [_packed(num_replicas=2, rank=r, output="indices") for r in range(2)]
    done = 3
    for s in a:
        it = iter(s)
        for _ in range(done):
            next(it)
    state = json.loads(json.dumps(a[1].state_dict()))
    rest = []
    b = [_packed(num_replicas=3, rank=r, output="indices") for r in range(3)]
    for s in b:
        s.load_state_dict(state)
    per_rank = [[tuple(x) for x in s] for s in b]
    for step in range(len(per_rank[0])):
        rest.extend(per_rank[r][step] for r in range(3))
    consumed = done * 2
    # World 1 deals the global sequence itself, without repeats.
    assert rest[: len(whole) - consumed] == whole[consumed:]
    assert len(rest) - (len(whole) - consumed) < 3


def test_the_cli_writes_the_same_batches(cli, tmp_path):
    out = tmp_path / "p.jsonl"
    subprocess.run([cli, "plan", "--config", str(CONFIG_V2), "--meta", str(SAMPLE_META),
                    "--rng", "numpy", "--seed", "3", "--epoch", "0", "--world", "1", "--rank",
                    "0", "--batching", "packed", "--token-budget", str(BUDGET), "--out",
                    str(out), "--quiet"], check=True)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    mine = list(_packed())
    assert len(lines) == len(mine)
    for x, b in zip(lines, mine):
        assert [f"{i}-{t}-{h}-{w}" for i, (t, h, w) in zip(x["indices"], x["thw"])] == b


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="token budget"):
        vbucket.VariableVideoBatchSampler(str(SAMPLE_META), CONFIG_V2, batching="packed")
    with pytest.raises(ValueError, match="packed"):
        vbucket.VariableVideoBatchSampler(str(SAMPLE_META), CONFIG_V2, token_budget=10)
    with pytest.raises(ValueError, match="batching"):
        vbucket.VariableVideoBatchSampler(str(SAMPLE_META), CONFIG_V2, batching="pack")
    with pytest.raises(ValueError, match="more than the token budget"):
        list(_packed(token_budget=100.0))
    s = _packed(token_budget=100.0, drop_oversized=True)
    list(s)
    assert s.stats()["dropped_oversized"] > 0


# --- the token formula (compression, patch): settable from Python and the CLI ----------------


def _indices(sampler):
    return [[int(x.split("-")[0]) for x in b] for b in sampler]


def _thw(sampler):
    return [[_parse(x)[1:] for x in b] for b in sampler]


def test_the_default_formula_is_the_documented_one():
    d = vbucket._vbucket.DEFAULTS
    assert tuple(d["compression"]) == (4, 8, 8) and tuple(d["patch"]) == (1, 2, 2)
    # the same formula written another way (16 x 16 compression, no patch): the same packing
    assert _indices(_packed(compression=(4, 16, 16), patch=(1, 1, 1))) == _indices(_packed())


def test_a_patch_four_times_larger_packs_as_a_budget_four_times_larger():
    # tokens with patch (1, 4, 4) are exactly a quarter of the default's (H/32 * W/32): packing
    # to B with them must be packing to 4B with the default formula, batch for batch.
    quarter = _packed(patch=(1, 4, 4), token_budget=BUDGET)
    four = _packed(token_budget=4 * BUDGET)
    assert _indices(quarter) == _indices(four)
    assert len(_indices(quarter)) < len(_indices(_packed()))  # fuller batches, fewer of them


def test_temporal_compression_changes_the_packing_as_the_formula_says():
    def tokens_8(t, h, w):  # compression 8 in time
        return (1 + (t - 1) // 8) * (h / 16) * (w / 16)

    budget = 60000.0
    s = _packed(compression=(8, 8, 8), token_budget=budget)
    batches = _thw(s)
    assert all(sum(tokens_8(*x) for x in b) <= budget for b in batches)
    # ... and those batches would not fit under the default formula: the formula was used
    assert any(sum(tokens(*x) for x in b) > budget for b in batches)


def test_the_cli_takes_the_same_formula(cli, tmp_path):
    out = tmp_path / "p.jsonl"
    subprocess.run([cli, "plan", "--config", str(CONFIG_V2), "--meta", str(SAMPLE_META),
                    "--seed", "3", "--epoch", "0", "--world", "1", "--rank", "0", "--batching",
                    "packed", "--token-budget", str(BUDGET), "--compression", "8,8,8",
                    "--patch", "1,4,4", "--out", str(out), "--quiet"], check=True)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    mine = _indices(_packed(compression=(8, 8, 8), patch=(1, 4, 4)))
    assert [x["indices"] for x in lines] == mine
    r = subprocess.run([cli, "plan", "--config", str(CONFIG_V2), "--meta", str(SAMPLE_META),
                        "--seed", "3", "--epoch", "0", "--world", "1", "--rank", "0",
                        "--patch", "1,0,2", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 2 and "--patch: expected three integers from 1 to 65536" in r.stderr


def test_bad_formulas_are_refused():
    with pytest.raises(ValueError, match=r"patch must be three integers \(T, H, W\)"):
        _packed(patch=(1, 2))
    with pytest.raises(ValueError, match="compression_h must be an integer from 1 to 65536"):
        _packed(compression=(4, 0, 8))
