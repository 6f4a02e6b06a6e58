"""Metadata in every form (DataFrame, pyarrow Table, dict of arrays, .csv, .parquet) reads the
same table, validated with the CSV reader's rules; bad input raises ValueError/TypeError."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import vbucket
from conftest import CONFIG_360P, SAMPLE_META, run_cli


def _ids(meta, **kw):
    return vbucket.assign(meta, CONFIG_360P, seed=7, rng="numpy", as_arrays=True, **kw)


def test_every_form_gives_the_csv_readers_table(sample_df, tmp_path):
    expected = _ids(SAMPLE_META)  # the C++ CSV reader
    assert (expected >= 0).sum() > 100  # the data actually lands in buckets
    cols = {c: sample_df[c].to_numpy() for c in ("num_frames", "height", "width", "fps")}
    assert np.array_equal(_ids(sample_df), expected)
    assert np.array_equal(_ids(cols), expected)
    # other dtypes: int32 sizes, float32 fps, strided (non-contiguous) views
    narrow = {"num_frames": cols["num_frames"].astype(np.int32),
              "height": np.repeat(cols["height"], 2)[::2], "width": cols["width"].astype(np.uint16),
              "fps": cols["fps"].astype(np.float64)}
    assert np.array_equal(_ids(narrow), expected)
    df = vbucket.read_meta(SAMPLE_META)
    assert list(df.columns) == ["num_frames", "height", "width", "fps"]
    assert np.array_equal(df.num_frames.to_numpy(), cols["num_frames"])
    assert np.array_equal(df.fps.to_numpy(), cols["fps"], equal_nan=True)


def test_pyarrow_and_parquet(sample_df, tmp_path):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is optional (pip install pyarrow)")
    import pyarrow.parquet as pq

    expected = _ids(SAMPLE_META)
    table = pa.Table.from_pandas(sample_df)
    assert np.array_equal(_ids(table), expected)
    path = tmp_path / "meta.parquet"
    pq.write_table(table, path)
    assert np.array_equal(_ids(path), expected)
    assert np.array_equal(_ids(str(path)), expected)
    back = vbucket.read_meta(path)
    assert "path" in back.columns and len(back) == len(sample_df)


def test_pandas_float_integers_and_nan_or_zero_fps(sample_df):
    # pandas turns an integer column with a missing value into floats (51.0): accepted as in
    # the CLI, and fps NaN or 0 both mean unknown.
    df = sample_df.copy()
    df["num_frames"] = df["num_frames"].astype(float)
    df["fps"] = df["fps"].fillna(0.0)
    assert np.array_equal(_ids(df), _ids(sample_df))
    nullable = sample_df.astype({"height": "Int64", "fps": "Float64"})
    assert np.array_equal(_ids(nullable), _ids(sample_df))


def test_same_message_as_the_csv_reader(cli, tmp_path):
    # One row with 51.5 frames: the CLI and Python both refuse it, naming the column.
    path = tmp_path / "bad.csv"
    path.write_text("num_frames,height,width,fps\n51.5,720,1280,24\n")
    r = run_cli(cli, "stats", "--config", CONFIG_360P, "--meta", path, check=False)
    assert r.returncode == 1 and "51.5" in r.stderr and "not an integer" in r.stderr
    with pytest.raises(ValueError, match=r'sample 0, column "num_frames": 51.5 is not an integer'):
        _ids({"num_frames": np.array([51.5]), "height": np.array([720]),
              "width": np.array([1280]), "fps": np.array([24.0])})
    with pytest.raises(ValueError, match=r"bad.csv"):  # a path goes through the C++ reader
        _ids(path)


@pytest.mark.parametrize(
    "column,value,pattern",
    [
        ("num_frames", 0, r'column "num_frames": must be an integer from 1 to'),
        ("height", -3, r'column "height": must be an integer from 1 to'),
        ("width", np.nan, r'column "width": NaN is not an integer'),
        ("width", 1 << 40, r'column "width": must be an integer from 1 to 16777216'),
        ("fps", -1.0, r'column "fps": must be a finite positive frame rate'),
        ("fps", np.inf, r'column "fps": must be a finite positive frame rate'),
    ],
)
def test_bad_values_raise_value_error(sample_df, column, value, pattern):
    df = sample_df.copy()
    df[column] = df[column].astype(float if isinstance(value, float) else np.int64)
    df.loc[5, column] = value
    with pytest.raises(ValueError, match=f"DataFrame: sample 5, {pattern}"):
        _ids(df)


def test_bad_shapes_and_types():
    with pytest.raises(ValueError, match='missing required columns "height", "fps"'):
        _ids({"num_frames": [1], "width": [2]})
    with pytest.raises(TypeError, match='column "fps" has dtype <U4, which is not a number'):
        _ids({"num_frames": [1], "height": [2], "width": [2], "fps": ["fast"]})
    with pytest.raises(ValueError, match="different lengths"):
        _ids({"num_frames": [1, 2], "height": [2], "width": [2], "fps": [1.0]})
    with pytest.raises(TypeError, match="must be one-dimensional"):
        _ids({"num_frames": [[1]], "height": [[2]], "width": [[2]], "fps": [[1.0]]})
    with pytest.raises(TypeError, match="expected a pandas DataFrame"):
        _ids(42)
    with pytest.raises(ValueError, match="cannot open"):
        _ids("/nonexistent/meta.csv")
    with pytest.raises(ValueError, match=r"\.csv or \.parquet"):
        _ids("meta.json")


def test_error_column_marks_unusable_rows(sample_df):
    # As `vbucket scan` writes it: a row with an error is kept (row order = sample order) but
    # counted invalid, whatever its other fields hold.
    df = sample_df.copy()
    df["error"] = ""
    df.loc[3, ["error", "height"]] = ["cannot decode", -1]
    ids = _ids(df)
    assert ids[3] == -2
    assert np.array_equal(np.delete(ids, 3), np.delete(_ids(sample_df), 3))


def test_reversed_views_and_foreign_byte_order(sample_df):
    cols = {c: sample_df[c].to_numpy() for c in ("num_frames", "height", "width", "fps")}
    reversed_view = {c: v[::-1] for c, v in cols.items()}  # a negative stride, no copy
    expected = _ids(sample_df.iloc[::-1].reset_index(drop=True))
    assert np.array_equal(_ids(reversed_view), expected)
    big_endian = {c: v.astype(v.dtype.newbyteorder(">")) for c, v in cols.items()}
    assert np.array_equal(_ids(big_endian), _ids(cols))


def test_empty_metadata():
    empty = {c: np.array([], dtype=np.int64) for c in ("num_frames", "height", "width")}
    empty["fps"] = np.array([], dtype=np.float64)
    assert len(_ids(empty)) == 0
    s = vbucket.VariableVideoBatchSampler(empty, CONFIG_360P)
    assert len(s) == 0 and list(s) == [] and s.get_num_batch() == 0
    assert len(vbucket.stats(empty, CONFIG_360P)) == 0
