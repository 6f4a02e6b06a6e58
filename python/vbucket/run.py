"""A training run of several weighted sources and stages, planned by vbucket's ``run_plan``
(the run file of ``vbucket plan --run RUN.json``, read by the same C++ reader).

``Run.from_file(path, rank=r)`` iterates this rank's batches of the current epoch; each batch is
a dict with the fields of the CLI's JSON lines (``step``, ``epoch``, ``stage``, ``rank``,
``bucket``, ``thw``, ``sources``, ``rows``, ``pads``, ``repeat``): ``sources[i]`` is the index of
entry i's source in the run file and ``rows[i]`` its row; the last ``pads`` entries repeat samples.
The run advances after each yielded batch. ``state_dict()`` / ``load_state_dict()`` save and
resume it at a step boundary, under any world size (``set_world``), and ``out_of_memory(ranks)``
plans the current step again with smaller batches: every drawn sample of the epoch is delivered
exactly once across those changes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from . import _vbucket

STATE_FORMAT = "vbucket-run-1"


class Run:
    """One rank's view of a multi-source, multi-stage run (``_vbucket.RunPlan``)."""

    def __init__(self, plan: Any, rank: int = 0) -> None:
        self._plan = plan
        self.rank = int(rank)
        if not 0 <= self.rank < plan.world:
            raise ValueError(f"run: rank {self.rank} is not below world {plan.world}")

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], rank: int = 0) -> Run:
        """The run of a run file (with "sources" and "stages"), seen from ``rank``."""
        return cls(_vbucket.RunPlan.from_file(os.fspath(path)), rank)

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
    def world(self) -> int:
        return int(self._plan.world)

    def batch(self, rank: int | None = None) -> dict[str, Any]:
        """The current step's batch of ``rank`` (default: this rank's); does not advance."""
        return self._plan.batch(self.rank if rank is None else int(rank))

    def advance(self) -> None:
        """The current step was trained on: move to the next."""
        self._plan.advance()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """This rank's batches of the current epoch, from the current step on."""
        epoch = self._plan.epoch
        while self._plan.epoch == epoch:
            b = self._plan.batch(self.rank)
            yield b
            self._plan.advance()

    def __len__(self) -> int:
        """Steps left in the current epoch."""
        return int(self._plan.steps_left)

    def set_world(self, world: int, rank: int | None = None) -> None:
        """From the current step on, ``world`` ranks (every rank calls it at the same step)."""
        self._plan.set_world(int(world))
        if rank is not None:
            self.rank = int(rank)
        if not 0 <= self.rank < self._plan.world:
            raise ValueError(f"run: rank {self.rank} is not below world {self._plan.world}")

    def out_of_memory(self, ranks: Sequence[int] = (), factor: float = 0.5) -> None:
        """The current step ran out of memory on ``ranks`` (empty: all): their batch sizes are
        scaled by ``factor`` and the epoch's undelivered samples are planned again."""
        self._plan.out_of_memory([int(r) for r in ranks], float(factor))

    def write_ledger(self, path: str | os.PathLike[str], ranks: Sequence[int] | None = None) -> None:
        """Appends the current step's batch of this rank (or of ``ranks``; empty: all) to
        PATH/rank-R.ledger, as ``vbucket plan --run --ledger PATH`` does: call it for the batch
        just yielded, before the next; ``vbucket audit PATH`` checks the run."""
        self._plan.write_ledger(os.fspath(path), [self.rank] if ranks is None else list(ranks))

    def state(self) -> str:
        """The run's state line ("vbucket-run v=1 ..."), as ``vbucket plan --run`` prints it."""
        return str(self._plan.state())

    def state_dict(self) -> dict[str, str]:
        return {"format": STATE_FORMAT, "state": self.state()}

    def load_state_dict(self, d: dict[str, str]) -> None:
        if d.get("format") != STATE_FORMAT:
            raise ValueError(
                f"run: state_dict format {d.get('format')!r}, expected {STATE_FORMAT!r}"
            )
        self._plan.load(d["state"])
