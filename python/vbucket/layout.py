"""A parallel layout per bucket and an epoch planned over groups of ranks (issue 45): each
(resolution, frames) bucket gets a sequence-parallel size ``sp``, a batch per group, a
micro-batch and accumulation micro-steps; every step partitions the world into groups of those
sizes, every sample once per epoch, resumable under another world size. The planning is the C++
library's (``vbucket/plan/parallel_layout.hpp``, ``vbucket/plan/group_plan.hpp``); this module converts
Python values and calls it.

    plan = vbucket.GroupPlan(meta, config, seed=1, layouts={"256px:1": (1, 8, 4), ...})
    schedule = plan.deal(world=4)               # or plan.deal(world=2, state=saved)
    work = schedule.work(step, rank)            # my group, my batch, my micro-steps
    saved = schedule.state_after(steps_done)    # a string: any world size resumes from it

The ledger (``vbucket audit DIR`` proves every sample of the epoch delivered once): rank 0
calls ``plan.write_ledger_epoch(DIR)`` before its first step (again on a resume), and every
rank ``schedule.write_ledger(DIR, step, rank, run_step)`` each step (a group's first rank
records the group's batch, once).
"""

from __future__ import annotations

import os

from typing import Mapping, Sequence

from . import _vbucket
from ._core import _config, _meta, _spec

#: The layout options GroupPlan passes on (vbucket::layout_fields: the names of
#: vbucket::layout_options' members, as ``vbucket layout``'s flags); a name left out keeps the
#: library's default.
LAYOUT_OPTIONS = tuple(name for name, _, _ in _vbucket.LAYOUT_FIELDS)


def _option_text(value) -> str:
    """A layout option's value as the text vbucket::set_layout_option reads."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return ",".join(_option_text(v) for v in value)
    if isinstance(value, bool):
        raise ValueError(f"layout option value {value!r} is not a number")
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


class GroupSchedule:
    """A GroupPlan dealt to a world size from a state: every step's groups."""

    def __init__(self, core: "_vbucket.GroupSchedule"):
        self._core = core

    @property
    def steps(self) -> int:
        """Steps every rank runs."""
        return self._core.steps

    @property
    def world(self) -> int:
        return self._core.world

    @property
    def repeat_groups(self) -> int:
        """Groups that repeat a batch to fill the last steps (their samples are pads)."""
        return self._core.repeat_groups

    def work(self, step: int, rank: int) -> dict:
        """What ``rank`` does at ``step``: ``first_rank`` and ``sp`` (its group is ranks
        first_rank .. first_rank + sp - 1), ``sp_rank`` (its place in the group: its share of
        every sample's tokens), ``indices`` (the group's batch: sample indices), ``thw``,
        ``bucket``, ``tokens``, ``micro_steps`` (the indices of each micro-step), ``position``
        (in the epoch's global order) and ``repeat``."""
        return self._core.work(step, rank)

    def step_seconds(self, step: int) -> float:
        """The predicted time of ``step``: its slowest group's."""
        return self._core.step_seconds(step)

    def state_after(self, steps_done: int) -> str:
        """The resume state after ``steps_done`` steps: a string any world size resumes from."""
        return self._core.state_after(steps_done)

    def write_ledger(self, path: str | os.PathLike[str], step: int, rank: int,
                     run_step: int) -> bool:
        """Appends ``step``'s delivery of ``rank``'s group to PATH/rank-R.ledger when ``rank``
        is its group's first rank (the group's sp ranks deliver one batch together, so it is
        recorded once; ``run_step``: the trainer's global step). Whether it wrote."""
        return self._core.write_ledger(os.fspath(path), step, rank, run_step)


class GroupPlan:
    """An epoch of ``meta`` under ``config`` planned over groups of ranks, one sequence-parallel
    size per bucket. ``layouts``: by hand, ``{"RES:FRAMES": (sp, batch, micro_batch)}`` for every
    enabled pair (checked: sp allowed, sequence divisible by sp or padded, micro-batch within
    memory); without it the layouts are chosen from the memory and time models. The options
    (``LAYOUT_OPTIONS``; None keeps the library's default): ``memory`` and ``time`` as
    (fixed, linear, quadratic) coefficients of fit-bs's models, ``memory_limit``,
    ``config_fills_memory_at_sp`` (the config's batch sizes fill memory at this sp),
    ``comm_per_token``, ``comm_per_micro_step``, ``sp_sizes``, ``target_seconds``,
    ``max_accumulation``, ``remainder`` ("refuse" or "pad"). ``seed``, ``epoch``, ``rng``,
    ``rule``, ``fps_max`` and ``frame_interval`` assign the samples as ``vbucket.assign`` does.
    """

    def __init__(
        self,
        meta,
        config,
        *,
        layouts: Mapping[str, Sequence[int]] | None = None,
        memory: Sequence[float] | None = None,
        memory_limit: float | None = None,
        config_fills_memory_at_sp: int | None = None,
        time: Sequence[float] | None = None,
        comm_per_token: float | None = None,
        comm_per_micro_step: float | None = None,
        sp_sizes: Sequence[int] | None = None,
        target_seconds: float | None = None,
        max_accumulation: int | None = None,
        remainder: str | None = None,
        **spec,
    ):
        run = _spec(spec, "GroupPlan", ("rule", "fps_max", "frame_interval", "rng", "seed", "epoch"))
        cfg = _config(config, run.rule)
        ids = _vbucket.assign_epoch(_meta(meta), cfg, run)
        given = dict(memory=memory, memory_limit=memory_limit,
                     config_fills_memory_at_sp=config_fills_memory_at_sp, time=time,
                     comm_per_token=comm_per_token, comm_per_micro_step=comm_per_micro_step,
                     sp_sizes=sp_sizes, target_seconds=target_seconds,
                     max_accumulation=max_accumulation, remainder=remainder)
        options = {k: _option_text(v) for k, v in given.items() if v is not None}
        hand = {str(k): tuple(int(x) for x in v) for k, v in (layouts or {}).items()}
        values = run.values()
        self._core = _vbucket.GroupPlan(cfg, ids, str(values["seed"]), int(values["epoch"]),
                                        options, hand)

    @property
    def sp_sizes(self) -> list[int]:
        """The sequence-parallel sizes in use, largest first: make each one's groups once
        (ranks k·sp .. k·sp + sp - 1 for every k)."""
        return self._core.sp_sizes

    @property
    def num_batches(self) -> int:
        return self._core.num_batches

    @property
    def target_seconds(self) -> float:
        return self._core.target_seconds

    def layouts(self) -> list[dict]:
        """Every (resolution, frames) pair's layout: name, sp, batch_size, micro_batch,
        accumulation, tokens, seconds."""
        return self._core.layouts()

    def write_ledger_epoch(self, path: str | os.PathLike[str]) -> None:
        """Appends the epoch's declaration (what it draws, what it drops) to
        PATH/rank-00000.ledger: rank 0 calls it before its first step, and again on a resume."""
        self._core.write_ledger_epoch(os.fspath(path))

    def deal(self, world: int, state: str | None = None) -> GroupSchedule:
        """The epoch dealt to ``world`` ranks from ``state`` (a ``state_after`` string of any
        world size; None: the epoch's start)."""
        return GroupSchedule(self._core.deal(world, state or ""))
