"""One dtype check for every metadata form: a column of dates, durations, complex numbers or
booleans is refused, with the column, its dtype and what is accepted, whether it comes as a
DataFrame, a dict of numpy arrays, a pyarrow Table, a Parquet file or a CSV (issue 29 item 4:
a DataFrame used to coerce them: datetime64 fps as nanoseconds, timedelta64 frames, ...)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import vbucket
from conftest import CONFIG_360P

N = 6
GOOD = {
    "num_frames": np.array([1, 51, 102, 204, 51, 1], dtype=np.int64),
    "height": np.array([360, 720, 480, 1080, 360, 720], dtype=np.int64),
    "width": np.array([640, 1280, 640, 1920, 480, 1280], dtype=np.int64),
    "fps": np.array([np.nan, 30.0, 24.0, 60.0, 25.0, np.nan]),
}
BAD = {
    "datetime64 fps": ("fps", np.array(["2024-01-01"] * N, dtype="datetime64[ns]"), "datetime64"),
    "timedelta64 num_frames": ("num_frames", np.array([1] * N, dtype="timedelta64[s]"),
                               "timedelta64"),
    "complex fps": ("fps", np.full(N, 30 + 1j), "complex"),
    "bool num_frames": ("num_frames", np.ones(N, dtype=bool), "bool"),
}


def _assign(meta):
    return vbucket.assign(meta, CONFIG_360P, as_arrays=True)


def _columns(column, values):
    cols = dict(GOOD)
    cols[column] = values
    return cols


def _check(excinfo, column, dtype_text):
    msg = str(excinfo.value)
    assert f'column "{column}"' in msg
    assert dtype_text in msg
    assert "accepted are integer and floating-point dtypes" in msg


def test_the_good_columns_plan_in_every_form(tmp_path):
    expected = _assign(GOOD)
    assert (expected >= 0).any()
    assert np.array_equal(_assign(pd.DataFrame(GOOD)), expected)
    # nullable integers and floats (pandas extension dtypes) are numbers too
    nullable = pd.DataFrame(GOOD).astype({"num_frames": "Int64", "fps": "Float64"})
    assert np.array_equal(_assign(nullable), expected)


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("form", ["DataFrame", "dict of arrays"])
def test_numpy_and_pandas_forms_refuse(case, form):
    column, values, dtype_text = BAD[case]
    cols = _columns(column, values)
    meta = pd.DataFrame(cols) if form == "DataFrame" else cols
    with pytest.raises(TypeError) as e:
        _assign(meta)
    _check(e, column, dtype_text)


def test_pandas_boolean_extension_dtype_is_refused():
    df = pd.DataFrame(GOOD)
    df["num_frames"] = pd.array([True] * N, dtype="boolean")
    with pytest.raises(TypeError) as e:
        _assign(df)
    _check(e, "num_frames", "boolean")


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("form", ["pyarrow Table", "Parquet path"])
def test_arrow_forms_refuse(case, form, tmp_path):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is optional (pip install pyarrow)")
    import pyarrow.parquet as pq

    column, values, _ = BAD[case]
    if values.dtype.kind == "c":
        pytest.skip("Arrow has no complex type")
    table = pa.table(_columns(column, values))
    arrow_text = {"M": "timestamp", "m": "duration", "b": "bool"}[values.dtype.kind]
    meta = table
    if form == "Parquet path":
        meta = tmp_path / "meta.parquet"
        pq.write_table(table, meta)
    with pytest.raises(TypeError) as e:
        _assign(meta)
    _check(e, column, arrow_text)


@pytest.mark.parametrize("case", sorted(BAD))
def test_csv_refuses_the_same_columns(case, tmp_path):
    column, values, _ = BAD[case]
    path = tmp_path / "meta.csv"
    pd.DataFrame(_columns(column, values)).to_csv(path, index=False)
    with pytest.raises(ValueError, match=f'column "{column}": .* is not a'):
        _assign(path)
