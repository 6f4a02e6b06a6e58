"""Media from Python: ``scan`` (probe a folder of videos into sampler metadata), ``decode_clip``
(one clip as a numpy array) and ``Loader`` (an epoch of a ``VariableVideoBatchSampler`` as
torch tensors, decoded and normalised on C++ worker threads).

The work is vbucket's FFmpeg adapter and loader (``vbucket._vbucket``); this module converts
arguments and results.
"""

from __future__ import annotations

import collections
import inspect
import os
import sys
import time
from collections.abc import Mapping
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core, _vbucket
from ._optional import need

PathLike = Union[str, os.PathLike]

SCAN_COLUMNS = ("path", "num_frames", "height", "width", "fps", "duration", "codec", "error",
                "warning", "stored_height", "stored_width", "sar", "rotation")  # `vbucket scan`'s


def _need_ffmpeg(what: str) -> None:
    if not getattr(_vbucket, "HAS_FFMPEG", False):
        raise ImportError(
            f"vbucket.{what} needs the FFmpeg adapter, which this build of vbucket lacks: "
            "install FFmpeg's development files (Debian: libavformat-dev libavcodec-dev "
            "libswscale-dev libavutil-dev) and reinstall the package"
        )


def _rate_text(history, now: float, start: float) -> str:
    """The scan rate for the progress line: files per second over the last few seconds of
    ``history`` ((time, done) pairs, oldest first), or "—" during the first second, when one
    jump of the count over a few milliseconds would read as hundreds of thousands of files a
    second (tqdm's own rate does that)."""
    if now - start < _Progress.MIN_ELAPSED or not history:
        return "— file/s"
    t0, done0 = history[0]
    t1, done1 = history[-1]
    if now - t0 <= 0:
        return "— file/s"
    rate = (done1 - done0) / (now - t0)
    return f"{rate:.0f} file/s" if rate >= 10 else f"{rate:.1f} file/s"


class _Progress:
    """tqdm when it is installed, else a plain count on stderr (at most every 2 %). The rate is
    ``_rate_text``'s: over the last WINDOW seconds, "—" before MIN_ELAPSED."""

    WINDOW = 5.0
    MIN_ELAPSED = 1.0

    def __init__(self, total: int, enabled: bool, clock=time.monotonic):
        self.total, self.shown, self.bar = total, 0, None
        self.enabled = enabled and total > 0
        self.clock = clock
        self.start = clock()
        self.history = collections.deque([(self.start, 0)])
        if not self.enabled:
            return
        try:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, unit="file", desc="scan",
                            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]")
            self.bar.set_postfix_str(_rate_text(self.history, self.start, self.start),
                                     refresh=False)
        except ImportError:
            self.bar = None

    def rate(self) -> str:
        """The rate now (see ``_rate_text``)."""
        return _rate_text(self.history, self.clock(), self.start)

    def update(self, done: int) -> None:
        if not self.enabled or done <= self.shown:
            return
        now = self.clock()
        self.history.append((now, done))
        while len(self.history) > 2 and now - self.history[1][0] >= self.WINDOW:
            self.history.popleft()
        if self.bar is not None:
            self.bar.set_postfix_str(self.rate(), refresh=False)
            self.bar.update(done - self.shown)
            self.shown = done
        elif done == self.total or (done - self.shown) * 50 >= self.total:
            self.shown = done
            print(f"\rscan: {done}/{self.total} files, {self.rate()}", end="", file=sys.stderr,
                  flush=True)

    def close(self) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.close()
        elif self.shown:
            print(file=sys.stderr, flush=True)


_D = _core.DEFAULTS


def _sources(where: str, sources) -> Tuple[List[str], bool]:
    """Sources as the library's resolver takes them: one (a str or os.PathLike: a directory, a
    list file, a shard, a URL or a clip) or a sequence of them (each expanded the same way; a
    clip's path as it is), and whether it is one."""
    if isinstance(sources, (str, os.PathLike)):
        return [os.fspath(sources)], True
    if isinstance(sources, (bytes, Mapping)):
        raise TypeError(f"{where}: expected a path or a sequence of paths, got "
                        f"{type(sources).__name__}")
    out = []
    for i, p in enumerate(sources):
        if not isinstance(p, (str, os.PathLike)):
            raise TypeError(f"{where}: source {i} must be a str or os.PathLike, got "
                            f"{type(p).__name__} {p!r}")
        out.append(os.fspath(p))
    return out, False


