"""Configs, metadata, assignment and statistics: conversions from Python values to the C++ core.

Everything here parses or converts and then calls the library (``vbucket._vbucket``); the
rules, the seed convention and every count are the library's.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Mapping
from typing import Any, Literal, Optional, Tuple, Union

import numpy as np

from . import _vbucket

#: The run spec's field table (C++ ``vbucket::run_spec::fields()``): name -> {kind, value_name,
#: choices, min, max, default, help}. Every keyword argument of a run (the sampler's, ``stats``,
#: ``assign``, ``explain``, ``python -m vbucket``) is one of these fields, checked by the spec.
FIELDS: Mapping[str, Mapping[str, Any]] = {f["name"]: f for f in _vbucket.RUN_FIELDS}

#: The run's defaults, defined once in C++ (the member initialisers of ``vbucket::run_spec``,
#: from ``vbucket::defaults``), as Python values: every keyword default, docstring and stub.
DEFAULTS: Mapping[str, Any] = dict(_vbucket.DEFAULTS)

RULES = tuple(FIELDS["rule"]["choices"])

REQUIRED_COLUMNS = ("num_frames", "height", "width", "fps")

PathLike = Union[str, "os.PathLike[str]"]


# ------------------------------------------------------------------------------------------
# Config
# ------------------------------------------------------------------------------------------


def _json_value(value: Any, where: str) -> Any:
    """Open-Sora's dict values as JSON values: tuples become lists, numpy scalars numbers."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_json_value(v, where) for v in value]
    raise TypeError(
        f"{where}: expected a number, None or a tuple/list of them, got {type(value).__name__}"
    )


def _config_json(cfg: Mapping) -> str:
    """Open-Sora's bucket dict ({"360p": {1: (0.5, 141), 51: ((0.5, 0.5), 8)}}) as the JSON the
    CLI reads ({"360p": {"1": [0.5, 141], "51": [[0.5, 0.5], 8]}}); keys keep their order."""
    out = {}
    for res, frames in cfg.items():
        if not isinstance(res, str):
            raise TypeError(f"bucket config: resolution keys must be str, got {res!r}")
        if not isinstance(frames, Mapping):
            raise TypeError(
                f"bucket config: {res}: expected a dict of frames -> (probability, batch size), "
                f"got {type(frames).__name__}"
            )
        entries = {}
        for t, entry in frames.items():
            if isinstance(t, (bool, float)) or not isinstance(t, (int, str, np.integer)):
                raise TypeError(f"bucket config: {res}: frames keys must be int or str, got {t!r}")
            entries[str(t)] = _json_value(entry, f"bucket config: {res}: frames {t}")
        out[res] = entries
    return json.dumps(out)


