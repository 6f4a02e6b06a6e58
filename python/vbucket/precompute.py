"""Latent caches that survive random bucketing (issue 32).

``cache_plan(meta, config, ...)``: every sample's exact probability of each bucket shape (from
the rule's structure, not sampled), and the fewest (sample, shape) entries whose probability
reaches a coverage target, or the most probability per byte within a byte budget; its cost and
the total variation between the rule's and the delivered distribution; optionally the manifest
CSV that ``vbucket cache-plan --out`` writes (the same rows).

``precompute(manifest, encode, out_dir, ...)``: decodes each entry's clip (its own start frame,
interval and shape) with vbucket's decoder, batched by shape, calls ``encode(batch)`` and writes
one ``.npy`` per entry atomically (a temporary file, then ``os.replace``). An entry already
written is skipped, so a killed job resumes where it stopped; ranks share the work by entry
(``rank``, ``world``: from torch.distributed when initialised); at most ``prefetch`` decoded
batches wait in memory.
"""

from __future__ import annotations

import csv
import math
import os
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, List, Optional, Sequence, Union

import numpy as np

from . import _core

try:
    from . import _vbucket
except ImportError:  # pragma: no cover - the extension is always built with the package
    _vbucket = None

#: The manifest's columns, as ``vbucket cache-plan --out`` writes them.
MANIFEST_COLUMNS = ("sample", "path", "T", "H", "W", "start", "interval", "bytes", "probability",
                    "bucket", "resolution", "ratio", "file")


def _columns_of(meta):
    """(num_frames, height, width, fps, paths or None) of a CSV path, DataFrame or dict. A CSV
    is read by the library's reader (``vbucket.load_meta``'s: its ranges, its errors naming the
    file, row and column), its path column as text by the same reader."""
    if isinstance(meta, (str, os.PathLike)):
        path = os.fspath(meta)
        frames, height, width, fps = _vbucket.Meta.from_csv(path).columns()
        return frames, height, width, fps, _vbucket.csv_text_column(path, "path")
    cols = meta
    frames = np.ascontiguousarray(np.asarray(cols["num_frames"]), dtype=np.int64)
    height = np.ascontiguousarray(np.asarray(cols["height"]), dtype=np.int64)
    width = np.ascontiguousarray(np.asarray(cols["width"]), dtype=np.int64)
    fps = (np.ascontiguousarray(np.asarray(cols["fps"], dtype=np.float64))
           if "fps" in cols else np.full(len(frames), math.nan))
    paths = [str(p) for p in cols["path"]] if "path" in cols else None
    return frames, height, width, fps, paths


def _config_text(config) -> str:
    if isinstance(config, (str, os.PathLike)):
        with open(config) as f:
            return f.read()
    return _core._config_json(config)


def cache_plan(meta, config, *, rule: str = "opensora-v2", coverage: Optional[float] = None,
               budget_bytes: Optional[int] = None, epochs: int = 1, seed: int = 0,
               encoder: str = "latent", compression=(4, 8, 8), channels: int = 16,
               bytes_per_element: int = 2, seconds=None, fallback: str = "nearest",
               fps_max: float = 16.0, frame_interval: int = 1, select: str = "coverage",
               out=None) -> dict:
    """The cache plan of ``meta`` (a metadata CSV path, a DataFrame or a dict of columns
    num_frames, height, width, fps and optionally path) under ``config`` (Open-Sora's dict or a
    JSON file) and ``rule``: as ``vbucket cache-plan``. ``coverage`` (default 0.99, or 1 with
    ``budget_bytes``) is the fraction of the bucketed draws served from the cache; ``seconds``
    = (A, B) is the encoder's cost model A + B x latent positions per entry. ``select=
    "stratified"``: one shape per sample instead, drawn so that samples with the same
    distribution keep the rule's bucket histogram (``coverage`` and ``budget_bytes`` unused).

    Returns a dict: samples, bucketable, bucketed_mass, possible_entries; ``chosen``,
    ``one_per_sample`` and ``every_shape`` (each: files, bytes, seconds, shapes_per_sample,
    coverage, expected_draws, tv_sample, tv_buckets); ``entries``: a list of manifest rows
    (dicts with MANIFEST_COLUMNS). ``out``: also write them as the manifest CSV.
    """
    frames, height, width, fps, paths = _columns_of(meta)
    if coverage is None:
        coverage = 1.0 if budget_bytes is not None else 0.99
    a, b = (0.0, 0.0) if seconds is None else (float(seconds[0]), float(seconds[1]))
    ct, ch, cw = (int(x) for x in compression)
    plan = _vbucket.cache_plan(frames, height, width, fps, _config_text(config), rule,
                               float(fps_max), int(frame_interval), float(coverage),
                               None if budget_bytes is None else int(budget_bytes), int(epochs),
                               int(seed), str(encoder), (ct, ch, cw), int(channels),
                               int(bytes_per_element), a, b, fallback, select)
    cols = plan.pop("entries")
    rows = []
    for j in range(len(cols["sample"])):
        row = {k: cols[k][j] for k in cols}
        row["path"] = paths[row["sample"]] if paths is not None else ""
        rows.append({k: row[k] for k in MANIFEST_COLUMNS})
    plan["entries"] = rows
    if out is not None:
        write_manifest(out, rows)
    return plan


