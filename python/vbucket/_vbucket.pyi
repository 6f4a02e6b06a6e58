"""vbucket's C++ core (glue only; see the vbucket package)"""

from collections.abc import Mapping, Sequence
from typing import Annotated, overload

import numpy
from numpy.typing import NDArray


DEFAULT_BALANCE_GROUP: int = ...

RUN_FIELDS: list = ...

DEFAULTS: dict = ...

HAS_FMT: bool = ...

HAS_FFMPEG: bool = ...

HAS_CUDA: bool = ...

class DecodeError(ValueError):
    """
    A clip that cannot be decoded (a ValueError): the message names the file and what is wrong with it, in one line.
    """

def list_media(where: str) -> list[str]: ...

def list_sources(sources: Sequence[str], one: bool, threads: int, network: Mapping[str, str]) -> dict: ...

class Scan:
    def __init__(self, paths: Sequence[str], threads: int, network: Mapping[str, str]) -> None: ...

    def wait(self, seconds: float) -> bool: ...

    @property
    def done(self) -> int: ...

    @property
    def total(self) -> int: ...

    def stop(self) -> None: ...

    def columns(self) -> dict: ...

def decode_clip(path: str, start: int, frames: int, interval: int, height: int, width: int, layout: str, pad: bool, filter: str, threads: int, network: Mapping[str, str], frame_choice: str = ...) -> NDArray[numpy.uint8]: ...

def decode_clip_info(path: str, start: int, frames: int, interval: int, height: int, width: int, threads: int, skip_unwanted: bool) -> dict: ...

def sampler_rows(sampler: Sampler) -> int: ...

class StagedBatch:
    @property
    def shape(self) -> tuple: ...

    @property
    def dtype(self) -> str: ...

    @property
    def nbytes(self) -> int: ...

    def submit(self, dst: int, nbytes: int) -> None: ...

class RunLoader:
    def __init__(self, plan: RunPlan, loop: RunLoop, sources: Sequence[Sequence[str]], one: Sequence[bool], workers: int, prefetch: int, slots: int, dtype: str, layout: str, mean: Sequence[float], std: Sequence[float], filter: str, media: Mapping[str, str], frame_choice: str, fields: list) -> None: ...

    def next(self) -> object: ...

    def stats(self) -> dict: ...

    def stats_table(self) -> str: ...

    def substitutions_by_source(self) -> list[int]: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...

class Loader:
    def __init__(self, sampler: Sampler, sources: Sequence[str], one: bool, workers: int, prefetch: int, slots: int, dtype: str, layout: str, mean: Sequence[float], std: Sequence[float], pin_device: int, fields: list, pixels: bool, filter: str, network: Mapping[str, str], frame_choice: str = ...) -> None: ...

    def next(self) -> tuple: ...

    def state(self) -> str: ...

    def fingerprint(self) -> str: ...

    def steps(self) -> int: ...

    @property
    def held(self) -> int: ...

    @property
    def cuda_stream(self) -> int: ...

    def stats(self) -> dict: ...

    def stats_table(self) -> str: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...

HAS_EIGEN: bool = ...

def memory_prediction(config: Config, profile: str, memory_gib: float, margin: float) -> dict: ...

def cache_plan(num_frames: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], height: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], width: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], fps: Annotated[NDArray[numpy.float64], dict(shape=(None,), order='C', device='cpu', writable=False)], config_json: str, rule: str, fps_max: float, frame_interval: int, coverage: float, budget_bytes: int | None, epochs: int, seed: int, encoder: str, compression: tuple[int, int, int], channels: int, bytes_per_element: int, seconds_per_entry: float, seconds_per_token: float, fallback: str, selection: str) -> dict: ...

def cache_assign(num_frames: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], height: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], width: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], fps: Annotated[NDArray[numpy.float64], dict(shape=(None,), order='C', device='cpu', writable=False)], config_json: str, rule: str, fps_max: float, frame_interval: int, entry_sample: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], entry_bucket: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], seed: int, epoch: int, fallback: str) -> list: ...

def csv_text_column(path: str, name: str) -> list[str] | None: ...

def cache_delivery(num_frames: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], height: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], width: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], fps: Annotated[NDArray[numpy.float64], dict(shape=(None,), order='C', device='cpu', writable=False)], config_json: str, rule: str, fps_max: float, frame_interval: int, manifest: str) -> dict: ...