class BucketConfig:
    """A validated bucket config: Open-Sora's dict, or a path to the JSON form the CLI reads.

    ``BucketConfig({"360p": {1: (0.5, 141), 51: ((0.5, 0.5), 8)}})``; frame keys int or str,
    tuples or lists, ``None`` batch size = disabled. The resolutions are resolved with the
    tables of ``rule`` (Open-Sora 2.0's or v1.2's); a sampler of the other rule re-reads it with
    its own. Invalid configs raise ValueError with the CLI's one-line message.
    """

    def __init__(self, cfg: Union[Mapping, PathLike, "BucketConfig"], *, rule: str = "opensora-v2"):
        self._by_rule: dict = {}
        if isinstance(cfg, BucketConfig):
            self._text, self._where, self._path = cfg._text, cfg._where, cfg._path
            self._by_rule = dict(cfg._by_rule)
        elif isinstance(cfg, (str, os.PathLike)):
            self._text, self._where, self._path = None, None, os.fspath(cfg)
        elif isinstance(cfg, Mapping):
            self._text, self._where, self._path = _config_json(cfg), "bucket config", None
        else:
            raise TypeError(
                "bucket config: expected Open-Sora's dict, a path to a JSON config or a "
                f"BucketConfig, got {type(cfg).__name__}"
            )
        self.rule = rule
        self._core(rule)  # validates now

    def _core(self, rule: str) -> "_vbucket.Config":
        if rule not in self._by_rule:
            if self._path is not None:
                c = _vbucket.Config.from_path(self._path, rule)
            else:
                c = _vbucket.Config.from_text(self._text, self._where, rule)
            self._by_rule[rule] = c
        return self._by_rule[rule]

    @property
    def num_buckets(self) -> int:
        """Open-Sora's ``num_bucket``: every (resolution, frames, ratio) of the config."""
        return self._core(self.rule).num_buckets

    def buckets(self, rule: Optional[str] = None):
        """Every bucket by id as a DataFrame: resolution, frames, ratio, T, H, W, batch_size
        (0 = disabled)."""
        import pandas as pd

        rows = self._core(rule or self.rule).buckets()
        return pd.DataFrame(
            rows, columns=["resolution", "frames", "ratio", "T", "H", "W", "batch_size"]
        ).rename_axis("bucket")

    def __getstate__(self) -> dict:
        # The validated core configs are rebuilt from the source (pickle, copy.deepcopy)
        return {"text": self._text, "where": self._where, "path": self._path, "rule": self.rule}

    def __setstate__(self, state: dict) -> None:
        self._text, self._where, self._path = state["text"], state["where"], state["path"]
        self.rule = state["rule"]
        self._by_rule = {}
        self._core(self.rule)

    def __repr__(self) -> str:
        src = self._path if self._path is not None else "dict"
        return f"BucketConfig({src!r}, rule={self.rule!r}, num_buckets={self.num_buckets})"


def _config(cfg, rule: str) -> "_vbucket.Config":
    if rule not in RULES:
        raise ValueError(f'rule: unknown rule "{rule}" (expected opensora-v2 or opensora-v1.2)')
    if not isinstance(cfg, BucketConfig):
        cfg = BucketConfig(cfg, rule=rule)
    return cfg._core(rule)


# ------------------------------------------------------------------------------------------
# Metadata
# ------------------------------------------------------------------------------------------


def _missing(names) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        raise ValueError(
            f"metadata: missing required column{plural} "
            + ", ".join(f'"{c}"' for c in missing)
            + " (needed: num_frames,height,width,fps in any order)"
        )


_ACCEPTED_DTYPES = (
    "accepted are integer and floating-point dtypes (fps may be NaN = unknown); convert it "
    "first, e.g. df[\"{name}\"].astype(\"float64\")"
)


def _check_kind(kind: str, dtype, name: str) -> None:
    """The one dtype check of every metadata form (DataFrame, dict of arrays, pyarrow Table,
    Parquet): a column is planned only when it holds integers or floats. Dates, durations,
    complex numbers, booleans, strings and objects are refused, never coerced."""
    if kind not in "iuf":
        raise TypeError(f'metadata: column "{name}" has dtype {dtype}, which is not a number: '
                        + _ACCEPTED_DTYPES.format(name=name))


def _arrow_kind(arrow_type) -> str:
    import pyarrow as pa

    if pa.types.is_integer(arrow_type):
        return "u" if pa.types.is_unsigned_integer(arrow_type) else "i"
    return "f" if pa.types.is_floating(arrow_type) else "O"


def _numeric(col, name: str) -> np.ndarray:
    """A column as a 1-D numeric numpy array, without a per-row Python loop (no copy when it is
    already one)."""
    if hasattr(col, "dtype") and hasattr(col, "to_numpy") and not isinstance(col, np.ndarray):
        dtype = col.dtype
        _check_kind(getattr(dtype, "kind", "O"), dtype, name)
        if isinstance(dtype, np.dtype):
            arr = col.to_numpy()  # a view of the column
        else:
            # pandas extension dtypes (nullable Int64, Float64): NA as NaN
            try:
                arr = col.to_numpy(dtype="float64", na_value=np.nan)
            except (TypeError, ValueError):
                raise TypeError(f'metadata: column "{name}" must hold numbers') from None
    else:
        arr = np.asarray(col)
    if arr.ndim != 1:
        raise TypeError(f'metadata: column "{name}" must be one-dimensional, got shape {arr.shape}')
    _check_kind(arr.dtype.kind, arr.dtype, name)
    if arr.dtype == np.float16 or not arr.dtype.isnative:
        arr = arr.astype(np.float64 if arr.dtype.kind == "f" else arr.dtype.newbyteorder("="))
    return arr