def write_manifest(path, rows: Sequence[dict]) -> None:
    """Writes manifest rows as CSV, atomically (a temporary file, then os.replace)."""
    tmp = f"{os.fspath(path)}.tmp-{os.getpid()}"
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(MANIFEST_COLUMNS)
        for r in rows:
            w.writerow([repr(r[k]) if k == "probability" else r[k] for k in MANIFEST_COLUMNS])
    os.replace(tmp, path)


def read_manifest(path) -> List[dict]:
    """The rows of a manifest CSV (``vbucket cache-plan --out``), numbers as int/float."""
    ints = ("sample", "T", "H", "W", "start", "interval", "bytes", "bucket")
    out = []
    with open(path, newline="") as f:
        for k, r in enumerate(csv.DictReader(f)):
            try:
                for c in ints:
                    r[c] = int(r[c])
                r["probability"] = float(r["probability"])
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"{os.fspath(path)}: row {k + 1}: {e}") from None
            out.append(r)
    return out


def _dist_rank_world(rank, world):
    if rank is not None and world is not None:
        return int(rank), int(world)
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return (dist.get_rank() if rank is None else int(rank),
                    dist.get_world_size() if world is None else int(world))
    except ImportError:
        pass
    return (0 if rank is None else int(rank)), (1 if world is None else int(world))


def _default_decode(root):
    from .media import decode_clip

    def decode(entry):
        path = entry["path"]
        if not path:
            raise ValueError(f"precompute: entry of sample {entry['sample']} has no path")
        if root is not None and not os.path.isabs(path):
            path = os.path.join(root, path)
        return decode_clip(path, entry["start"], entry["T"], entry["interval"],
                           size=(entry["H"], entry["W"]), layout="cthw")
    return decode


def _to_numpy(x):
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach()
        if x.dtype.is_floating_point and str(x.dtype) == "torch.bfloat16":
            x = x.float()  # numpy has no bfloat16
        return x.cpu().numpy()
    return np.asarray(x)


def _save_atomic(final: str, arr: np.ndarray, tag: str) -> None:
    os.makedirs(os.path.dirname(final) or ".", exist_ok=True)
    tmp = f"{final}.{tag}"
    with open(tmp, "wb") as f:
        np.save(f, arr)
    os.replace(tmp, final)


def _check_entry_file(file, manifest, j) -> None:
    """Refuses an entry's file that would be written outside out_dir: empty, absolute, or with
    a ``..`` part (a manifest is data; its paths stay under the cache's directory)."""
    parts = str(file or "").replace("\\", "/").split("/")
    if (not file or os.path.isabs(str(file)) or str(file).startswith(("/", "\\"))
            or any(p in ("", ".", "..") for p in parts) or os.path.splitdrive(str(file))[0]):
        where = (f"{os.fspath(manifest)}: row {j + 1}" if isinstance(manifest, (str, os.PathLike))
                 else f"precompute: entry {j}")
        raise ValueError(f"{where}: column 'file': {file!r} is not a relative path inside "
                         f"out_dir (no absolute path, no '..')")