@_core.takes_run_fields("timeout", "io_timeout", "retries", doc="Time bounds")
def scan(dir_or_list, threads: Optional[int] = None, progress: bool = True, *,
         timeout: float = _D["timeout"], io_timeout: float = _D["io_timeout"],
         retries: int = _D["retries"]):
    """Probes media files into a pandas DataFrame with `vbucket scan`'s columns: path,
    num_frames, height, width, fps, duration, codec, error, warning, stored_height,
    stored_width, sar ("num:den"), rotation (one row per file, in path order for a
    directory). ``dir_or_list``: a directory (scanned recursively for media extensions), a text
    file listing sources (one a line), or a sequence of sources; a source is a media file, a
    URL, a tar shard, a directory or a list (a ``.txt``, ``.list`` or ``.lst`` file in a list or
    a sequence), expanded as ``vbucket scan`` does (one resolver, in the library). A file that
    cannot be used keeps
    its row with the reason in ``error`` (empty for good files) and missing numbers; the
    DataFrame is sampler metadata as it is (rows with an error are never sampled).

    Tar shards (WebDataset; ``.tar`` files under the directory, a ``.tar`` given as
    ``dir_or_list``, or listed, local or ``http(s)://``) give one row per media member, its path
    ``SHARD#MEMBER@OFFSET+SIZE`` (the Loader and ``decode_clip`` open it in place), with the
    columns shard, member, member_offset, member_size and the member's sidecar fields
    (``key.txt`` -> ``txt``, the top-level fields of ``key.json``). URLs are probed over HTTP.

    ``threads``: probing threads (None: one per core). The probe runs without the GIL;
    Ctrl-C stops it (the files being probed finish, no thread is left) and raises
    KeyboardInterrupt.

    ``timeout``, ``io_timeout``, ``retries``: the run spec's media fields (below), as
    ``vbucket scan --timeout --io-timeout --retries`` (or a run file's, ``--run``); the library
    checks them (ValueError naming the key).
    """
    _need_ffmpeg("scan")
    import pandas as pd

    if threads is None:
        threads = 0
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise ValueError(f"scan: threads must be a non-negative int or None, got {threads!r}")
    network = _core.media_texts("scan", timeout=timeout, io_timeout=io_timeout,
                                retries=retries)
    # Directories, lists, tar shards (WebDataset) and URLs, as `vbucket scan` lists them.
    sources, one = _sources("scan", dir_or_list)
    listing = _vbucket.list_sources(sources, one, threads, network)
    paths = list(listing["paths"])
    listed_error = list(listing["errors"])
    # A shard that could not be listed keeps its reason and is not probed (as `vbucket scan`).
    probed = [i for i, e in enumerate(listed_error) if not e]
    job = _vbucket.Scan([paths[i] for i in probed], threads, network)
    bar = _Progress(len(probed), progress)
    try:
        while not job.wait(0.1):
            bar.update(job.done)
        bar.update(job.done)
    except BaseException:
        job.stop()  # the files being probed finish; every thread is joined
        raise
    finally:
        bar.close()
    cols = job.columns()
    df = pd.DataFrame({c: cols[c] for c in SCAN_COLUMNS})
    if len(probed) != len(paths):  # the rows of shards that could not be listed, in place
        df.index = probed
        df = df.reindex(range(len(paths)))
        df["path"] = paths
        for c in ("codec", "error", "warning", "sar"):
            df[c] = df[c].fillna("")
        df["error"] = [e if e else p for e, p in zip(listed_error, df["error"])]
    bad = (df["error"] != "").to_numpy()
    for c in ("num_frames", "height", "width", "stored_height", "stored_width",
              "rotation"):  # missing for files that failed
        values = pd.array(df[c].to_numpy(), dtype="Int64")
        values[bad] = pd.NA
        df[c] = values
    if listing["from_shards"]:
        df["shard"] = list(listing["shard"])
        df["member"] = list(listing["member"])
        for c in ("member_offset", "member_size"):
            values = pd.array(list(listing[c]), dtype="Int64")
            values[values < 0] = pd.NA
            df[c] = values
        for name, values in listing["fields"].items():
            df[f"sidecar.{name}" if name in df.columns else name] = list(values)
    return df


