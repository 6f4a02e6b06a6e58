"""``vbucket.scan`` writes `vbucket scan`'s columns, from the same probe: the display size, and
the stored size, sample aspect ratio and rotation it was derived from (issue 28 item 7)."""

from __future__ import annotations

import pytest

import vbucket
from vbucket import _vbucket

from conftest import run_cli

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter")


def test_scan_has_the_clis_columns_and_values(cli, media, tmp_path):
    import pandas as pd

    csv = tmp_path / "meta.csv"
    run_cli(cli, "scan", media, "--out", csv)
    ref = pd.read_csv(csv, keep_default_na=False, na_values=[""])
    got = vbucket.scan(media, progress=False)
    assert list(got.columns) == list(ref.columns)
    good = got["error"] == ""
    assert good.any() and (~good).any()
    for c in ("stored_height", "stored_width", "rotation"):
        assert got.loc[good, c].astype(int).tolist() == ref.loc[good, c].astype(int).tolist()
        assert got.loc[~good, c].isna().all()
    assert got.loc[good, "sar"].tolist() == ref.loc[good, "sar"].tolist()
    assert (got.loc[~good, "sar"] == "").all()
