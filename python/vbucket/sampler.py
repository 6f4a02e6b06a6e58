"""`VariableVideoBatchSampler`: vbucket's batch sampler with Open-Sora's constructor shape.

A ``torch.utils.data.Sampler`` subclass when torch imports (a plain iterable otherwise). The
plan, the dealing to ranks, the resume state and the fingerprint are the C++ library's
``batch_sampler``; this class converts arguments and yields its batches.
"""

from __future__ import annotations

import os
from typing import Any, Iterator, List, Optional, Union

from . import _core, _vbucket

try:  # a Sampler subclass when torch is there, so DataLoader and type checks accept it
    if os.environ.get("VBUCKET_NO_TORCH"):
        raise ImportError
    from torch.utils.data import Sampler as _SamplerBase

    _HAVE_TORCH = True
except ImportError:  # pragma: no cover - exercised with VBUCKET_NO_TORCH=1
    _SamplerBase = object
    _HAVE_TORCH = False

STATE_FORMAT = "vbucket-sampler-1"


def _dist_world_rank(num_replicas, rank):
    if num_replicas is not None and rank is not None:
        return num_replicas, rank
    w, r = 1, 0
    if _HAVE_TORCH:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            w, r = dist.get_world_size(), dist.get_rank()
    return (w if num_replicas is None else num_replicas), (r if rank is None else rank)


def _check_int(name: str, value, low: int = 0) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    value = int(value)
    if value < low:
        raise ValueError(f"{name} must be at least {low}, got {value}")
    return value