def precompute(manifest, encode: Callable, out_dir, *, batch_size: int = 8,
               rank: Optional[int] = None, world: Optional[int] = None, prefetch: int = 2,
               workers: int = 4, progress: bool = False, decode: Optional[Callable] = None,
               root=None, to_torch: bool = True) -> Dict[str, float]:
    """Encodes the entries of ``manifest`` (a manifest CSV path, ``cache_plan``'s result or its
    rows) into ``out_dir/<entry's file>`` (one ``.npy`` each).

    Entry j is this rank's when j % world == rank (``rank``/``world`` default to
    torch.distributed's when it is initialised, else 0/1). Entries whose file exists are
    skipped. The rest are grouped by shape (T, H, W) into batches of at most ``batch_size``;
    a background thread decodes them (``workers`` clips at once, with ``decode(entry)``:
    default ``vbucket.decode_clip`` of the entry's path (under ``root``), start, T, interval
    and (H, W), layout (3, T, H, W) uint8) and holds at most ``prefetch`` decoded batches.
    ``encode(batch)`` gets the stacked clips (a torch uint8 tensor (B, 3, T, H, W), or numpy
    with ``to_torch=False``) and returns B latents (tensor or array); each is written to a
    temporary name and renamed into place, so a kill leaves whole files only (stale temporary
    files of this rank are removed at the start).

    Returns counts and seconds: entries (this rank's), skipped, encoded, decode_seconds (summed
    over the decoding threads), encode_seconds, write_seconds, seconds (wall).
    """
    if isinstance(manifest, dict) and "entries" in manifest:
        rows = list(manifest["entries"])
    elif isinstance(manifest, (str, os.PathLike)):
        rows = read_manifest(manifest)
    else:
        rows = list(manifest)
    if batch_size < 1 or prefetch < 1 or workers < 1:
        raise ValueError("precompute: batch_size, prefetch and workers must be at least 1")
    rank, world = _dist_rank_world(rank, world)
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"precompute: rank {rank} is not in [0, {world})")
    out_dir = os.fspath(out_dir)
    tag = f"tmp-r{rank}"
    for dirpath, _, names in os.walk(out_dir):  # what a killed run of this rank left
        for name in names:
            if name.endswith("." + tag):
                os.remove(os.path.join(dirpath, name))
    for j, r in enumerate(rows):
        _check_entry_file(r.get("file"), manifest, j)
    mine = [r for j, r in enumerate(rows) if j % world == rank]
    todo = [r for r in mine if not os.path.exists(os.path.join(out_dir, r["file"]))]
    stats = {"entries": len(mine), "skipped": len(mine) - len(todo), "encoded": 0,
             "decode_seconds": 0.0, "encode_seconds": 0.0, "write_seconds": 0.0, "seconds": 0.0}
    start = time.perf_counter()
    by_shape: Dict[tuple, List[dict]] = {}
    for r in todo:
        by_shape.setdefault((r["T"], r["H"], r["W"]), []).append(r)
    batches = [group[k:k + batch_size] for group in by_shape.values()
               for k in range(0, len(group), batch_size)]
    dec = decode if decode is not None else _default_decode(root)
    q: "queue.Queue" = queue.Queue(maxsize=prefetch)
    stop = threading.Event()
    decode_time = [0.0]

    def timed(entry):
        t0 = time.perf_counter()
        x = dec(entry)
        decode_time[0] += time.perf_counter() - t0  # a float add under the GIL: atomic enough
        return x

    def put(item) -> bool:
        """Hands `item` to the consumer; False once the consumer has stopped."""
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce():
        try:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                for batch in batches:
                    if stop.is_set():
                        return
                    clips = list(pool.map(timed, batch))
                    if not put((batch, np.stack(clips))):
                        return
        except BaseException as e:  # handed to the consumer, raised there
            put(("error", e))
            return
        put(None)

    bar = None
    if progress:
        try:
            from tqdm import tqdm

            bar = tqdm(total=len(todo), unit="entry", desc=f"precompute rank {rank}")
        except ImportError:
            bar = None
    thread = threading.Thread(target=produce, name="vbucket-precompute-decode", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is None:
                break
            if item[0] == "error":
                raise item[1]
            batch, stacked = item
            x = stacked
            if to_torch:
                import torch

                x = torch.from_numpy(stacked)
            t0 = time.perf_counter()
            out = encode(x)
            t1 = time.perf_counter()
            if len(out) != len(batch):
                raise ValueError(f"precompute: encode returned {len(out)} latents for a batch of "
                                 f"{len(batch)}")
            for r, latent in zip(batch, out):
                _save_atomic(os.path.join(out_dir, r["file"]), _to_numpy(latent), tag)
            t2 = time.perf_counter()
            stats["encode_seconds"] += t1 - t0
            stats["write_seconds"] += t2 - t1
            stats["encoded"] += len(batch)
            if bar is not None:
                bar.update(len(batch))
    finally:
        stop.set()
        thread.join()
        if bar is not None:
            bar.close()
    stats["decode_seconds"] = decode_time[0]
    stats["seconds"] = time.perf_counter() - start
    return stats


def cache_assign(meta, config, rows: Sequence[dict], *, seed: int = 0, epoch: int = 0,
                 rule: str = "opensora-v2", fallback: str = "nearest", fps_max: float = 16.0,
                 frame_interval: int = 1) -> np.ndarray:
    """The bucket of every sample in one epoch under the cached rule over the entries ``rows``
    (draws of ``fast_source(seed, epoch)``, a sampler's rng="fast"): the rule's bucket where
    its shape is cached for the sample, else the sample's nearest cached shape (or -1 with
    ``fallback="drop"`` or no entry)."""
    frames, height, width, fps, _ = _columns_of(meta)
    samples = np.array([r["sample"] for r in rows], dtype=np.int64)
    buckets = np.array([r["bucket"] for r in rows], dtype=np.int64)
    return np.array(_vbucket.cache_assign(frames, height, width, fps, _config_text(config), rule,
                                          float(fps_max), int(frame_interval), samples, buckets,
                                          int(seed), int(epoch), fallback), dtype=np.int64)


__all__ = ["cache_plan", "precompute", "read_manifest", "write_manifest", "cache_assign",
           "MANIFEST_COLUMNS"]