@_core.takes_run_fields("timeout", "io_timeout", "retries", doc="Time bounds")
def decode_clip(path: PathLike, start: int, frames: int, interval: int = 1,
                size: Tuple[int, int] = (256, 256), layout: str = "thwc", pad: bool = False, *,
                filter: str = "bilinear", threads: int = 1, timeout: float = _D["timeout"],
                io_timeout: float = _D["io_timeout"], retries: int = _D["retries"],
                frame_choice: str = "stride") -> np.ndarray:
    """Frames ``start, start + interval, ...`` (``frames`` of them, 0-based, presentation
    order) of ``path`` — with ``frame_choice="opensora"`` the ``frames`` frames Open-Sora's
    ``temporal_random_crop`` takes, ``np.linspace(start, start + frames * interval - 1, frames,
    dtype=int)`` (the same frames at interval 1) — each resized to cover ``size = (H, W)`` keeping the display aspect
    ratio and center-cropped (Open-Sora's resize-crop), as RGB uint8: shape (T, H, W, 3) for
    ``layout="thwc"``, (3, T, H, W) for ``"cthw"``. The array owns the buffer the decoder
    wrote (no copy). ``pad=True`` repeats the last frame of a video that ends early.

    Raises ``vbucket.DecodeError`` (a ValueError) with the adapter's one-line message naming
    the file when it cannot be decoded, ValueError on a bad argument. The same bytes as
    ``vbucket decode FILE --start S --frames N --interval I --size HxW [--frame-choice C]``. ``timeout``,
    ``io_timeout``, ``retries``: as ``scan``'s (the deadline of the whole clip, a stalled
    connect or read, further attempts at a URL), as ``vbucket decode``'s flags.
    """
    _need_ffmpeg("decode_clip")
    try:
        h, w = size
    except (TypeError, ValueError):
        raise TypeError(f"decode_clip: size must be (H, W), got {size!r}") from None
    args = {"start": start, "frames": frames, "interval": interval, "H": h, "W": w,
            "threads": threads}
    for name, v in args.items():
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(f"decode_clip: {name} must be an int, got {type(v).__name__}")
    return _vbucket.decode_clip(os.fspath(path), int(start), int(frames), int(interval), int(h),
                                int(w), layout, bool(pad), filter, int(threads),
                                _core.media_texts("decode_clip", timeout=timeout,
                                                  io_timeout=io_timeout, retries=retries),
                                frame_choice)


def _set_packed(batch, tensor, packed) -> None:
    """A batch's packed layout (``packed``, C++'s dict, or None for a fixed batch): ``packed``,
    ``tensors`` (a view per clip), ``cu_seqlens``, ``max_seqlen``, ``offsets``, ``thw``."""
    batch.packed = packed is not None
    batch.tensors = batch.cu_seqlens = batch.max_seqlen = batch.offsets = None
    if packed is None:
        return
    if tensor.device.type == "cpu":
        batch.tensors = packed["tensors"]
        batch.cu_seqlens = packed["cu_seqlens"]
    else:  # pin_memory: views of the device copy, cu_seqlens beside it
        o = packed["offsets"]
        batch.tensors = [tensor[o[i]:o[i + 1]].view(shape)
                         for i, shape in enumerate(packed["shapes"])]
        batch.cu_seqlens = packed["cu_seqlens"].to(tensor.device)
    batch.max_seqlen = packed["max_seqlen"]
    batch.offsets = packed["offsets"]
    batch.thw = packed["thw"]


