"""The drop-in sampler copied (pickle, copy.deepcopy: what Accelerate and Lightning do),
its parameters checked with a message naming them, and ranks compared on plan and position."""

from __future__ import annotations

import copy
import pickle

import pytest

from conftest import CONFIG_360P, SAMPLE_META

import vbucket
from vbucket.sampler import _check_same_plan


def make(sample_df, **kw):
    kw.setdefault("num_replicas", 2)
    kw.setdefault("rank", 1)
    return vbucket.VariableVideoBatchSampler(sample_df, str(CONFIG_360P), seed=9, **kw)


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_copies_yield_the_same_batches_from_the_same_position(sample_df, how):
    s = make(sample_df)
    s.set_epoch(2)
    it = iter(s)
    for _ in range(3):
        next(it)
    dup = pickle.loads(pickle.dumps(s)) if how == "pickle" else copy.deepcopy(s)
    assert dup.state_dict() == s.state_dict()
    assert dup.epoch == 2 and len(dup) == len(s)
    assert list(iter(dup)) == list(it)


def test_a_streamed_sampler_pickles_by_its_path(tmp_path):
    path = tmp_path / "meta.csv"
    path.write_bytes(SAMPLE_META.read_bytes())
    s = vbucket.VariableVideoBatchSampler(vbucket.stream_csv(path, 500), str(CONFIG_360P),
                                          num_replicas=1, rank=0, seed=4)
    dup = pickle.loads(pickle.dumps(s))
    assert list(iter(dup)) == list(iter(s))


def test_a_resumed_copy_keeps_its_step_numbering(sample_df):
    s = make(sample_df, num_replicas=2)
    saved = s.state_dict(6)
    r = make(sample_df, num_replicas=3, rank=0)
    r.load_state_dict(saved)
    r.set_step(6)
    dup = copy.deepcopy(r)
    assert dup.state_dict(8) == r.state_dict(8)
    assert dup.state_dict(8)["consumed_batches"] == 12 + 2 * 3


@pytest.mark.parametrize("kwargs,name", [
    ({"threads": -1}, "threads"),
    ({"num_replicas": 2 ** 40}, "num_replicas"),
    ({"num_replicas": 2, "rank": 2}, "rank"),
    ({"num_groups": 0}, "num_groups"),
])
def test_bad_arguments_name_the_parameter_and_range(sample_df, kwargs, name):
    # the sampler's own arguments ("rank must be ..."), or a run field as the spec names it
    # ("threads: expected an integer from 0 to 4096, got "-1"")
    with pytest.raises(ValueError,
                       match=rf"{name}( must be|: expected) an integer from \d+ to \d+, got"):
        make(sample_df, **kwargs)


def test_bad_calls_name_the_parameter_and_range(sample_df):
    s = make(sample_df)
    with pytest.raises(ValueError, match=r"epoch must be an integer from 0 to 18446744073709551615"):
        s.set_epoch(2 ** 64)
    with pytest.raises(ValueError, match=r"num_steps must be an integer from 0 to"):
        s.state_dict(2 ** 70)
    # k * world past 2^64, and a step past the end, name the epoch's size
    with pytest.raises(ValueError, match=r"overflow|past the end"):
        s.state_dict((2 ** 64 + 5) // 3)
    with pytest.raises(ValueError, match=r"past the end of the epoch: it has \d+ steps at world 2"):
        s.set_step(10 ** 9)
    with pytest.raises(TypeError, match=r"state_dict\['seed'\] must be an int, got str '9'"):
        s.load_state_dict(dict(s.state_dict(), seed="9"))


def test_a_state_past_the_end_or_of_changed_metadata_is_refused(sample_df):
    s = make(sample_df)
    st = s.state_dict(3)
    past = dict(st, state=st["state"].replace("consumed=6", f"consumed={2 ** 64 - 1}"))
    with pytest.raises(ValueError, match="past the end of epoch 0"):
        s.load_state_dict(past)
    for row in range(len(sample_df)):  # the first row whose edit changes the plan
        edited = sample_df.copy()
        edited.loc[row, "num_frames"] = 60 if edited.loc[row, "num_frames"] > 60 else 250
        other = vbucket.VariableVideoBatchSampler(edited, str(CONFIG_360P), num_replicas=2,
                                                  rank=1, seed=9)
        if other.fingerprint() != s.fingerprint():
            break
    assert other.fingerprint() != s.fingerprint()
    with pytest.raises(ValueError, match="saved with plan fingerprint"):
        other.load_state_dict({"state": st["state"]})  # the state line alone carries it


def test_verify_same_plan_compares_positions():
    _check_same_plan(0, [(0, "0xa", 12), (1, "0xa", 12)])
    with pytest.raises(RuntimeError, match="not on the position: rank 0 is at global batch 12, "
                                           "rank 1 at 30, rank 2 at 30"):
        _check_same_plan(0, [(0, "0xa", 12), (1, "0xa", 30), (2, "0xa", 30)])
    with pytest.raises(RuntimeError, match="disagree on the plan"):
        _check_same_plan(0, [(0, "0xa", 12), (1, "0xb", 12)])


def test_the_end_of_an_epoch_resumed_under_another_world_loads_again(sample_df):
    # after a resume at world 3 from a world-2 position, the last step's alignment repeats can
    # end past the epoch's N batches (and past its end dealt from the start): still a state
    for k in range(1, 8):
        saved = make(sample_df, num_replicas=2).state_dict(k)
        s = make(sample_df, num_replicas=3, rank=0)
        s.load_state_dict(saved)
        s.set_step(k)
        list(iter(s))
        fresh = make(sample_df, num_replicas=3, rank=2)
        fresh.load_state_dict(s.state_dict())
        assert fresh.steps_left() == 0