class RunPlan:
    """
    A training run of several sources and stages (vbucket::run_plan) read from a run file, as `vbucket plan --run RUN.json` reads it
    """

    @staticmethod
    def from_file(path: str) -> RunPlan:
        """
        Reads a run file ("sources" and "stages"); paths in it are relative to it.
        """

    def batch(self, rank: int) -> dict:
        """
        The current step's batch of `rank`: a dict with the fields of the CLI's JSON lines (step, epoch, stage, rank, bucket, thw, source, row, pads, repeat).
        """

    def advance(self) -> None:
        """
        The current step was trained on: move to the next (and the next epoch after the last).
        """

    def set_world(self, world: int) -> None:
        """
        From the current step on, `world` ranks (every rank calls it at the same step).
        """

    def start_epoch(self, epoch: int) -> None:
        """Begins epoch `epoch` at the current step."""

    def out_of_memory(self, ranks: Sequence[int] = ..., factor: float = ...) -> None:
        """
        The current step ran out of memory on `ranks` (empty: all): their batch sizes are multiplied by `factor` and the undelivered samples of the epoch planned again.
        """

    def state(self) -> str:
        """The run's state line ("vbucket-run v=1 ...")."""

    def load(self, line: str) -> None:
        """Resumes from a state line."""

    def write_ledger(self, dir: str, ranks: Sequence[int] = ...) -> None:
        """
        Appends the current step's batches of `ranks` (empty: all) to DIR/rank-R.ledger, as `vbucket plan --run --ledger DIR` does (`vbucket audit DIR` reads them).
        """

    @property
    def epoch(self) -> int:
        """The current epoch."""

    @property
    def step(self) -> int:
        """The run's current step."""

    @property
    def stage(self) -> int:
        """The current stage."""

    @property
    def world(self) -> int:
        """The number of ranks."""

    @property
    def source_names(self) -> list[str]:
        """The sources' names, in the run file's order."""

    @property
    def source_csvs(self) -> list[str]:
        """Each source's metadata CSV, as the run file names it (resolved)."""

    @property
    def source_rows(self) -> list[int]:
        """Each source's rows."""

    @property
    def steps_left(self) -> int:
        """Steps left in the current epoch."""

class RunLoop:
    """
    One rank's trainer loop over a RunPlan (vbucket::run_loop): a batch handed out counts as trained once the next is asked for or the state is taken; out_of_memory() replans the batch in hand; with a ledger directory it writes the rank's ledger itself
    """

    def __init__(self, plan: RunPlan, rank: int, ledger: str = ...) -> None: ...

    def next(self, plan: RunPlan) -> object:
        """
        The batch handed out before counts as trained; this rank's batch of the current step (written to the ledger first), or None once at the end of an epoch.
        """

    def state(self) -> str:
        """The run's state line after the batches handed out."""

    def out_of_memory(self, ranks: Sequence[int] = ..., factor: float = ...) -> None:
        """
        The batch in hand failed: the next batch handed out is its step planned again.
        """

    def set_world(self, world: int, rank: int | None = ...) -> None:
        """From the step after the batch in hand, `world` ranks."""

    def load(self, line: str, world: int | None = ...) -> None:
        """
        Resumes from a state line under its world (or `world`); cuts the ledger back to it.
        """

    @property
    def handed_out(self) -> bool:
        """Whether a batch is in hand (handed out, not yet counted as trained)."""

    @property
    def rank(self) -> int:
        """This loop's rank."""

LAYOUT_FIELDS: list = ...

class GroupPlan:
    def __init__(self, config: Config, ids: Annotated[NDArray[numpy.int32], dict(shape=(None,), order='C', device='cpu', writable=False)], seed: str, epoch: int, options: Mapping[str, str], layouts: Mapping[str, tuple[int, int, int]]) -> None:
        """
        An epoch over groups of ranks, one sequence-parallel size per bucket (vbucket::group_plan).
        """

    @property
    def sp_sizes(self) -> list[int]: ...

    @property
    def num_batches(self) -> int: ...

    @property
    def target_seconds(self) -> float: ...

    def layouts(self) -> list:
        """Every (resolution, frames) pair's layout, as dicts."""

    def deal(self, world: int, state: str) -> GroupSchedule:
        """The plan dealt to `world` ranks from `state` ("": the start)."""

    def write_ledger_epoch(self, dir: str) -> None:
        """
        Writes the epoch's declaration into dir/rank-00000.ledger (vbucket::epoch_block_of).
        """

class GroupSchedule:
    @property
    def steps(self) -> int: ...

    @property
    def world(self) -> int: ...

    @property
    def repeat_groups(self) -> int: ...

    def work(self, step: int, rank: int) -> dict:
        """What `rank` does at `step`, as a dict."""

    def step_seconds(self, step: int) -> float:
        """Step `step`'s predicted time (its slowest group's)."""

    def state_after(self, steps_done: int) -> str:
        """The resume state (text) after `steps_done` steps."""

    def write_ledger(self, dir: str, step: int, rank: int, run_step: int) -> bool:
        """
        Writes the group's batch into dir/rank-R.ledger when `rank` leads its group (vbucket::group_record); whether it wrote.
        """

class Config:
    @staticmethod
    def from_text(text: str, where: str, rule: str) -> Config: ...

    @staticmethod
    def from_path(path: str, rule: str) -> Config: ...

    @property
    def num_buckets(self) -> int: ...

    def buckets(self) -> list: ...