class Batch:
    """One batch of a ``Loader``.

    ``tensor``: a ``torch.Tensor`` over the loader's staging memory (no copy), shape
    (B, T, H, W, 3) for layout "thwc", (B, 3, T, H, W) for "cthw". ``indices``: the samples in
    it, clip by clip (after substitutions); ``planned``: the sampler's indices;
    ``bucket``: the bucket id; ``thw``: (T, H, W); ``step``, ``position``, ``repeat`` as the
    sampler's plan; ``substitutions``: one dict per clip that failed to decode (position, clip,
    failed, replacement, error).

    A packed batch (a sampler with ``batching="packed"``): ``tensor`` is the flat buffer, 1-D
    (the clips back to back, each in the loader's dtype and layout); ``tensors``: one view of
    it per clip, shape (T, H, W, 3) or (3, T, H, W), no copy; ``thw``: a list of (T, H, W) per
    clip; ``bucket``: a list of bucket ids per clip; ``cu_seqlens``: int32 tensor of the n + 1
    cumulative token counts (flash-attention's varlen); ``max_seqlen``: the longest clip's
    tokens; ``offsets``: the n + 1 element offsets of the clips in ``tensor``. A failed clip is
    replaced by a sample of its own bucket (same shape). With ``pin_memory=True``, ``tensor``,
    ``tensors`` and ``cu_seqlens`` are on the device. ``packed`` says which kind it is; a
    fixed batch has ``tensors = None``, ``cu_seqlens = None``, ``max_seqlen = None``,
    ``offsets = None``.

    ``fields``: the Loader's ``fields`` for the clips of this batch, in clip order (those of
    ``indices``: a substituted clip's fields are its substitute's): a list of str for a string
    column, a numpy array for a number column. A Loader with ``tensors`` gives a fixed batch's
    ``tensors`` as a dict instead: name -> torch tensor, the clips' files stacked (B x the files'
    shape); ``tensor`` is None when the Loader decodes no pixels (``paths=None``).
    """

    __slots__ = ("tensor", "indices", "planned", "bucket", "thw", "step", "position", "repeat",
                 "substitutions", "packed", "tensors", "cu_seqlens", "max_seqlen", "offsets",
                 "fields")

    def __init__(self, tensor, indices, planned, bucket, thw, step, position, repeat,
                 substitutions, packed=None, fields=None):
        self.fields = {} if fields is None else fields
        self.tensor = tensor
        self.indices = indices
        self.planned = planned
        self.bucket = bucket
        self.thw = thw
        self.step = step
        self.position = position
        self.repeat = repeat
        self.substitutions = substitutions
        _set_packed(self, tensor, packed)
        if packed is not None:
            self.bucket = packed["buckets"]

    def __repr__(self) -> str:
        if self.tensor is None:
            return (f"Batch(bucket={self.bucket}, thw={self.thw}, size={len(self.indices)}, "
                    f"step={self.step}, tensors={sorted(self.tensors or {})})")
        if self.packed:
            return (f"Batch(packed, clips={len(self.indices)}, tokens={int(self.cu_seqlens[-1])}, "
                    f"step={self.step}, substitutions={len(self.substitutions)})")
        return (f"Batch(bucket={self.bucket}, thw={self.thw}, size={len(self.indices)}, "
                f"step={self.step}, substitutions={len(self.substitutions)})")


def _triple(name: str, v) -> Tuple[float, float, float]:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (float(v),) * 3
    try:
        t = tuple(float(x) for x in v)
    except TypeError:
        raise TypeError(f"Loader: {name} must be a number or three numbers, got {v!r}") from None
    if len(t) != 3:
        raise ValueError(f"Loader: {name} must have three values (R, G, B), got {len(t)}")
    return t


def _dataset_column(dataset, name: str):
    """Column ``name`` of a sampler's metadata (a DataFrame, pyarrow Table, dict of arrays, a
    .csv or .parquet path, or a dataset with ``.data``)."""
    seen = set()
    while True:
        mod = type(dataset).__module__
        if isinstance(dataset, (str, os.PathLike)):
            import pandas as pd

            path = os.fspath(dataset)
            if path.lower().endswith((".parquet", ".pq")):
                import pyarrow.parquet as pq

                if name not in pq.read_schema(path).names:
                    raise KeyError(f"Loader: fields: {path} has no column {name!r}")
                return pq.read_table(path, columns=[name]).column(name)
            try:
                cols = pd.read_csv(path, nrows=0).columns
                if name not in cols:
                    raise KeyError(f"Loader: fields: {path} has no column {name!r}")
                return pd.read_csv(path, usecols=[name], keep_default_na=False,
                                   na_values=[""])[name]
            except UnicodeDecodeError:
                # The library's reader names the file, the row and the column.
                _vbucket.csv_text_column(path, name)
                raise
        if mod.startswith("pyarrow") and hasattr(dataset, "column_names"):
            if name not in dataset.column_names:
                raise KeyError(f"Loader: fields: the metadata has no column {name!r}")
            return dataset.column(name)
        if hasattr(dataset, "columns") or isinstance(dataset, dict):
            try:
                return dataset[name]
            except KeyError:
                raise KeyError(f"Loader: fields: the metadata has no column {name!r}") from None
        data = getattr(dataset, "data", None)
        if data is None or id(data) in seen:
            raise TypeError(f"Loader: fields: cannot read column {name!r} of a "
                            f"{type(dataset).__name__}; give the column itself "
                            f"(fields={{{name!r}: values}})")
        seen.add(id(data))
        dataset = data


_NUMBER_KINDS = {"b": "bool", "i": "int", "u": "uint", "f": "float"}