def _error_mask(col) -> Optional[np.ndarray]:
    """Rows whose "error" column is not empty (as `vbucket scan` writes) are unusable samples."""
    import pandas as pd

    s = pd.Series(col) if not isinstance(col, pd.Series) else col
    if s.dtype.kind in "iufb":
        return None
    mask = s.notna().to_numpy() & (s.astype(str).str.strip() != "").to_numpy()
    return mask if mask.any() else None


def _from_columns(cols: Mapping, where: str) -> "_vbucket.Meta":
    _missing(cols.keys())
    arrays = [_numeric(cols[c], c) for c in REQUIRED_COLUMNS]
    mask = _error_mask(cols["error"]) if "error" in cols else None
    return _vbucket.Meta.from_arrays(*arrays, mask, where)


def _read_parquet_table(path: str):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(
            f"{path}: reading parquet needs pyarrow (pip install pyarrow)"
        ) from None
    return pq.read_table(path)


def stream_csv(path: PathLike, chunk_rows: int = 1 << 20) -> "_vbucket.StreamedCsv":
    """A metadata CSV for ``VariableVideoBatchSampler`` (and ``stats``) that is read in chunks of
    ``chunk_rows`` rows each time an epoch is planned, never held whole: the sampler keeps 2
    bytes a sample (the epoch's bucket ids) instead of the table's 16, and gives the same batches
    as over the path itself. For CSVs of hundreds of millions of rows. Its header is checked now,
    its rows when the first epoch is planned. The file must not change while a sampler uses it:
    the first read records its size, modification time and a hash of its bytes, and a later
    epoch's read of a changed file (rows appended, truncated, edited) raises, naming the file and
    what changed. A grown dataset is an explicit new version: a new ``stream_csv`` and sampler,
    from an epoch boundary.
    ``Loader`` needs the table in memory: give its sampler the path instead."""
    if (isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer))
            or chunk_rows < 1):
        raise ValueError(f"chunk_rows must be an integer of at least 1, got {chunk_rows!r}")
    return _vbucket.StreamedCsv(os.fspath(path), int(chunk_rows))


def _samples(meta, chunk_rows=None):
    """What a sampler plans over: a streamed CSV as it is, a CSV path streamed in chunks of
    ``chunk_rows`` when given, any other form as the table."""
    if chunk_rows is not None and isinstance(meta, (str, os.PathLike)) and os.fspath(
            meta).lower().endswith(".csv"):
        return stream_csv(meta, chunk_rows)
    return meta if isinstance(meta, _vbucket.StreamedCsv) else _meta(meta)


def _meta(meta) -> "_vbucket.Meta":
    """Any metadata form as the core's table: a DataFrame, a pyarrow Table, a dict of arrays,
    a path (.csv through the C++ reader, .parquet through pyarrow) or a dataset with `.data`."""
    if isinstance(meta, _vbucket.Meta):
        return meta
    if isinstance(meta, _vbucket.StreamedCsv):
        raise TypeError(
            f"{meta.path}: this needs the metadata table in memory; give the path itself "
            "instead of stream_csv(...) (a streamed CSV serves VariableVideoBatchSampler and stats)"
        )
    if isinstance(meta, (str, os.PathLike)):
        path = os.fspath(meta)
        lower = path.lower()
        if lower.endswith((".parquet", ".pq")):
            return _from_arrow(_read_parquet_table(path), path)
        if lower.endswith((".csv", ".csv.txt")) or not os.path.splitext(lower)[1]:
            return _vbucket.Meta.from_csv(path)
        raise ValueError(f"{path}: metadata must be a .csv or .parquet file")
    mod = type(meta).__module__
    if mod.startswith("pandas") and hasattr(meta, "columns"):
        return _from_columns({c: meta[c] for c in meta.columns if isinstance(c, str)}, "DataFrame")
    if mod.startswith("pyarrow") and hasattr(meta, "column_names"):
        return _from_arrow(meta, "pyarrow Table")
    if isinstance(meta, Mapping):
        return _from_columns(meta, "metadata dict")
    data = getattr(meta, "data", None)
    if data is not None and data is not meta:
        return _meta(data)
    raise TypeError(
        "metadata: expected a pandas DataFrame, a pyarrow Table, a dict of numpy arrays, a path "
        f"(.csv, .parquet) or a dataset with a .data DataFrame, got {type(meta).__name__}"
    )


