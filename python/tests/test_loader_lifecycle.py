"""A Loader starts where an iteration of its sampler would start: after an iteration that ran to
its end (Open-Sora: the next one replays the epoch from its start), a new Loader delivers the
whole epoch again, the same batches the sampler's next iteration yields."""

from __future__ import annotations

import pytest

import vbucket
from vbucket import _vbucket

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter")
torch = pytest.importorskip("torch")

CONFIG = {"256px": {"1": (1.0, 4), "5": (1.0, 3), "9": (1.0, 2)}}


@pytest.fixture(scope="module")
def table(media):
    df = vbucket.scan(media / "videos", progress=False)
    return df[df["error"] == ""].reset_index(drop=True)


def _ids(batch):
    return [int(str(i).split("-")[0]) for i in batch]


def test_loader_after_a_finished_iteration_replays_the_epoch(table):
    s = vbucket.VariableVideoBatchSampler(table, CONFIG, seed=1, rng="fast")
    first = [_ids(b) for b in s]  # runs to its end
    assert len(first) == len(s) > 0
    assert s.steps_left() == len(first)  # the next iteration is the whole epoch
    with vbucket.Loader(s, table["path"], workers=2) as loader:
        assert len(loader) == len(first)
        got = [b.planned.tolist() for b in loader]
    assert got == first


def test_loader_after_a_partial_iteration_continues(table):
    s = vbucket.VariableVideoBatchSampler(table, CONFIG, seed=1, rng="fast")
    it = iter(s)
    head = [_ids(next(it)) for _ in range(3)]
    rest_expected = [_ids(b) for b in vbucket.VariableVideoBatchSampler(
        table, CONFIG, seed=1, rng="fast")][3:]
    with vbucket.Loader(s, table["path"], workers=2) as loader:
        got = [b.planned.tolist() for b in loader]
    assert head and got == rest_expected
