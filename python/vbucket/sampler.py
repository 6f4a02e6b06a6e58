"""`VariableVideoBatchSampler`: vbucket's batch sampler with Open-Sora's constructor shape.

A ``torch.utils.data.Sampler`` subclass when torch imports (a plain iterable otherwise). The
plan, the dealing to ranks, the resume state and the fingerprint are the C++ library's
``batch_sampler``; this class converts arguments and yields its batches.
"""

from __future__ import annotations

import os
import weakref
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


_U64_MAX = (1 << 64) - 1
_U32_MAX = (1 << 32) - 1


#: The run fields the sampler takes as keyword arguments (world and rank are ``num_replicas`` and
#: ``rank``; the metadata and the config are ``dataset`` and ``bucket_config``).
_SAMPLER_FIELDS = tuple(n for n in _core.FIELDS if n not in ("meta", "config", "world", "rank"))


def _write_cache_manifest(cache) -> str:
    """A temporary manifest CSV (sample, T, H, W, bucket) of ``cache``: ``vbucket.cache_plan``'s
    result (its ``entries``), a list of manifest rows, or a DataFrame of them."""
    import tempfile
    if isinstance(cache, dict) and "entries" in cache:
        rows = cache["entries"]
    elif hasattr(cache, "to_dict") and hasattr(cache, "columns"):
        rows = cache.to_dict("records")
    else:
        rows = list(cache)
    fd, path = tempfile.mkstemp(prefix="vbucket-cache-", suffix=".csv")
    with os.fdopen(fd, "w") as f:
        f.write("sample,T,H,W,bucket\n")
        for k, row in enumerate(rows):
            try:
                f.write(",".join(str(int(row[c])) for c in ("sample", "T", "H", "W", "bucket")))
            except (KeyError, TypeError, ValueError) as e:
                os.unlink(path)
                raise ValueError(f"cache: entry {k} is not a manifest row (sample, T, H, W, "
                                 f"bucket): {row!r}") from e
            f.write("\n")
    return path


