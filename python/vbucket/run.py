"""A training run of several weighted sources and stages, planned by vbucket's ``run_plan``
(the run file of ``vbucket plan --run RUN.json``, read by the same C++ reader).

``Run.from_file(path, rank=r)`` iterates this rank's batches of the current epoch; each batch is
a dict with the fields and keys of the CLI's JSON lines (``step``, ``epoch``, ``stage``,
``rank``, ``bucket``, ``thw``, ``source``, ``row``, ``pads``, ``repeat``): ``source[i]`` is the
index of entry i's source in the run file and ``row[i]`` its row; the last ``pads`` entries repeat
samples.

The loop follows the stateful-loader convention (C++ ``vbucket::run_loop``): a batch handed out
by ``for b in run:`` counts as trained once the next batch is asked for or ``state_dict()`` is
taken, so a state taken in the loop body after batch k resumes at batch k + 1;
``out_of_memory(ranks)`` in the loop body says batch k failed, and the next batch handed out is
step k planned again with smaller batches; ``load_state_dict()`` resumes under the world the state
was saved under, unless ``world=`` is given (or ``set_world`` called after it). Every drawn sample
of the epoch is delivered exactly once across those changes. ``Run.from_file(..., ledger=DIR)``
writes this rank's ledger (``DIR/rank-R.ledger``) itself: one record per batch handed out,
before it is handed out; ``vbucket audit DIR`` proves what the trainer was handed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from . import _vbucket

STATE_FORMAT = "vbucket-run-1"


class Run:
    """One rank's view of a multi-source, multi-stage run (``_vbucket.RunPlan``)."""

    def __init__(self, plan: Any, rank: int = 0,
                 ledger: str | os.PathLike[str] | None = None,
                 world: int | None = None) -> None:
        self._plan = plan
        if world is not None:
            plan.set_world(int(world))
        self._loop = _vbucket.RunLoop(plan, int(rank), "" if ledger is None else os.fspath(ledger))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], rank: int = 0,
                  ledger: str | os.PathLike[str] | None = None,
                  world: int | None = None) -> Run:
        """The run of a run file (with "sources" and "stages"), seen from ``rank`` of ``world``
        ranks (default: the file's); with ``ledger``, the loop writes ``ledger/rank-R.ledger``.
        """
        return cls(_vbucket.RunPlan.from_file(os.fspath(path)), rank, ledger, world)

    @property
    def rank(self) -> int:
        return int(self._loop.rank)

    @property
    def epoch(self) -> int:
        return int(self._plan.epoch)

    @property
    def step(self) -> int:
        return int(self._plan.step)

    @property
    def stage(self) -> int:
        return int(self._plan.stage)

    @property
    def source_names(self) -> list[str]:
        """The sources' names, in the run file's order (``batch["source"]`` indexes them)."""
        return list(self._plan.source_names)

    @property
    def world(self) -> int:
        return int(self._plan.world)

    def batch(self, rank: int | None = None) -> dict[str, Any]:
        """The current step's batch of ``rank`` (default: this rank's); does not advance. (The
        batch handed out by the loop, while it is in hand, is this step's.)"""
        return self._plan.batch(self.rank if rank is None else int(rank))

    def advance(self) -> None:
        """The current step was trained on: move to the next (for a loop of your own over
        ``batch()``; ``for b in run:`` advances by itself)."""
        if self._loop.handed_out:
            raise ValueError("run: advance() while the loop has a batch in hand (the loop moves "
                             "on by itself when the next batch is asked for)")
        self._plan.advance()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """This rank's batches of the current epoch, from the current step on (the batch in
        hand, if any, counts as trained)."""
        while True:
            b = self._loop.next(self._plan)
            if b is None:
                return
            yield b

    def __len__(self) -> int:
        """Steps left in the current epoch."""
        return int(self._plan.steps_left)

    def set_world(self, world: int, rank: int | None = None) -> None:
        """From the step after the batch in hand (or the current step), ``world`` ranks (every
        rank calls it at the same step); this Run's rank becomes ``rank`` when given."""
        self._loop.set_world(int(world), None if rank is None else int(rank))

    def out_of_memory(self, ranks: Sequence[int] = (), factor: float = 0.5) -> None:
        """The step ran out of memory on ``ranks`` (empty: all): their batch sizes are scaled by
        ``factor`` and the epoch's undelivered samples are planned again. In ``for b in run:``
        the step is the batch in hand, and the next batch handed out is that step planned
        again; outside a loop, the current step (``batch()``)."""
        ranks = [int(r) for r in ranks]
        if self._loop.handed_out:
            self._loop.out_of_memory(ranks, float(factor))
        else:
            self._plan.out_of_memory(ranks, float(factor))

    def write_ledger(self, path: str | os.PathLike[str], ranks: Sequence[int] | None = None) -> None:
        """Appends the current step's batch of this rank (or of ``ranks``; empty: all) to
        PATH/rank-R.ledger, as ``vbucket plan --run --ledger PATH`` does: call it for the batch
        just yielded, before the next; ``vbucket audit PATH`` checks the run."""
        self._plan.write_ledger(os.fspath(path), [self.rank] if ranks is None else list(ranks))

    def state(self) -> str:
        """The run's state line ("vbucket-run v=1 ..."), as ``vbucket plan --run`` prints it,
        after the batches handed out (the batch in hand counts as trained)."""
        return str(self._loop.state())

    def state_dict(self) -> dict[str, str]:
        """The state after the batches handed out: a run loaded from it hands out the next."""
        return {"format": STATE_FORMAT, "state": self.state()}

    def load_state_dict(self, d: dict[str, str], world: int | None = None) -> None:
        """Resumes from ``d`` under the world it was saved under, or ``world`` when given. With a
        ledger, its records of the state's step and later ones are removed (they are handed out
        again). A refused state leaves the run as it was."""
        if not isinstance(d, dict) or d.get("format") != STATE_FORMAT:
            got = d.get("format") if isinstance(d, dict) else type(d).__name__
            raise ValueError(f"run: state_dict format {got!r}, expected {STATE_FORMAT!r}")
        self._loop.load(d["state"], None if world is None else int(world))