class Meta:
    @staticmethod
    def from_arrays(num_frames: Annotated[NDArray, dict(shape=(None,), device='cpu', writable=False)], height: Annotated[NDArray, dict(shape=(None,), device='cpu', writable=False)], width: Annotated[NDArray, dict(shape=(None,), device='cpu', writable=False)], fps: Annotated[NDArray, dict(shape=(None,), device='cpu', writable=False)], invalid: Annotated[NDArray, dict(shape=(None,), device='cpu', writable=False)] | None, where: str) -> Meta: ...

    @staticmethod
    def from_csv(path: str) -> Meta: ...

    def __len__(self) -> int: ...

    def columns(self) -> tuple: ...

class StreamedCsv:
    def __init__(self, path: str, chunk_rows: int = ...) -> None: ...

    @property
    def path(self) -> str: ...

    @property
    def chunk_rows(self) -> int: ...

    def __repr__(self) -> str: ...

class RunSpec:
    def __init__(self, fields: Mapping[str, str]) -> None: ...

    @staticmethod
    def from_json(path: str) -> RunSpec: ...

    def to_dict(self) -> dict[str, str]: ...

    def values(self) -> dict: ...

    @property
    def meta(self) -> str: ...

    @property
    def config(self) -> str: ...

    @property
    def rule(self) -> str: ...

    @property
    def policy(self) -> str: ...

    @property
    def epoch(self) -> int: ...

    def __repr__(self) -> str: ...

class Steps:
    def __len__(self) -> int: ...

    @property
    def position(self) -> int: ...

    def at(self, i: int) -> tuple: ...

class Batches:
    def __iter__(self) -> object: ...

    def __next__(self) -> object: ...

    def __length_hint__(self) -> int: ...

class Sampler:
    @overload
    def __init__(self, meta: Meta, config: Config, spec: RunSpec) -> None: ...

    @overload
    def __init__(self, meta: StreamedCsv, config: Config, spec: RunSpec) -> None: ...

    def set_epoch(self, epoch: int) -> None: ...

    @property
    def epoch(self) -> int: ...

    @property
    def world(self) -> int: ...

    @property
    def rank(self) -> int: ...

    def advance(self, steps: int = ...) -> None: ...

    def iterate(self, strings: bool) -> Batches: ...

    @property
    def finished(self) -> bool: ...

    def state(self) -> str: ...

    def consumed(self) -> int: ...

    def load_state(self, state: str, fingerprint: str | None) -> None: ...

    def steps(self) -> Steps: ...

    def size(self) -> int: ...

    def epoch_steps(self) -> int: ...

    def epoch_batches(self) -> int: ...

    def epoch_state(self, steps: int) -> str: ...

    def os_set_epoch(self, epoch: int) -> None: ...

    def os_set_step(self, step: int) -> None: ...

    def os_reset(self) -> None: ...

    def os_load(self, state: str, fingerprint: str | None) -> None: ...

    def os_state(self, num_steps: int) -> str: ...

    def os_epoch_steps(self) -> int: ...

    def os_state_now(self) -> str: ...

    def os_consumed(self) -> int: ...

    def os_steps_left(self) -> int: ...

    def os_hold_epochs(self) -> None: ...

    def os_quota(self) -> int: ...

    def os_held_report(self, epoch: int) -> tuple: ...

    def os_started(self) -> None: ...

    def table(self) -> Meta | None: ...

    def os_snapshot(self) -> tuple: ...

    def os_restore(self, snapshot: tuple) -> None: ...

    def load_state_fields(self, seed: str, epoch: int, consumed: int, balance_group: int | None, fingerprint: str | None) -> None: ...

    def fingerprint(self) -> str: ...

    def stats(self) -> dict: ...

    def stats_table(self) -> str: ...

def mix64(z: Annotated[NDArray[numpy.uint64], dict(shape=(None,), order='C', device='cpu', writable=False)]) -> Annotated[NDArray[numpy.uint64], dict(shape=(None,))]:
    """
    SplitMix64's finaliser (the library's vbucket::detail::mix64) of every element of a uint64 array.
    """

def parse_state(state: str) -> tuple: ...

def explain_sample(meta: Meta, config: Config, spec: RunSpec, index: int) -> tuple: ...

def step_costs(sampler: Sampler) -> Annotated[NDArray[numpy.float64], dict(shape=(None,))]: ...

def assign_epoch(meta: Meta, config: Config, spec: RunSpec) -> Annotated[NDArray[numpy.int32], dict(shape=(None,))]: ...

def encode_opensora_index(index: int, frames: int, height: int, width: int) -> str:
    """
    Open-Sora's batch item for a sample: the string "index-frames-height-width" its dataset's __getitem__ takes.
    """

def decode_opensora_index(s: str) -> tuple:
    """
    (index, frames, height, width) of an Open-Sora batch item "index-frames-height-width"; ValueError naming the string when it is not one.
    """