def _from_arrow(table, where: str) -> "_vbucket.Meta":
    _missing(table.column_names)
    cols = {}
    for c in REQUIRED_COLUMNS:
        col = table.column(c)
        _check_kind(_arrow_kind(col.type), col.type, c)
        cols[c] = col.to_numpy() if col.null_count == 0 else col.to_pandas().to_numpy(
            dtype="float64", na_value=np.nan
        )
    if "error" in table.column_names:
        cols["error"] = table.column("error").to_pandas()
    return _from_columns(cols, where)


def read_meta(path: PathLike):
    """The metadata file as a pandas DataFrame with num_frames, height, width, fps (validated
    as the CLI validates it; fps NaN when unknown). A .csv is read by the C++ reader (the four
    columns); a .parquet through pyarrow (all its columns)."""
    import pandas as pd

    path = os.fspath(path)
    if path.lower().endswith((".parquet", ".pq")):
        table = _read_parquet_table(path)
        _meta(table)  # validates
        return table.to_pandas()
    m = _meta(path)
    nf, h, w, fps = m.columns()
    return pd.DataFrame({"num_frames": nf, "height": h, "width": w, "fps": fps})


# ------------------------------------------------------------------------------------------
# The run spec: keyword arguments -> the library's run_spec
# ------------------------------------------------------------------------------------------


def _seed_text(seed) -> str:
    """A seed as decimal text for the core (NumPy seeds may be 2^64 or more)."""
    return _field_text("seed", seed)


def _field_text(name: str, value) -> str:
    """A keyword argument's value as the text of its field's kind (the spec checks the value:
    ranges, choices); a value of another Python type is a TypeError naming the argument."""
    kind = FIELDS[name]["kind"]
    shown = f"{type(value).__name__} {value!r}"
    if kind == "flag":
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name} must be a bool, got {shown}")
        return "true" if value else "false"
    if kind in ("count", "seed"):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {shown}")
        return str(int(value))
    if kind == "number":
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must be a number, got {shown}")
        return repr(float(value))
    if kind == "triple":
        if (isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 3
                or any(isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer))
                       for v in value)):
            raise ValueError(f"{name} must be three integers (T, H, W), got {value!r}")
        return ",".join(str(int(v)) for v in value)
    if kind == "path":
        if not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"{name} must be a path, got {shown}")
        return os.fspath(value)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {shown}")
    return value


def _spec(kwargs: Mapping, where: str, allowed=None) -> "_vbucket.RunSpec":
    """The one translation of keyword arguments onto the library's run spec: each name is a
    field (``allowed`` of them), None leaves the field's default, ``balance=G`` (an int) is
    ``balance_group=G``; the library checks every value and the combination (ValueError naming
    the field)."""
    fields = {}
    for name, value in kwargs.items():
        if name not in FIELDS or (allowed is not None and name not in allowed):
            raise TypeError(f"{where}() got an unexpected keyword argument {name!r}")
        if value is None:
            continue
        if name == "balance" and not isinstance(value, (bool, np.bool_)):
            name = "balance_group"  # balance=G: step balance with chunks of G batches
        fields[name] = _field_text(name, value)
    return _vbucket.RunSpec(fields)


_TYPES = {"count": int, "seed": int, "number": float, "flag": bool,
          "triple": Tuple[int, int, int], "path": str}


def _annotation(name: str):
    f = FIELDS[name]
    if f["kind"] == "choice":
        return Literal[tuple(f["choices"])]
    if name == "balance":
        return Union[bool, int]
    return _TYPES[f["kind"]]


