"""vbucket.Loader as the drop-in path uses it (issue 43): ``tensors=`` and ``fields=`` as
name -> column dicts whose columns are named (the documented form), and ``batch.step`` in the
sampler's numbering after a resume."""

from __future__ import annotations

import pytest

import vbucket
from vbucket import _vbucket

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter")
torch = pytest.importorskip("torch")

from test_media_loader import _cached, _sampler, table  # noqa: E402,F401  (table: a fixture)


def test_tensors_and_fields_by_column_name(table, tmp_path):
    """``tensors={"t5": "t5_path"}``: the dict's value names a metadata column, as the docs
    write it (it was read as the name's characters: "column 't5' has 7 values")."""
    lat, _ = _cached(table, tmp_path)
    df = table.copy()
    df["t5_path"] = lat
    by_values, by_name = [], []
    with vbucket.Loader(_sampler(df), None, tensors={"t5": df["t5_path"]},
                        fields={"text": df["caption"]}) as loader:
        by_values = [(b.indices.tolist(), b.tensors["t5"].tolist(), b.fields["text"])
                     for b in loader]
    with vbucket.Loader(_sampler(df), None, tensors={"t5": "t5_path"},
                        fields={"text": "caption"}) as loader:
        by_name = [(b.indices.tolist(), b.tensors["t5"].tolist(), b.fields["text"])
                   for b in loader]
    assert by_name == by_values and len(by_name) > 3
    with pytest.raises(KeyError, match="no column 'nope'"):
        vbucket.Loader(_sampler(df), None, tensors={"t5": "nope"})


def test_batch_step_follows_the_plan_after_a_resume(table):
    """A Loader made over a sampler resumed after k batches numbers its first batch k (the
    sampler's step), as the uninterrupted run numbered it."""
    with vbucket.Loader(_sampler(table), table["path"], workers=2) as loader:
        whole = [(b.step, b.indices.tolist()) for b in loader]
    k = min(7, len(whole) - 2)
    assert k >= 3
    s = _sampler(table)
    with vbucket.Loader(s, table["path"], workers=2) as loader:
        for _ in range(k):
            next(loader)
        state = loader.state_dict()
    s2 = _sampler(table)
    s2.load_state_dict(state)
    with vbucket.Loader(s2, table["path"], workers=2) as loader:
        rest = [(b.step, b.indices.tolist()) for b in loader]
    assert rest[0][0] == k
    assert rest == whole[k:]
