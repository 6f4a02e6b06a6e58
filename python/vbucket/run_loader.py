"""``vbucket.Loader(run, paths, ...)``: the batches of a run (``vbucket.Run``: several weighted
sources, stages, out-of-memory steps, world changes) decoded by C++ workers, each source's clips
from its own paths (``vbucket::run_loader``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Iterator, Optional, Sequence

import numpy as np

from . import _core, _vbucket
from ._optional import need
from .media import (_check_options, _dataset_column, _field_spec, _need_ffmpeg, _set_packed,
                    _sources, _split_fields, _triple)
from .run import Run


class RunBatch:
    """One batch of a ``Loader`` over a run.

    ``tensor``: a ``torch.Tensor`` over the loader's staging memory, (B, T, H, W, 3) for layout
    "thwc", (B, 3, T, H, W) for "cthw"; a packed stage's batch is its flat buffer (1-D) with
    ``tensors`` (a view per clip), ``cu_seqlens``, ``max_seqlen`` and ``offsets``, as
    ``vbucket.Batch``. ``source``, ``row``: each clip's source (its index in the run file) and
    row, as decoded (a failed clip holds its replacement: a sample of the same bucket);
    ``planned_source``, ``planned_row``: as the run planned them. ``step`` (the run's),
    ``epoch``, ``stage``, ``rank``, ``world``, ``bucket`` (resolution, frames, aspect), ``thw``,
    ``pads`` (the last ``pads`` entries repeat samples), ``repeat`` (a rank-alignment repeat),
    ``position``; ``substitutions``: one dict per replaced clip (clip, failed, replacement as
    the ledger's global ids, error). ``fields``: the Loader's ``fields`` for the clips as
    decoded (a list of str or a numpy array per name); a fixed batch's ``tensors``: the
    Loader's ``tensors`` stacked (name -> torch tensor).
    """

    __slots__ = ("tensor", "source", "row", "planned_source", "planned_row", "step", "epoch",
                 "stage", "rank", "world", "bucket", "thw", "pads", "repeat", "position",
                 "substitutions", "packed", "tensors", "cu_seqlens", "max_seqlen", "offsets",
                 "fields")

    def __init__(self, tensor, info: dict, substitutions: list, packed, fields=None,
                 tensors=None) -> None:
        self.tensor = tensor
        self.fields = {} if fields is None else fields
        for key in ("step", "epoch", "stage", "rank", "world", "bucket", "thw", "pads", "repeat",
                    "position"):
            setattr(self, key, info[key])
        for key in ("source", "row", "planned_source", "planned_row"):
            setattr(self, key, np.asarray(info[key], dtype=np.uint32))
        self.substitutions = substitutions
        _set_packed(self, tensor, packed)
        if packed is None and tensors:
            self.tensors = tensors

    def __len__(self) -> int:
        return len(self.row)

    def __repr__(self) -> str:
        return (f"RunBatch(step={self.step}, epoch={self.epoch}, stage={self.stage}, "
                f"size={len(self.row)}, thw={self.thw}, substitutions={len(self.substitutions)})")


def _run_columns(kind: str, spec, plan, names: list) -> list:
    """The specs of ``fields=`` or ``tensors=`` over a run: one column over the sources' rows
    stacked in the run's order (the ledger's global ids)."""
    if spec is None:
        return []
    if isinstance(spec, str):
        spec = [spec]
    items = list(spec.items()) if isinstance(spec, Mapping) else [(n, None) for n in spec]
    csvs, rows = list(plan.source_csvs), list(plan.source_rows)
    out = []
    for name, column in items:
        if not isinstance(name, str):
            raise TypeError(f"Loader: {kind}: a column name must be a str, got {name!r}")
        column = name if column is None else column
        if isinstance(column, str):
            parts = [_dataset_column(csv, column) for csv in csvs]
        elif isinstance(column, Mapping):
            missing = [n for n in names if n not in column]
            if missing or set(column) - set(names):
                raise ValueError(f"Loader: {kind}[{name!r}]: give a column per source "
                                 f"({names}); missing {missing}, unknown "
                                 f"{sorted(set(column) - set(names))}")
            parts = [column[n] for n in names]
        elif isinstance(column, Sequence) and len(column) == len(names):
            parts = list(column)
        else:
            raise ValueError(f"Loader: {kind}[{name!r}]: a column name, a dict source -> values "
                             f"or one sequence of values per source ({len(names)})")
        for n, part, want in zip(names, parts, rows):
            if len(part) != want:
                raise ValueError(f"Loader: {kind}[{name!r}]: source {n!r} has {want} rows, "
                                 f"the column {len(part)} values")
        arrays = [np.asarray(p) for p in parts]
        if all(a.dtype.kind in "biuf" for a in arrays):
            values = np.concatenate(arrays)
        else:
            values = [v for p in parts for v in (p.tolist() if hasattr(p, "tolist") else p)]
        out.append(_field_spec(kind, name, values, sum(rows)))
    return out


class RunLoader:
    """The batches of a ``vbucket.Run`` (this rank's), decoded by ``workers`` C++ threads; made
    by ``vbucket.Loader(run, paths, ...)``.

    ``paths``: one entry per source of the run, in the run file's order (a sequence), or a dict
    keyed by source name; each entry is what ``Loader`` takes for a sampler (a directory, a list
    file, a tar shard, a URL, a sequence of these, or one path per row of that source's table).
    ``dtype``, ``layout``, ``mean``, ``std``, ``filter``, ``frame_choice``, ``workers``,
    ``prefetch``, ``slots`` and the media fields are ``Loader``'s (None: the run file's).
    ``pin_memory=True`` copies each batch through ``tensor.pin_memory()`` to the current CUDA
    device.

    ``fields`` and ``tensors`` (per-sample columns and tensor files, as ``Loader``'s): names
    (each looked up in every source's CSV), or a dict name -> column, the column being a name
    of every source's CSV, a dict source name -> that source's values, or a sequence with one
    entry per source (its values, one per row of its table).

    The loop is the run's (``vbucket::run_loop``): ``for batch in loader:`` hands out this
    rank's batches of the current epoch and ends once at its end (the next loop goes on with
    the next epoch). ``state_dict()`` taken after batch k resumes at batch k + 1;
    ``out_of_memory(ranks)`` after batch k makes the next batch step k planned again;
    ``set_world``; ``load_state_dict(d, world=None)`` resumes under the world ``d`` was saved
    under unless ``world`` is given. These are the run's calls (``loader.run`` is the run), and
    the loader follows them. A run made with ``ledger=DIR`` records every batch handed out (its
    substitutions included, global ids) before it is handed out; ``vbucket audit DIR`` proves
    what the trainer received.

    A clip that fails to decode is replaced by another sample of its bucket (counted per source
    in ``substitutions_by_source()``, listed in ``batch.substitutions``). The temporal crop of a
    sample depends on (run seed, source, epoch, row) only. Batches are decoded ``prefetch``
    ahead within a schedule; at a change (a new stage or segment, an out-of-memory step, a world
    change, a new epoch) the loader starts again from the run's step.
    """

    def __init__(self, run: Run, paths, *, workers: int = 4, prefetch: int = 2,
                 dtype: str = "uint8", layout: str = "thwc", mean=(0.5, 0.5, 0.5),
                 std=(0.5, 0.5, 0.5), pin_memory: bool = False, slots: Optional[int] = None,
                 filter: str = "opensora", timeout: Optional[float] = None,
                 io_timeout: Optional[float] = None, retries: Optional[int] = None,
                 outage_deadline: Optional[float] = None,
                 frame_choice: str = "opensora", fields=None, tensors=None) -> None:
        _need_ffmpeg("Loader")
        torch = need("torch", "vbucket.Loader")
        if paths is None:
            raise ValueError("Loader: a run's loader decodes pixels: give paths (one entry per "
                             "source)")
        slots = _check_options(workers, prefetch, slots, pin_memory, dtype=dtype, filter=filter,
                               frame_choice=frame_choice, layout=layout)
        names = list(run.source_names)
        if isinstance(paths, Mapping):
            unknown = sorted(set(paths) - set(names))
            missing = [n for n in names if n not in paths]
            if unknown or missing:
                raise ValueError(f"Loader: paths: the run's sources are {names}; "
                                 f"missing {missing}, unknown {unknown}")
            paths = [paths[n] for n in names]
        elif isinstance(paths, (str, os.PathLike)) or not isinstance(paths, Sequence):
            raise ValueError("Loader: paths: one entry per source of the run (a sequence in the "
                             f"run file's order, or a dict keyed by name: {names})")
        if len(paths) != len(names):
            raise ValueError(f"Loader: paths: {len(paths)} entries for the run's {len(names)} "
                             f"sources ({', '.join(names)})")
        resolved = [_sources("Loader", p) for p in paths]
        media = _core.media_texts("Loader", timeout=timeout, io_timeout=io_timeout,
                                  retries=retries, outage_deadline=outage_deadline)
        self._device = None
        if pin_memory:
            if not torch.cuda.is_available():
                raise RuntimeError("Loader: pin_memory=True needs a CUDA-enabled torch and a GPU")
            self._device = torch.device("cuda", torch.cuda.current_device())
        spec = (_run_columns("fields", fields, run._plan, names)
                + _run_columns("tensors", tensors, run._plan, names))
        self._tensor_names = [name for kind, name, _ in spec if kind == "tensors"]
        self._torch = torch
        self._run = run
        self._core = _vbucket.RunLoader(run._plan, run._loop, [r[0] for r in resolved],
                                        [bool(r[1]) for r in resolved], workers, prefetch, slots,
                                        dtype, layout, _triple("mean", mean), _triple("std", std),
                                        filter, media, frame_choice, spec)

    @property
    def run(self) -> Run:
        """The run this loader follows."""
        return self._run

    def __iter__(self) -> Iterator[RunBatch]:
        """This rank's batches of the current epoch, from the run's position on."""
        while True:
            got = self._core.next()
            if got is None:
                return
            tensor, info, subs, packed, raw = got
            fields, tensors = _split_fields(raw, self._tensor_names, self._torch)
            if self._device is not None:
                tensor = tensor.pin_memory().to(self._device, non_blocking=True)
                tensors = {k: t.to(self._device, non_blocking=True) for k, t in tensors.items()}
            yield RunBatch(tensor, info, subs, packed, fields, tensors)

    def next(self) -> Optional[RunBatch]:
        """The next batch, or None once at the end of an epoch."""
        return next(iter(self), None)

    def __len__(self) -> int:
        """Steps left in the current epoch (the batch in hand, if any, included)."""
        return len(self._run)

    def state_dict(self) -> dict:
        """The run's state after the batches handed out: a run loaded from it (and a Loader over
        it) hands out the next batch."""
        return self._run.state_dict()

    def load_state_dict(self, d: dict, world: Optional[int] = None) -> None:
        """Resumes the run from ``d`` under the world it was saved under (or ``world``)."""
        self._run.load_state_dict(d, world)

    def out_of_memory(self, ranks: Sequence[int] = (), factor: float = 0.5) -> None:
        """The batch in hand failed (out of memory on ``ranks``; empty: all): the next batch
        handed out is its step planned again with smaller batches."""
        self._run.out_of_memory(ranks, factor)

    def set_world(self, world: int, rank: Optional[int] = None) -> None:
        """From the step after the batch in hand, ``world`` ranks (every rank calls it)."""
        self._run.set_world(world, rank)

    def substitutions_by_source(self) -> dict:
        """Replaced clips so far, per source name (of the sample that failed)."""
        return dict(zip(self._run.source_names, self._core.substitutions_by_source()))

    def stats(self) -> dict:
        """Loader figures over every schedule followed (as ``Loader.stats()``)."""
        return self._core.stats()

    def stats_table(self) -> str:
        return self._core.stats_table()

    def close(self) -> None:
        """Stops the workers; batches handed out stay valid; the run keeps its position."""
        self._core.close()

    def __enter__(self) -> "RunLoader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