class VariableVideoBatchSampler(_SamplerBase):
    """Open-Sora's ``VariableVideoBatchSampler``, planned by vbucket.

    ``dataset``: anything with a ``.data`` DataFrame (Open-Sora's datasets), or metadata
    (DataFrame, pyarrow Table, dict of arrays, .csv/.parquet path) with num_frames, height,
    width, fps, or ``vbucket.stream_csv(path)`` for a CSV too large to hold (read in chunks at
    each epoch's planning; the same batches). ``bucket_config``: Open-Sora's dict, a JSON path or a ``BucketConfig``.
    ``num_replicas``/``rank`` default to torch.distributed when initialised, else 1/0.
    ``output="opensora"`` yields lists of "index-T-H-W" strings (what Open-Sora's dataset
    ``__getitem__`` parses), ``output="indices"`` lists of ints.

    Every batch is full (a bucket's last batch is padded with its own samples under policy
    "pad"), every rank runs the same number of steps, and the state advances as batches are
    yielded: ``state_dict()`` taken after k batches resumes at batch k + 1, on any rank and
    under any world size.

    ``batching="packed", token_budget=B`` packs instead: every batch holds samples of any
    shapes whose latent tokens sum to at most B (the library's whole-epoch packed planner), so
    ``output="opensora"`` strings of one batch have mixed T-H-W; ``policy`` does not apply.
    A sample above B is an error unless ``drop_oversized=True`` (then it is counted in
    ``stats()``).
    """

    def __init__(
        self,
        dataset: Any,
        bucket_config: Any,
        num_replicas: Optional[int] = None,
        rank: Optional[int] = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        *,
        rule: str = "opensora-v2",
        rng: str = "numpy",
        fps_max: Optional[float] = None,
        frame_interval: Optional[int] = None,
        policy: str = "pad",
        balance: Union[bool, int] = False,
        output: str = "opensora",
        batching: str = "fixed",
        token_budget: Optional[float] = None,
        drop_oversized: bool = False,
        threads: int = 0,
        verbose: bool = False,
        num_bucket_build_workers: int = 1,
        num_groups: int = 1,
    ) -> None:
        # torch's Sampler.__init__ is not called: it does nothing, and no one call fits every
        # torch (1.x requires a `data_source` argument; 2.11 accepts none).
        if not shuffle:
            raise ValueError(
                "shuffle=False is not supported: vbucket's plan always shuffles within buckets "
                "and the batch order (reproducibly, from seed and epoch)"
            )
        if num_groups != 1:
            raise ValueError(f"num_groups={num_groups} is not supported (only 1)")
        if output not in ("opensora", "indices"):
            raise ValueError(f'output must be "opensora" or "indices", got {output!r}')
        world, r = _dist_world_rank(num_replicas, rank)
        world = _check_int("num_replicas", world, 1)
        r = _check_int("rank", r, 0)
        self.dataset = dataset
        self.num_replicas = world
        self.rank = r
        self.shuffle = True
        self.seed = int(_core._seed_text(seed))
        self.drop_last = bool(drop_last)
        self.rule = rule
        self.rng = rng
        self.policy = policy
        self.output = output
        self._strings = output == "opensora"
        self.verbose = bool(verbose)
        # Open-Sora's knobs for its own bucket building; vbucket's uses `threads` (0: all cores)
        self.num_bucket_build_workers = num_bucket_build_workers
        # As Open-Sora reads them: fps_max (2.0) and frame_interval (v1.2) from its dataset
        is_dataset = hasattr(dataset, "data") and not type(dataset).__module__.startswith(
            ("pandas", "pyarrow"))
        if fps_max is None:
            fps_max = getattr(dataset, "fps_max", 16) if is_dataset else 16
        if frame_interval is None:
            frame_interval = getattr(dataset, "frame_interval", 1) if is_dataset else 1
        self.fps_max = fps_max
        self.frame_interval = frame_interval
        self.bucket_config = (
            bucket_config
            if isinstance(bucket_config, _core.BucketConfig)
            else _core.BucketConfig(bucket_config, rule=rule)
        )
        args = _core._sampler_args(
            rule=rule, rng=rng, seed=self.seed, world=world, rank=r, policy=policy,
            drop_last=drop_last, balance=balance, fps_max=fps_max,
            frame_interval=frame_interval, threads=threads, batching=batching,
            token_budget=token_budget, drop_oversized=drop_oversized,
        )
        self.batching = batching
        self.token_budget = token_budget
        self._s = _vbucket.Sampler(_core._samples(dataset),
                                   _core._config(self.bucket_config, rule), args)

    # --- epochs ---------------------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch ``epoch`` from its beginning (its plan is made when first needed)."""
        self._s.set_epoch(_check_int("epoch", epoch))

    @property
    def epoch(self) -> int:
        return self._s.epoch

    def reset(self) -> None:
        """Open-Sora's reset(): back to the start of the current epoch."""
        self.set_epoch(self._s.epoch)

    def set_step(self, start_step: int) -> None:
        """Open-Sora's set_step(): the next iteration starts at this rank's step ``start_step``
        of the current epoch."""
        self._s.load_state(self._s.epoch_state(_check_int("start_step", start_step)), None)

    @property
    def last_micro_batch_access_index(self) -> int:
        """Open-Sora's name for the global batches of the epoch consumed so far."""
        return self._s.consumed()

    @last_micro_batch_access_index.setter
    def last_micro_batch_access_index(self, consumed: int) -> None:
        self._s.load_state_fields(_core._seed_text(self.seed), self.epoch,
                                  _check_int("last_micro_batch_access_index", consumed), None, None)

    # --- batches --------------------------------------------------------------------------

    def __iter__(self) -> Iterator[List[Union[str, int]]]:
        """This rank's batches from the current state. Each batch handed out advances the state
        by one step (a C++ iterator: no Python work per batch beyond building its list)."""
        if self.verbose and self.rank == 0 and _vbucket.HAS_FMT and self.batching == "fixed":
            print(self._s.stats_table(), end="", flush=True)
        return self._s.iterate(self._strings)

    def __len__(self) -> int:
        """This rank's steps from the current state (the whole epoch after ``set_epoch``)."""
        if self._s.finished:  # the next iteration replays the epoch
            return self._s.epoch_steps()
        return self._s.size()

    def get_num_batch(self) -> int:
        """Global batches of the whole epoch as dealt to this world (steps x world), so that
        Open-Sora's ``get_num_batch() // world_size`` is the steps per epoch."""
        return self._s.epoch_batches()

    def batches(self):
        """This rank's batches from the current state without advancing it: a sequence of
        (bucket id, T, H, W, indices as a numpy array, is_repeat); packed, bucket id, T, H and
        W are numpy arrays with one entry per index."""
        steps = self._s.steps()
        return [steps.at(i) for i in range(len(steps))]

    def stats(self) -> dict:
        """Statistics of the epoch as dealt from the current state (the library's): per bucket
        counts, alignment and step balance; packed, samples, drops, batch sizes, the fill
        ratio and the step balance."""
        return self._s.stats()

    # --- checkpoints ----------------------------------------------------------------------

    def fingerprint(self) -> str:
        """A 64-bit hash (hex) of the epoch's global batch sequence: the same on every rank and
        world size for the same samples, config, rule, rng, seed, epoch, policy and balance."""
        return self._s.fingerprint()

    def state_dict(self, num_steps: Optional[int] = None) -> dict:
        """A JSON-serialisable resume state (plain ints and strings). With ``num_steps`` (as
        Open-Sora's training script calls it), the state after that many steps of this world
        from the start of the epoch; otherwise the state now (advanced as batches were yielded).
        Any rank's state restores every rank, under any world size."""
        if num_steps is None:
            state = self._s.state()
        else:
            state = self._s.epoch_state(_check_int("num_steps", num_steps))
        return self._state_dict_of(state)

    def _state_dict_of(self, state: str) -> dict:
        """The state_dict() of a state string of this sampler's plan (also vbucket.Loader's)."""
        fields = _state_fields(state)
        return {
            "format": STATE_FORMAT,
            "state": state,
            "fingerprint": self._s.fingerprint(),
            "seed": self.seed,
            "epoch": fields["epoch"],
            "consumed_batches": fields["consumed"],
            "balance_group": fields["balance"],
            "world_size": self.num_replicas,
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Resumes from ``state_dict()`` of any rank and world size (moving to its epoch). A state
        of another plan (samples, config, rule, rng, seed, policy, balance) raises ValueError,
        and so does Open-Sora's own sampler state (a position in another batch order)."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"state_dict must be a dict, got {type(state_dict).__name__}")
        if "state" in state_dict:
            if state_dict.get("format", STATE_FORMAT) != STATE_FORMAT:
                raise ValueError(f"state_dict: unknown format {state_dict.get('format')!r}")
            if state_dict.get("seed", self.seed) != self.seed:
                raise ValueError(
                    f"cannot load state: it is of seed {state_dict['seed']}, this sampler's "
                    f"seed is {self.seed}"
                )
            self._s.load_state(str(state_dict["state"]), state_dict.get("fingerprint"))
        elif "last_micro_batch_access_index" in state_dict:
            # Open-Sora's sampler counts positions in its own batch order, not in this plan's:
            # resuming from it would replay and skip samples silently.
            raise ValueError(
                "state_dict: this is Open-Sora's sampler state (last_micro_batch_access_index), "
                "a position in another plan's batch order; vbucket resumes only from its own "
                "state_dict() (start this epoch afresh with set_epoch)"
            )
        else:
            raise ValueError(
                "state_dict: expected a vbucket state (with \"state\") or Open-Sora's (with "
                "\"last_micro_batch_access_index\")"
            )

    def verify_same_plan(self, group=None) -> str:
        """All-gathers the fingerprint over ``group`` (torch.distributed) and raises
        RuntimeError naming the ranks whose plan differs from rank 0's; returns the
        fingerprint. Without an initialised process group, just returns it."""
        mine = self.fingerprint()
        if not _HAVE_TORCH:
            return mine
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return mine
        world = dist.get_world_size(group)
        gathered: List[Any] = [None] * world
        dist.all_gather_object(gathered, (dist.get_rank(), mine), group=group)
        ref = gathered[0][1]
        bad = [(r, fp) for r, fp in gathered if fp != ref]
        if bad:
            raise RuntimeError(
                f"vbucket: ranks disagree on the plan of epoch {self.epoch}: rank "
                f"{gathered[0][0]} has {ref}, "
                + ", ".join(f"rank {r} has {fp}" for r, fp in bad)
                + " (the samples, config, rule, rng, seed, policy or balance differ)"
            )
        return mine

    def __repr__(self) -> str:
        return (
            f"VariableVideoBatchSampler(rank={self.rank}/{self.num_replicas}, epoch={self.epoch}, "
            f"rule={self.rule!r}, rng={self.rng!r}, seed={self.seed}, output={self.output!r})"
        )


def _state_fields(state: str) -> dict:
    """The fields of a state string, read by the library's parser."""
    seed, epoch, consumed, balance = _vbucket.parse_state(state)
    return {"seed": seed, "epoch": epoch, "consumed": consumed, "balance": balance}