def _field_spec(kind: str, name, values, rows: int):
    """One (kind, name, payload) of the C++ field table; ``kind`` "text" or "tensors"
    (paths); a column of numbers is "numbers" whatever ``kind`` was asked for text."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"Loader: {kind}: a column name must be a non-empty str, got {name!r}")
    if hasattr(values, "to_pylist") and not hasattr(values, "to_numpy"):  # pyarrow ChunkedArray
        values = values.to_pandas()
    elif type(values).__module__.startswith("pyarrow"):
        values = values.to_pandas()
    arr = np.asarray(values)
    if not hasattr(values, "dtype") and arr.dtype.kind in "US":  # a list mixing str and others
        arr = np.empty(len(values), dtype=object)
        arr[:] = list(values)
    if arr.ndim != 1:
        raise ValueError(f"Loader: column {name!r} must be one value per row, got shape "
                         f"{arr.shape}")
    if len(arr) != rows:
        raise ValueError(f"Loader: column {name!r} has {len(arr)} values for the sampler's "
                         f"{rows} metadata rows")
    if kind == "fields" and arr.dtype.kind in _NUMBER_KINDS:
        arr = np.ascontiguousarray(arr)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        dtype = "bool" if arr.dtype.kind == "b" else str(arr.dtype)
        return ("numbers", name, (dtype, arr.tobytes()))
    if kind == "fields" and arr.dtype.kind not in "OUS":
        raise TypeError(f"Loader: column {name!r} has dtype {arr.dtype}: fields are strings or "
                        "numbers (bool, int, uint, float)")
    return ("text" if kind == "fields" else "tensors", name,
            arr.tolist() if arr.dtype.kind in "US" else list(values))


def _columns(kind: str, spec, sampler, rows: int) -> list:
    """The specs of ``fields=`` or ``tensors=``: names looked up in the sampler's metadata, or
    a dict name -> column."""
    if spec is None:
        return []
    if isinstance(spec, str):
        spec = [spec]
    if isinstance(spec, dict):
        items = list(spec.items())
    else:
        items = [(name, None) for name in spec]
    out = []
    for name, values in items:
        if values is None:
            if not isinstance(name, str):
                raise TypeError(f"Loader: {kind}: a column name must be a str, got {name!r}")
            values = _dataset_column(sampler.dataset, name)
        elif isinstance(values, str):  # {name: "column"}: the metadata's column of that name
            values = _dataset_column(sampler.dataset, values)
        out.append(_field_spec(kind, name, values, rows))
    return out


def _check_int(name: str, v, low: int, high: int, hint: str = "") -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise ValueError(f"Loader: {name} must be an int in [{low}, {high}]{hint}, got {v!r}")
    return v


_CHOICES = {"dtype": ("uint8", "float32", "bfloat16"),
            "filter": ("opensora", "bilinear", "bicubic", "area", "nearest"),
            "frame_choice": ("opensora", "stride"),
            "layout": ("thwc", "cthw")}


def _check_options(workers, prefetch, slots, pin_memory, **choices) -> int:
    """Checks a Loader's worker, prefetch and slot counts and its named choices (ValueError
    naming the keyword); returns the slots (default: prefetch + 2)."""
    _check_int("workers", workers, 1, Loader.MAX_WORKERS)
    _check_int("prefetch", prefetch, 1, Loader.MAX_PREFETCH)
    if slots is None:
        slots = prefetch + 2
    _check_int("slots", slots, prefetch + 1, Loader.MAX_PREFETCH + 2,
               f" (at least prefetch + 1 = {prefetch + 1})")
    _check_choices(pin_memory, **choices)
    return slots


def _as_torch(torch, dtype: str, shape, data):
    """A stacked tensor column as a torch tensor over the bytes C++ gathered (no copy)."""
    if dtype == "bfloat16":
        return torch.from_numpy(data.view(np.int16).reshape(shape)).view(torch.bfloat16)
    arr = data.view(np.dtype(dtype)).reshape(shape)
    if dtype in ("uint16", "uint32", "uint64") and not hasattr(torch, dtype):
        return arr  # a torch without these types: the numpy array
    return torch.from_numpy(arr)


def _split_fields(raw: dict, tensor_names, torch) -> tuple:
    """A batch's gathered columns (C++'s dict) as (fields, tensors): strings as lists, numbers
    as numpy arrays, tensor files as torch tensors (no copy)."""
    fields, tensors = {}, {}
    for name, v in raw.items():
        if isinstance(v, list):
            fields[name] = v
            continue
        dtype, shape, data = v
        if name in tensor_names:
            tensors[name] = _as_torch(torch, dtype, shape, data)
        else:
            fields[name] = data.view(np.dtype(dtype)).reshape(shape)
    return fields, tensors


def _check_choices(pin_memory, **choices) -> None:
    """ValueError naming the Loader keyword whose value is not one it takes."""
    for name, v in choices.items():
        if v not in _CHOICES[name]:
            raise ValueError(f"Loader: {name} must be one of {', '.join(_CHOICES[name])}; "
                             f"got {v!r}")
    if not isinstance(pin_memory, bool):
        raise ValueError(f"Loader: pin_memory must be True or False, got {pin_memory!r}")


class Loader:
    """The batches of a ``VariableVideoBatchSampler`` (from its current state, this rank's) as
    torch tensors, decoded by ``workers`` C++ threads straight into staging memory.

    ``paths``: the clip of each metadata row, in metadata order: the sources the sampler's
    metadata was scanned from, as ``scan`` takes them — a directory, a list file, a tar shard, a
    URL, or a sequence of these (nested lists of directories and shards too), resolved by the
    library's one resolver (``vbucket scan``'s) — or one path per row (``scan(...)["path"]``,
    taken as it is). They must give exactly one clip per metadata row (else ValueError naming
    both counts).
    ``dtype``: "uint8" (RGB as decoded), "float32" or "bfloat16", normalised on the workers as
    ``(x / 255 - mean) / std`` per channel. ``layout``: "thwc" or "cthw". ``prefetch``:
    batches decoded ahead. A clip that fails to decode is replaced by another sample of its
    bucket (counted in ``stats()`` and listed in ``batch.substitutions``); a batch is never
    short. A packing sampler (``batching="packed"``) gives packed batches: one flat buffer per
    batch with ``cu_seqlens``, ``max_seqlen`` and per-clip views (see ``Batch``).

    Tensor lifetime: a batch's tensor (and any view of it) stays valid for as long as it is
    referenced, also after the loader is closed or garbage collected; its staging memory goes
    back to the loader when the last reference goes. The loader has ``slots`` staging buffers
    (default ``prefetch + 2``): holding that many batches alive at once makes the next
    ``next()`` raise RuntimeError (instead of waiting forever); copy what you keep
    (``tensor.clone()``) or raise ``slots``.

    Ctrl-C while waiting for a batch stops the loader (the clips being decoded finish, the
    workers are joined) and raises KeyboardInterrupt; ``state_dict()`` still resumes, and a
    further ``next()`` raises ValueError.

    ``pin_memory=True`` (a CUDA torch and a GPU) yields tensors on the current CUDA device.
    With the CUDA adapter built in (``vbucket.HAS_CUDA``: the CUDA toolkit was found when the
    package was built) the workers decode straight into vbucket's page-locked staging ring and
    each batch is copied into a tensor PyTorch allocates on the device, on the loader's own CUDA
    stream, which PyTorch's current stream then waits for (so the tensor is ready for any work
    queued after ``next()``); the pinned slot goes back to the ring once its copy completes, so
    the ``slots`` limit does not apply to device batches. Without the adapter, batches are
    copied through ``tensor.pin_memory()``. Without a GPU it raises RuntimeError.

    ``filter``: the resize. "opensora" (the default) computes Open-Sora's pixels: a video frame
    in RGB at its size, resized as ``torch.nn.functional.interpolate(mode="bilinear")`` (no
    antialiasing) and center-cropped with the offset floored, as Open-Sora's video transform; an
    image resized bicubic with the offset rounded, as its image transform. "bilinear",
    "bicubic", "area", "nearest": libswscale's filter (faster; the same offsets).
    ``frame_choice``: the frames of a clip's crop. "opensora" (the default) takes Open-Sora's
    ``np.linspace(start, start + T * interval - 1, T, dtype=int)``; "stride" every interval-th
    frame from the start (the same frames at interval 1, i.e. below ``fps_max``).

    Per-sample fields: ``fields`` names metadata columns to return with each batch
    (``batch.fields[name]``: a list of str, or a numpy array for numbers), gathered on the C++
    workers by the samples the batch holds (after substitutions). Give names (looked up in the
    sampler's metadata: its DataFrame, pyarrow Table, dict of arrays, .csv or .parquet path, or
    a dataset's ``.data``) or a dict ``{name: column}`` (any sequence or array with one value per
    metadata row). Strings are stored once in C++ (one buffer and offsets), numbers as a typed
    column.

    Precomputed tensors: ``tensors={"latent": df["latent_path"], "text": "text_path"}`` (a dict
    name -> column of paths, or column names) reads each clip's ``.npy`` or ``.safetensors``
    file (the tensor named like the key, or the file's only one) on the workers and gives
    ``batch.tensors[name]`` stacked (B x the file's shape; every file of a batch must have one
    shape and dtype). A file that cannot be read is replaced like a clip that fails to decode.
    With ``paths=None`` nothing is decoded (``batch.tensor`` is None): Open-Sora's cached path
    (``CachedVideoTextDataset``) on the sampler's batches, with the same resume.

    Sources that go away: ``timeout``, ``io_timeout``, ``retries`` bound each clip (and the
    listing of shards in ``paths``) as in ``decode_clip``. A clip whose source cannot be
    reached (a connection refused or lost, a 5xx reply, a timeout) is not replaced: the workers
    wait on one shared health state, one tries again after a backoff, and the same sample is
    decoded once the source answers (the pipeline stalls; ``stats()["stalls"]`` counts the
    outages, ``stall_seconds`` their length). An outage longer than ``outage_deadline``
    seconds makes ``next()`` raise. A 404, a malformed file or a decode error is permanent: the
    clip is replaced as above. These four are the run spec's media fields: None takes the
    sampler's (its keywords, or its run file's: ``VariableVideoBatchSampler.from_run``), whose
    defaults are the library's (below).

    Held epochs (the sampler's default, ``hold_epochs=True``): the loader runs the held epoch,
    as the sampler's own iteration does — ``len(loader)`` is the length ``len(sampler)``
    reported first (from the sampler's position), its batches are the sampler's (a longer
    epoch's carried tail first, a shorter one's counted repeats last, ``batch.repeat``), and
    ``state_dict()`` is a slot of the held epoch that the sampler loads. A carried batch is
    decoded as in the epoch it was drawn in (that epoch's crop; a failed clip is replaced from
    that epoch's bucket).

    ``state_dict()`` is a position in the plan the loader runs (its fingerprint is that plan's,
    also after ``sampler.set_epoch``). ``close()`` (and the end of a ``with`` block) keeps the
    position: ``state_dict()`` still answers, and the sampler is left at the loader's position
    unless it was moved meanwhile (``set_epoch``, ``load_state_dict``). A ``close()`` from
    another thread makes a ``next()`` waiting there raise ValueError, never end the loop as if
    the epoch had ended.
    """

    #: The most workers, prefetched batches and staging slots a Loader takes.
    MAX_WORKERS = 1024
    MAX_PREFETCH = 1 << 16

    def __new__(cls, sampler=None, *args: Any, **kwargs: Any):
        # A run (vbucket.Run) has its own loader: Loader(run, paths, ...) is a RunLoader.
        from .run import Run
        if cls is Loader and isinstance(sampler, Run):
            from .run_loader import RunLoader
            return RunLoader(sampler, *args, **kwargs)
        return super().__new__(cls)

    @_core.takes_run_fields(*_core.MEDIA_FIELDS, doc="Media fields (None: the sampler's)")
    def __init__(self, sampler, paths: Union[PathLike, Sequence[PathLike], None], *,
                 workers: int = 4,
                 prefetch: int = 2, dtype: str = "uint8", layout: str = "thwc",
                 mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), pin_memory: bool = False,
                 slots: Optional[int] = None, fields=None, tensors=None,
                 filter: str = "opensora", timeout: Optional[float] = None,
                 io_timeout: Optional[float] = None, retries: Optional[int] = None,
                 outage_deadline: Optional[float] = None,
                 frame_choice: str = "opensora"):
        _need_ffmpeg("Loader")
        torch = need("torch", "vbucket.Loader")

        core = getattr(sampler, "_s", None)
        if not isinstance(core, _vbucket.Sampler):
            raise TypeError(
                f"Loader: sampler must be a vbucket.VariableVideoBatchSampler, got "
                f"{type(sampler).__name__}"
            )
        pixels = paths is not None
        sources, one = _sources("Loader", paths) if pixels else ([], False)
        media = _core.media_texts("Loader", timeout=timeout, io_timeout=io_timeout,
                                  retries=retries, outage_deadline=outage_deadline)
        slots = _check_options(workers, prefetch, slots, pin_memory, dtype=dtype, filter=filter,
                               frame_choice=frame_choice, layout=layout)
        rows = _vbucket.sampler_rows(core)
        spec = _columns("fields", fields, sampler, rows) + _columns("tensors", tensors, sampler,
                                                                    rows)
        if not pixels and not any(kind == "tensors" for kind, _, _ in spec) and not spec:
            raise ValueError("Loader: paths=None decodes nothing: give tensors= (or fields=)")
        self._device = None
        self._stream = None
        pin_device = -1
        if pin_memory:
            if not torch.cuda.is_available():
                raise RuntimeError(
                    "Loader: pin_memory=True needs a CUDA-enabled torch and a GPU "
                    f"(torch {torch.__version__}, cuda available: False)"
                )
            self._device = torch.device("cuda", torch.cuda.current_device())
            if getattr(_vbucket, "HAS_CUDA", False):
                pin_device = self._device.index
        self._torch = torch
        self._sampler = sampler
        self._pixels = pixels
        self._tensor_names = [name for kind, name, _ in spec if kind == "tensors"]
        self._core = _vbucket.Loader(core, sources, one, workers, prefetch, slots, dtype,
                                     layout, _triple("mean", mean), _triple("std", std),
                                     pin_device, spec, pixels, filter, media, frame_choice)
        # Where the sampler is once the loader started (an iteration that had run to its end
        # begins again at the epoch's start, as the sampler's own next iteration would).
        self._start = (core.os_state_now(), core.fingerprint())
        if pin_device >= 0:
            self._stream = torch.cuda.ExternalStream(self._core.cuda_stream, device=self._device)

    def __iter__(self) -> Iterator[Batch]:
        return self

    def __next__(self) -> Batch:
        """The next batch (a ``Batch``) of this rank, decoded ahead by the workers; StopIteration
        at the end of the plan the loader runs. ``next()`` is the same call."""
        (t, indices, planned, bucket, thw, step, position, repeat, subs, packed,
         raw) = self._core.next()
        fields, tensors = _split_fields(raw, self._tensor_names, self._torch)
        if not self._pixels:
            t = None
        elif self._stream is not None:
            t = self._to_device(t)
        elif self._device is not None:
            t = t.pin_memory().to(self._device, non_blocking=True)
        if self._device is not None:
            tensors = {k: v.to(self._device, non_blocking=True) for k, v in tensors.items()}
        b = Batch(t, indices, planned, bucket, thw, step, position, repeat, subs, packed, fields)
        if self._tensor_names:
            b.tensors = tensors
        return b

    next = __next__

    def _to_device(self, staged) -> Any:
        """Copies a batch staged in pinned memory into a new tensor on the device, on the
        loader's stream, ordered after the work already queued on PyTorch's current stream
        (the allocator may hand out memory that work still uses) and before whatever is queued
        on it next."""
        torch = self._torch
        out = torch.empty(staged.shape, dtype=getattr(torch, staged.dtype), device=self._device)
        current = torch.cuda.current_stream(self._device)
        self._stream.wait_stream(current)
        staged.submit(out.data_ptr(), out.numel() * out.element_size())
        current.wait_stream(self._stream)
        return out

    def __len__(self) -> int:
        """Batches this loader hands out in all (from the sampler's state to the epoch's end;
        held epochs: to the held epoch's end, as the sampler's ``steps_left()``)."""
        return self._core.steps()

    def state_dict(self) -> dict:
        """The sampler's ``state_dict()`` after the batches handed out so far: load it into
        the sampler (``sampler.load_state_dict``) and make a new Loader to continue exactly.
        It is a position in the plan this loader runs, with that plan's fingerprint (also when
        the sampler has moved on, e.g. ``set_epoch``), and answers after ``close()`` too."""
        d = self._sampler._state_dict_of(self._core.state())
        d["fingerprint"] = self._core.fingerprint()
        return d

    def stats(self) -> dict:
        """Loader figures: batches, samples, decoded, failed, substitutions, decode/convert
        seconds (summed over workers), waits, elapsed seconds, samples_per_second."""
        return self._core.stats()

    def stats_table(self) -> str:
        """``stats()`` as a printed table (one row per figure, with its unit)."""
        return self._core.stats_table()

    def close(self) -> None:
        """Stops the workers; batches already handed out stay valid. Idempotent. The position
        stays (``state_dict()``), and the sampler is left at it unless the sampler was moved
        since the loader was made (``set_epoch``, ``load_state_dict``, its own iteration)."""
        if self._core.closed:
            return
        self._core.close()
        core = self._sampler._s
        if (core.os_state_now(), core.fingerprint()) == self._start:
            core.load_state(self._core.state(), self._core.fingerprint())

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# The class's signature is its __init__'s: `__new__` only routes a run to RunLoader.
Loader.__signature__ = inspect.signature(Loader.__init__).replace(
    parameters=list(inspect.signature(Loader.__init__).parameters.values())[1:])