def _field_doc(name: str) -> str:
    f = FIELDS[name]
    default = f" (default: {DEFAULTS[name]!r})" if name in DEFAULTS else ""
    return f"    {name}: {f['help']}{default}"


def takes_run_fields(*names: str, doc: str = "Run spec keywords"):
    """Gives ``fn(..., **spec)`` the signature and docstring of the run fields ``names`` (their
    defaults and help from the library's field table), and keeps the names it accepts in
    ``fn.run_fields``: help(), inspect.signature() and the stubs show every keyword."""

    def wrap(fn):
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.kind != p.VAR_KEYWORD]
        have = {p.name for p in own}
        extra = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY,
                                   default=DEFAULTS.get(n), annotation=_annotation(n))
                 for n in names if n not in have]
        fn.__signature__ = sig.replace(parameters=own + extra)
        fn.__doc__ = ((fn.__doc__ or "").rstrip() + f"\n\n    {doc} (the library's field table, "
                      "``vbucket.FIELDS``):\n" + "\n".join(_field_doc(n) for n in names) + "\n")
        fn.run_fields = tuple(names)
        return fn

    return wrap


#: The fields of one assignment (assign, explain) and of one plan (stats, stats_table).
ASSIGN_FIELDS = ("rule", "fps_max", "frame_interval", "rng", "seed", "epoch", "threads")
PLAN_FIELDS = tuple(n for n in FIELDS
                    if n not in ("meta", "config", "rank") and FIELDS[n]["use"] == "plan")
#: The fields of reading media (timeouts, retries, the loader's outage deadline): keywords of
#: ``scan``, ``decode_clip`` and ``Loader``, and of the sampler (a run file's, for its Loader).
MEDIA_FIELDS = tuple(n for n in FIELDS if FIELDS[n]["use"] == "media")


def media_texts(where: str, **given: Any) -> dict:
    """The media fields given (None: not given) as the text of their field's kind, for the
    binding, which sets them on the run spec (the library checks each value: ValueError naming
    the key)."""
    for name in given:
        if name not in MEDIA_FIELDS:
            raise TypeError(f"{where}() got an unexpected keyword argument {name!r}")
    return {n: _field_text(n, v) for n, v in given.items() if v is not None}


# ------------------------------------------------------------------------------------------
# assign and stats
# ------------------------------------------------------------------------------------------


@takes_run_fields(*ASSIGN_FIELDS)
def assign(meta, config, *, as_arrays: bool = False, **spec):
    """The bucket of every sample, as `vbucket assign` writes it (same seed convention).

    Returns a DataFrame indexed by sample with columns bucket (id; -1 no bucket, -2 invalid
    metadata), resolution, frames, ratio, bucket_t, bucket_h, bucket_w (the bucket's target
    T, H, W; missing where no bucket; not named T/H/W, which are pandas attributes: ``df.T`` is
    the transpose); with ``as_arrays=True`` the bucket ids as a numpy int32 array. The CLI's
    CSV names them T, H, W (``python -m vbucket assign --out`` writes the CLI's header).
    """
    run = _spec(spec, "assign", ASSIGN_FIELDS)
    cfg = _config(config, run.rule)
    ids = _vbucket.assign_epoch(_meta(meta), cfg, run)
    if as_arrays:
        return ids
    return _bucket_frame(cfg, ids)


#: ``assign()``'s target-shape columns and the names `vbucket assign`'s CSV gives them.
ASSIGN_CSV_NAMES = {"bucket_t": "T", "bucket_h": "H", "bucket_w": "W"}