def _check_int(name: str, value, low: int = 0, high: int = _U64_MAX) -> int:
    """An int parameter in [low, high], or TypeError/ValueError naming it, its value and the
    range (before it reaches the binding, whose own errors name no parameter)."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if value < low or value > high:
        raise ValueError(f"{name} must be an integer from {low} to {high}, got {value}")
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

    Open-Sora's lifecycle (`vbucket::opensora_lifecycle`): ``set_epoch(e)`` sets the epoch
    only; the position moves through iteration, ``set_step``, ``reset`` and
    ``load_state_dict``, and returns to 0 when an iteration ends. ``len()`` is the epoch's
    global micro-batch count // ``num_groups`` (``train.py`` passes the data-parallel size, so
    it is the steps per epoch).

    ``hold_epochs=True`` (the default; fixed batching): every epoch is held to the length
    ``len()`` reported first — epoch 0's global batch count, whatever the world size — as
    ``train.py``, which takes ``len(dataloader)`` once, expects (`vbucket::opensora_held`). The
    epochs' batches are one stream taken in order: a longer epoch's untrained tail opens the
    next epoch, a shorter one is filled with counted repeats of its own batches; every drawn
    batch is trained once. ``held_epoch(e)`` tells what epoch e is made of. ``False``: each
    epoch's real length (``vbucket plan``'s batches). ``drop_last=True`` drops each bucket's remainder (policy
    "drop", counted in ``stats()``) and the incomplete last step, as Open-Sora; ``False`` pads.

    Every batch is full (a bucket's last batch is padded with its own samples under policy
    "pad"), every rank runs the same number of steps, and the state advances as batches are
    yielded: ``state_dict()`` taken after k batches resumes at batch k + 1, on any rank and
    under any world size. ``load_state_dict(saved)`` then ``set_step(k)`` with the k the state
    was saved after (``train.py``'s resume) continues at the exact global batch, also under
    another world size; the state records the world it was saved under and the plan's
    fingerprint.

    ``batching="packed", token_budget=B`` packs instead: every batch holds samples of any
    shapes whose latent tokens sum to at most B (the library's whole-epoch packed planner), so
    ``output="opensora"`` strings of one batch have mixed T-H-W; ``policy`` does not apply.
    A sample above B is an error unless ``drop_oversized=True`` (then it is counted in
    ``stats()``). A sample's tokens: ``compression=(ct, ch, cw)`` (the VAE's factors) and
    ``patch=(pt, ph, pw)`` (the model's patch) give ceil((1 + (T - 1) // ct) / pt) * (H / (ch *
    ph)) * (W / (cw * pw)); the defaults (4, 8, 8) and (1, 2, 2) are Open-Sora 2.0's.
    """

    @_core.takes_run_fields(*_SAMPLER_FIELDS)
    def __init__(
        self,
        dataset: Any,
        bucket_config: Any,
        num_replicas: Optional[int] = None,
        rank: Optional[int] = None,
        shuffle: bool = True,
        seed: int = _core.DEFAULTS["seed"],
        drop_last: bool = _core.DEFAULTS["drop_last"],
        *,
        output: str = "opensora",
        verbose: bool = False,
        num_bucket_build_workers: int = 1,
        num_groups: int = 1,
        hold_epochs: bool = True,
        **spec: Any,
    ) -> None:
        # torch's Sampler.__init__ is not called: it does nothing, and no one call fits every
        # torch (1.x requires a `data_source` argument; 2.11 accepts none).
        if not shuffle:
            raise ValueError(
                "shuffle=False is not supported: vbucket's plan always shuffles within buckets "
                "and the batch order (reproducibly, from seed and epoch)"
            )
        num_groups = _check_int("num_groups", num_groups, 1, _U32_MAX)
        if output not in ("opensora", "indices"):
            raise ValueError(f'output must be "opensora" or "indices", got {output!r}')
        world, r = _dist_world_rank(num_replicas, rank)
        # The range of the run spec's world (its field table: written once, in the library)
        world = _check_int("num_replicas", world, _core.FIELDS["world"]["min"],
                           _core.FIELDS["world"]["max"])
        r = _check_int("rank", r, 0, world - 1)
        rule = spec.get("rule") or _core.DEFAULTS["rule"]
        # As Open-Sora reads them: fps_max (2.0) and frame_interval (v1.2) from its dataset
        is_dataset = hasattr(dataset, "data") and not type(dataset).__module__.startswith(
            ("pandas", "pyarrow"))
        if is_dataset and rule == "opensora-v2" and spec.get("fps_max") is None:
            spec["fps_max"] = getattr(dataset, "fps_max", None)
        if is_dataset and rule == "opensora-v1.2" and spec.get("frame_interval") is None:
            spec["frame_interval"] = getattr(dataset, "frame_interval", None)
        # cache=: a manifest path, or cache_plan()'s result / its entries / a DataFrame of them
        # (written to a temporary manifest that the library reads once, here)
        manifest_tmp = None
        if spec.get("cache") is not None and not isinstance(spec["cache"], (str, os.PathLike)):
            manifest_tmp = _write_cache_manifest(spec["cache"])
            # removed with the sampler (stats() reads it again for the cache's distance)
            weakref.finalize(self, os.unlink, manifest_tmp)
        spec_now = dict(spec, seed=seed, drop_last=drop_last, world=world, rank=r)
        if manifest_tmp is not None:
            spec_now["cache"] = manifest_tmp
        # The one translation onto the library's run spec (it checks every value)
        run = _core._spec(spec_now, "VariableVideoBatchSampler",
                          _SAMPLER_FIELDS + ("world", "rank"))
        self._cache_manifest = spec_now.get("cache")
        if not isinstance(hold_epochs, bool):
            raise TypeError(f"hold_epochs must be True or False, got {hold_epochs!r}")
        self._construct(dataset, bucket_config, spec, run, world, r, seed, drop_last, output,
                        verbose, num_bucket_build_workers, num_groups, shuffle, hold_epochs)

    def _construct(self, dataset, bucket_config, spec, run, world, r, seed, drop_last, output,
                   verbose, num_bucket_build_workers, num_groups, shuffle,
                   hold_epochs) -> None:
        fields = run.to_dict()
        self.dataset = dataset
        self.num_replicas = world
        self.rank = r
        self.shuffle = True
        self.seed = int(seed)
        self.drop_last = bool(drop_last)
        self.rule = run.rule
        self.rng = fields["rng"]
        self.policy = run.policy
        self.batching = fields["batching"]
        self.token_budget = spec.get("token_budget")
        self.fps_max = spec.get("fps_max")
        self.frame_interval = spec.get("frame_interval")
        self.output = output
        self._strings = output == "opensora"
        self.verbose = bool(verbose)
        self.num_groups = num_groups
        # Open-Sora's knobs for its own bucket building; vbucket's uses `threads` (0: all cores)
        self.num_bucket_build_workers = num_bucket_build_workers
        # What rebuilds this sampler (pickle, copy.deepcopy: `__reduce__`); the samples come
        # from the sampler's own table, so the dataset is not held here
        self._init_kwargs = dict(
            spec, bucket_config=bucket_config, num_replicas=world, rank=r, shuffle=shuffle,
            seed=seed, drop_last=drop_last, output=output, verbose=verbose,
            num_bucket_build_workers=num_bucket_build_workers, num_groups=num_groups,
            hold_epochs=hold_epochs,
        )
        self.bucket_config = (
            bucket_config
            if isinstance(bucket_config, _core.BucketConfig)
            else _core.BucketConfig(bucket_config, rule=self.rule)
        )
        samples = _core._samples(dataset, spec.get("chunk_rows"))
        self._init_dataset_stream = samples if isinstance(samples, _vbucket.StreamedCsv) else None
        self._s = _vbucket.Sampler(samples, _core._config(self.bucket_config, self.rule), run)
        if run.epoch != 0:
            self._s.os_set_epoch(run.epoch)
        self.hold_epochs = hold_epochs and self.batching == "fixed"
        if self.hold_epochs:
            self._s.os_hold_epochs()
        self._run = run

    @classmethod
    def from_run(cls, path, **overrides: Any) -> "VariableVideoBatchSampler":
        """The sampler a run file describes (``vbucket plan --run RUN.json``'s JSON: its metadata,
        config and every run field, relative paths from its directory); keyword arguments
        override its fields, as flags do the CLI's. ``world``/``rank`` are
        ``num_replicas``/``rank`` here."""
        run = _vbucket.RunSpec.from_json(os.fspath(path))
        # the fields the file sets (the others keep the defaults, as the CLI's flags would)
        kwargs = {k: v for k, v in run.values().items()
                  if k not in ("meta", "config") and v != _core.DEFAULTS.get(k)}
        kwargs.setdefault("world", _core.DEFAULTS["world"])
        kwargs["num_replicas"] = kwargs.pop("world")
        kwargs.update(overrides)
        return cls(run.meta, run.config, **kwargs)

    # --- epochs (Open-Sora's lifecycle: vbucket::opensora_lifecycle) ----------------------

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch number only, as Open-Sora's: the position (from ``set_step``,
        ``load_state_dict`` or a partial iteration) carries over; a finished epoch starts the
        new one at its beginning. Use ``reset()`` to go back to the start of an epoch."""
        self._s.os_set_epoch(_check_int("epoch", epoch))

    @property
    def epoch(self) -> int:
        """The epoch the sampler plans (``set_epoch``'s, or a loaded state's)."""
        return self._s.epoch

    def reset(self) -> None:
        """Open-Sora's reset(): back to the start of the current epoch."""
        self._s.os_reset()

    def set_step(self, start_step: int) -> None:
        """Open-Sora's set_step(): the next iteration starts at step ``start_step`` of this
        world. Right after ``load_state_dict(saved)`` with the steps ``saved`` was taken after
        (what ``train.py`` passes), it keeps the loaded position exactly, also when ``saved``
        was taken under another world size. Past the end of the epoch raises ValueError."""
        self._s.os_set_step(_check_int("start_step", start_step))

    @property
    def last_micro_batch_access_index(self) -> int:
        """Open-Sora's name for the global batches of the epoch consumed so far."""
        return self._s.os_consumed()

    @last_micro_batch_access_index.setter
    def last_micro_batch_access_index(self, consumed: int) -> None:
        self._s.load_state_fields(_core._field_text("seed", self.seed), self.epoch,
                                  _check_int("last_micro_batch_access_index", consumed), None, None)

    # --- batches --------------------------------------------------------------------------

    def __iter__(self) -> Iterator[List[Union[str, int]]]:
        """This rank's batches from the current state. Each batch handed out advances the state
        by one step (a C++ iterator: no Python work per batch beyond building its list)."""
        if self.verbose and self.rank == 0 and _vbucket.HAS_FMT and self.batching == "fixed":
            print(self._s.stats_table(), end="", flush=True)
        self._s.os_started()
        return self._s.iterate(self._strings)

    def __len__(self) -> int:
        """Open-Sora's ``len()``: the epoch's global micro-batches as dealt to this world
        (steps x world, alignment repeats included; held epochs: epoch 0's at every epoch)
        // ``num_groups``. With ``num_groups`` =
        the data-parallel size (what ``train.py`` passes) it is the steps of the epoch, in its
        step numbering (after a resume under another world size: the resumed step + the steps
        left). Open-Sora counts only whole batches before padding (fewer with
        ``drop_last=False``); see the README's migration table."""
        return self.get_num_batch() // self.num_groups

    def get_num_batch(self) -> int:
        """Global micro-batches of the epoch as dealt to this world (steps x world)."""
        return self._s.os_epoch_steps() * self.num_replicas

    def steps_left(self) -> int:
        """This rank's steps from the current position (what the next iteration yields)."""
        return self._s.os_steps_left()

    def held_epoch(self, epoch: int) -> dict:
        """What epoch ``epoch`` of this sampler's iteration is made of (fixed batching: every
        epoch is held to the global batch count of epoch 0, ``quota``): ``start`` and ``end``,
        (data epoch, global position) where it starts and where the next one starts (a long
        epoch's untrained tail is carried: the next epoch starts inside it), and ``repeats``, the
        slots of the quota filled with counted repeats of the epoch's own batches (a short
        epoch). Alignment repeats of a world the quota does not divide come on top."""
        start, end, repeats = self._s.os_held_report(_check_int("epoch", epoch))
        return {"quota": self._s.os_quota(), "start": tuple(start), "end": tuple(end),
                "repeats": repeats}

    def batches(self):
        """This rank's batches from the current state without advancing it: a sequence of
        (bucket id, T, H, W, indices as a numpy array, is_repeat); packed, bucket id, T, H and
        W are numpy arrays with one entry per index."""
        steps = self._s.steps()
        return [steps.at(i) for i in range(len(steps))]

    def stats(self) -> dict:
        """Statistics of the epoch as dealt from the current state (the library's): per bucket
        counts, alignment and step balance; packed, samples, drops, batch sizes, the fill
        ratio and the step balance. With ``cache=``: ``cache``, the exact distance between the
        rule's and the delivered bucket distributions over the epoch's samples (from the
        probabilities, not sampled): ``tv_buckets`` (the bucket histogram's total variation per
        bucketable sample), ``tv_sample`` (mean per-sample total variation) and
        ``fallback_share`` (the share of the bucketed draws whose shape was not cached)."""
        out = self._s.stats()
        if self._cache_manifest is not None:
            out["cache"] = self.cache_delivery()
        return out

    def _config_text(self) -> str:
        c = self.bucket_config
        if c._path is not None:
            with open(c._path) as f:
                return f.read()
        return c._text

    def cache_delivery(self) -> dict:
        """With ``cache=``: the exact distance between the rule's and the delivered bucket
        distributions (see ``stats()``); None without a cache."""
        if self._cache_manifest is None:
            return None
        table = self._s.table()
        if table is None:
            table = _core._meta(self._init_dataset_stream.path)
        frames, height, width, fps = table.columns()
        fps_max = self.fps_max if self.fps_max is not None else _core.DEFAULTS["fps_max"]
        interval = (self.frame_interval if self.frame_interval is not None
                    else _core.DEFAULTS["frame_interval"])
        return dict(_vbucket.cache_delivery(
            frames.astype("int64"), height.astype("int64"), width.astype("int64"),
            fps.astype("float64"), self._config_text(), self.rule,
            float(fps_max), int(interval), os.fspath(self._cache_manifest)))

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
            state = self._s.os_state_now()
        else:
            state = self._s.os_state(_check_int("num_steps", num_steps))
        return self._state_dict_of(state)

    def _state_dict_of(self, state: str) -> dict:
        """The state_dict() of a state string of this sampler's plan (also vbucket.Loader's)."""
        fields = _state_fields(state)
        return {
            "format": STATE_FORMAT,
            "state": state,
            "fingerprint": fields["fingerprint"] or self._s.fingerprint(),
            "seed": self.seed,
            "epoch": fields["epoch"],
            "consumed_batches": fields["consumed"],
            "balance_group": fields["balance"],
            "world_size": fields["world"] or self.num_replicas,
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
            seed = state_dict.get("seed", self.seed)
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise TypeError(
                    f"state_dict['seed'] must be an int, got {type(seed).__name__} {seed!r}")
            if seed != self.seed:
                raise ValueError(
                    f"cannot load state: it is of seed {seed}, this sampler's seed is {self.seed}"
                )
            state = state_dict["state"]
            if not isinstance(state, str):
                raise TypeError(
                    f"state_dict['state'] must be a str, got {type(state).__name__} {state!r}")
            fingerprint = state_dict.get("fingerprint")
            if fingerprint is not None and not isinstance(fingerprint, str):
                raise TypeError(f"state_dict['fingerprint'] must be a str, got "
                                f"{type(fingerprint).__name__} {fingerprint!r}")
            self._s.os_load(state, fingerprint)
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
        dist.all_gather_object(gathered, (dist.get_rank(), mine, self._s.os_consumed()),
                               group=group)
        _check_same_plan(self.epoch, gathered)
        return mine

    # --- copies (pickle, copy.deepcopy: frameworks copy samplers) -------------------------

    def __reduce__(self):
        """Rebuilt from its arguments and its own table of samples (a streamed CSV by its path
        and chunk size), then moved to this one's epoch, position and step numbering: the copy
        yields the same batches. ``dataset`` is copied as the attribute it is (set it to None
        first if it cannot be pickled)."""
        kwargs = dict(self._init_kwargs, fps_max=self.fps_max,
                      frame_interval=self.frame_interval)
        table = self._s.table()
        if table is None:
            ds = self._init_dataset_stream
            samples = _StreamedCsvArgs(ds.path, ds.chunk_rows)
        else:
            samples = _TableArgs(table.columns())
        dataset = None if isinstance(self.dataset, _vbucket.StreamedCsv) else self.dataset
        return (_rebuild_sampler, (kwargs, samples, dataset, self._s.os_snapshot()))

    def __repr__(self) -> str:
        return (
            f"VariableVideoBatchSampler(rank={self.rank}/{self.num_replicas}, epoch={self.epoch}, "
            f"rule={self.rule!r}, rng={self.rng!r}, seed={self.seed}, output={self.output!r})"
        )


def _check_same_plan(epoch: int, gathered) -> None:
    """Raises RuntimeError naming the ranks whose (fingerprint, position) differ from the
    first rank's; ``gathered`` is a list of (rank, fingerprint, consumed global batches)."""
    r0, fp0, pos0 = gathered[0]
    bad = [(r, fp, pos) for r, fp, pos in gathered if fp != fp0]
    if bad:
        raise RuntimeError(
            f"vbucket: ranks disagree on the plan of epoch {epoch}: rank {r0} has {fp0}, "
            + ", ".join(f"rank {r} has {fp}" for r, fp, _ in bad)
            + " (the samples, config, rule, rng, seed, policy or balance differ)"
        )
    moved = [(r, pos) for r, _, pos in gathered if pos != pos0]
    if moved:
        raise RuntimeError(
            f"vbucket: ranks agree on the plan of epoch {epoch} but not on the position: rank "
            f"{r0} is at global batch {pos0}, "
            + ", ".join(f"rank {r} at {pos}" for r, pos in moved)
            + " (they resumed from different states or ran different numbers of steps)"
        )


def _state_fields(state: str) -> dict:
    """The fields of a state string, read by the library's parser."""
    seed, epoch, consumed, balance, world, fingerprint = _vbucket.parse_state(state)
    return {"seed": seed, "epoch": epoch, "consumed": consumed, "balance": balance,
            "world": world, "fingerprint": fingerprint}


class _StreamedCsvArgs:
    """A streamed CSV in a pickled sampler: opened again (and checked) when unpickled."""

    def __init__(self, path: str, chunk_rows: int) -> None:
        self.path, self.chunk_rows = path, chunk_rows


class _TableArgs:
    """A sampler's table in a pickled sampler: its four columns."""

    def __init__(self, columns) -> None:
        self.columns = tuple(columns)


def _rebuild_sampler(kwargs: dict, samples, dataset, snapshot) -> "VariableVideoBatchSampler":
    if isinstance(samples, _StreamedCsvArgs):
        source = _core.stream_csv(samples.path, samples.chunk_rows)
    else:
        source = _vbucket.Meta.from_arrays(*samples.columns, None, "a copied sampler's table")
    sampler = VariableVideoBatchSampler(source, **kwargs)
    sampler.dataset = source if dataset is None and isinstance(samples, _StreamedCsvArgs) else dataset
    sampler._s.os_restore(snapshot)
    return sampler