def _bucket_frame(cfg, ids: np.ndarray):
    import pandas as pd

    table = cfg.buckets()
    n = len(table)
    has = ids >= 0
    safe = np.where(has, ids, 0)
    res_names = list(dict.fromkeys(r[0] for r in table))
    ratio_names = list(dict.fromkeys(r[2] for r in table))
    res_code = np.array([res_names.index(r[0]) for r in table] or [0], dtype=np.int32)
    ratio_code = np.array([ratio_names.index(r[2]) for r in table] or [0], dtype=np.int32)

    def ints(k):
        col = np.array([r[k] for r in table] or [0], dtype=np.int64)[safe]
        return pd.arrays.IntegerArray(col, ~has) if n else pd.array([pd.NA] * len(ids), "Int64")

    def cats(codes, names):
        return pd.Categorical.from_codes(np.where(has, codes[safe], -1), categories=names)

    return pd.DataFrame(
        {
            "bucket": ids,
            "resolution": cats(res_code, res_names),
            "frames": ints(1),
            "ratio": cats(ratio_code, ratio_names),
            "bucket_t": ints(3),
            "bucket_h": ints(4),
            "bucket_w": ints(5),
        }
    ).rename_axis("index")


def _stats_sampler(meta, config, where: str, **spec):
    run = _spec(spec, where, PLAN_FIELDS)
    s = _vbucket.Sampler(_samples(meta, spec.get("chunk_rows")), _config(config, run.rule), run)
    s.set_epoch(run.epoch)
    return s


def _stats_frame(d: dict):
    import pandas as pd

    cols = ["bucket", "resolution", "frames", "ratio", "T", "H", "W", "batch_size", "grouped",
            "moved_in", "moved_out", "samples", "batches", "pads", "dropped", "slots", "cost"]
    df = pd.DataFrame(d["buckets"], columns=cols).set_index("bucket")
    df = df.rename(columns={"cost": "tokens"})
    df.attrs.update({k: v for k, v in d.items() if k != "buckets"})
    return df


@takes_run_fields(*PLAN_FIELDS)
def stats(meta, config, **spec):
    """Per-bucket statistics of one epoch's plan, the numbers `vbucket stats` prints.

    A DataFrame indexed by bucket id: resolution, frames, ratio, T, H, W, batch_size, grouped,
    moved_in, moved_out, samples, batches, pads, dropped, slots, tokens (latent tokens x batch
    size, summed over the bucket's batches). ``df.attrs`` holds the totals: total, images,
    videos (same fields), unassigned, invalid, alignment (rank alignment for ``world``) and
    step_balance.
    """
    return _stats_frame(_stats_sampler(meta, config, "stats", **spec).stats())


def _plan_args(kwargs: Mapping, where: str) -> dict:
    """`stats`'s arguments (unknown names and bad values refused by the spec) with the library's
    defaults filled in and the policy in effect, for showing the run (a report's header)."""
    run = _spec(kwargs, where, PLAN_FIELDS)
    shown = dict(DEFAULTS, **{k: v for k, v in kwargs.items() if v is not None})
    shown["policy"] = run.policy
    return shown


def _plan(meta, config, **kwargs) -> "_vbucket.Sampler":
    """The one plan `stats` makes (rank 0 of ``world``), for several readings of it."""
    return _stats_sampler(meta, config, "plan", **kwargs)


@takes_run_fields(*PLAN_FIELDS)
def stats_table(meta, config, **spec) -> str:
    """The statistics table exactly as `vbucket stats` prints it (same arguments as `stats`)."""
    if not _vbucket.HAS_FMT:
        raise RuntimeError("vbucket was built without {fmt}: stats_table is not available")
    return _stats_sampler(meta, config, "stats_table", **spec).stats_table()


@takes_run_fields(*ASSIGN_FIELDS[:-1])
def explain(meta, config, index: int, **spec) -> dict:
    """Why sample ``index`` got its bucket, a smaller one or none: the rule's own walk for that
    sample (the library's ``explain_sample``; the same draws as ``assign`` with these
    arguments). Returns {"bucket": id (-1 none, -2 invalid metadata), "text": the walk in
    words, "events": one dict per decision: step, resolution, frames, draw (NaN: no draw),
    probability, value, passed, bucket}."""
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
        raise ValueError(f"index must be a non-negative int (a row of the metadata), got "
                         f"{index!r}")
    run = _spec(spec, "explain", ASSIGN_FIELDS[:-1])
    bucket, text, events = _vbucket.explain_sample(_meta(meta), _config(config, run.rule), run,
                                                   int(index))
    return {"bucket": int(bucket), "text": text, "events": list(events)}
