"""Type stubs of the public API (the sampler is imported lazily at run time)."""

import os
from collections.abc import Mapping
from typing import Any, Iterator, List, Literal, Optional, Sequence, Tuple, Union, overload

import numpy as np
import pandas as pd

__version__: str
HAS_CUDA: bool
#: the run's defaults, defined once in C++ (the member initialisers of vbucket::run_spec)
DEFAULTS: Mapping[str, Any]
#: the run spec's field table (vbucket::run_spec::fields()): name -> kind, choices, default, help
FIELDS: Mapping[str, Mapping[str, Any]]

PathLike = Union[str, os.PathLike[str]]
Rule = Literal["opensora-v2", "opensora-v1.2"]
Rng = Literal["fast", "numpy"]
Policy = Literal["pad", "drop", "downgrade"]
#: a DataFrame, a pyarrow Table, a dict of arrays, a .csv/.parquet path, or a dataset with .data
Metadata = Any
#: Open-Sora's dict ({"360p": {1: (0.5, 141)}}), a JSON path or a BucketConfig
ConfigLike = Union[Mapping[str, Mapping[Union[int, str], Any]], PathLike, "BucketConfig"]

class BucketConfig:
    rule: str
    def __init__(self, cfg: ConfigLike, *, rule: Rule = ...) -> None: ...
    @property
    def num_buckets(self) -> int: ...
    def buckets(self, rule: Optional[Rule] = ...) -> pd.DataFrame: ...

def read_meta(path: PathLike) -> pd.DataFrame: ...
def stream_csv(path: PathLike, chunk_rows: int = ...) -> Any: ...
def assign(
    meta: Metadata,
    config: ConfigLike,
    *,
    as_arrays: bool = ...,
    # BEGIN run fields: assign
    rule: Literal["opensora-v2", "opensora-v1.2"] = "opensora-v2",
    fps_max: float = 16.0,
    frame_interval: int = 1,
    rng: Literal["numpy", "fast"] = "numpy",
    seed: int = 0,
    epoch: int = 0,
    threads: int = 0,
    # END run fields
) -> Union[pd.DataFrame, np.ndarray]: ...
def stats(
    meta: Metadata,
    config: ConfigLike,
    *,
    # BEGIN run fields: stats
    cache: Optional[str] = None,
    chunk_rows: int = 1048576,
    rule: Literal["opensora-v2", "opensora-v1.2"] = "opensora-v2",
    fps_max: float = 16.0,
    frame_interval: int = 1,
    rng: Literal["numpy", "fast"] = "numpy",
    seed: int = 0,
    epoch: int = 0,
    world: int = 1,
    policy: Literal["pad", "drop", "downgrade"] = "pad",
    drop_last: bool = False,
    balance: Union[bool, int] = False,
    balance_group: int = 0,
    sample_costs: Optional[str] = None,
    threads: int = 0,
    batching: Literal["fixed", "packed"] = "fixed",
    token_budget: Optional[float] = None,
    drop_oversized: bool = False,
    compression: Tuple[int, int, int] = (4, 8, 8),
    patch: Tuple[int, int, int] = (1, 2, 2),
    # END run fields
) -> pd.DataFrame: ...
def stats_table(
    meta: Metadata,
    config: ConfigLike,
    *,
    # BEGIN run fields: stats_table
    cache: Optional[str] = None,
    chunk_rows: int = 1048576,
    rule: Literal["opensora-v2", "opensora-v1.2"] = "opensora-v2",
    fps_max: float = 16.0,
    frame_interval: int = 1,
    rng: Literal["numpy", "fast"] = "numpy",
    seed: int = 0,
    epoch: int = 0,
    world: int = 1,
    policy: Literal["pad", "drop", "downgrade"] = "pad",
    drop_last: bool = False,
    balance: Union[bool, int] = False,
    balance_group: int = 0,
    sample_costs: Optional[str] = None,
    threads: int = 0,
    batching: Literal["fixed", "packed"] = "fixed",
    token_budget: Optional[float] = None,
    drop_oversized: bool = False,
    compression: Tuple[int, int, int] = (4, 8, 8),
    patch: Tuple[int, int, int] = (1, 2, 2),
    # END run fields
) -> str: ...
def explain(
    meta: Metadata,
    config: ConfigLike,
    index: int,
    *,
    # BEGIN run fields: explain
    rule: Literal["opensora-v2", "opensora-v1.2"] = "opensora-v2",
    fps_max: float = 16.0,
    frame_interval: int = 1,
    rng: Literal["numpy", "fast"] = "numpy",
    seed: int = 0,
    epoch: int = 0,
    # END run fields
) -> dict: ...
def encode_opensora_index(index: int, frames: int, height: int, width: int) -> str: ...
def decode_opensora_index(s: str) -> Tuple[int, int, int, int]: ...

class VariableVideoBatchSampler:
    dataset: Any
    bucket_config: BucketConfig
    num_replicas: int
    rank: int
    seed: int
    drop_last: bool
    rule: str
    rng: str
    policy: str
    output: str
    batching: str
    token_budget: Optional[float]
    def __init__(
        self,
        dataset: Metadata,
        bucket_config: ConfigLike,
        num_replicas: Optional[int] = ...,
        rank: Optional[int] = ...,
        shuffle: bool = ...,
        seed: int = 0,
        drop_last: bool = False,
        *,
        output: Literal["opensora", "indices"] = ...,
        verbose: bool = ...,
        num_bucket_build_workers: int = ...,
        num_groups: int = ...,
        hold_epochs: bool = ...,
        # BEGIN run fields: VariableVideoBatchSampler.__init__
        cache: Optional[str] = None,
        chunk_rows: int = 1048576,
        rule: Literal["opensora-v2", "opensora-v1.2"] = "opensora-v2",
        fps_max: float = 16.0,
        frame_interval: int = 1,
        rng: Literal["numpy", "fast"] = "numpy",
        epoch: int = 0,
        policy: Literal["pad", "drop", "downgrade"] = "pad",
        balance: Union[bool, int] = False,
        balance_group: int = 0,
        sample_costs: Optional[str] = None,
        threads: int = 0,
        batching: Literal["fixed", "packed"] = "fixed",
        token_budget: Optional[float] = None,
        drop_oversized: bool = False,
        compression: Tuple[int, int, int] = (4, 8, 8),
        patch: Tuple[int, int, int] = (1, 2, 2),
        timeout: float = 120.0,
        io_timeout: float = 10.0,
        retries: int = 2,
        outage_deadline: float = 600.0,
        # END run fields
    ) -> None: ...
    @classmethod
    def from_run(cls, path: PathLike, **overrides: Any) -> VariableVideoBatchSampler: ...
    def set_epoch(self, epoch: int) -> None: ...
    @property
    def epoch(self) -> int: ...
    def __iter__(self) -> Iterator[List[Union[str, int]]]: ...
    def __len__(self) -> int: ...
    def get_num_batch(self) -> int: ...
    def steps_left(self) -> int: ...
    def held_epoch(self, epoch: int) -> dict: ...
    def batches(self) -> List[Tuple[Any, Any, Any, Any, np.ndarray, bool]]: ...
    def stats(self) -> dict: ...
    def fingerprint(self) -> str: ...
    def state_dict(self, num_steps: Optional[int] = ...) -> dict: ...
    def load_state_dict(self, state_dict: dict) -> None: ...
    def verify_same_plan(self, group: Any = ...) -> str: ...

# --- media (the FFmpeg adapter) ---------------------------------------------------------------

class DecodeError(ValueError): ...

def scan(
    dir_or_list: Union[PathLike, Sequence[PathLike]],
    threads: Optional[int] = ...,
    progress: bool = ...,
    *,
    timeout: float = 120.0,
    io_timeout: float = 10.0,
    retries: int = 2,
) -> pd.DataFrame: ...
def decode_clip(
    path: PathLike,
    start: int,
    frames: int,
    interval: int = ...,
    size: Tuple[int, int] = ...,
    layout: Literal["thwc", "cthw"] = ...,
    pad: bool = ...,
    *,
    filter: Literal["bilinear", "bicubic", "area", "nearest"] = ...,
    threads: int = ...,
    timeout: float = 120.0,
    io_timeout: float = 10.0,
    retries: int = 2,
    frame_choice: Literal["stride", "opensora"] = ...,
) -> np.ndarray: ...

class Batch:
    tensor: Any  # torch.Tensor
    indices: np.ndarray
    planned: np.ndarray
    bucket: int
    thw: Tuple[int, int, int]
    step: int
    position: int
    repeat: bool
    substitutions: List[dict]

class Loader:
    @overload
    def __new__(cls, sampler: Run, paths: Any, **kwargs: Any) -> RunLoader: ...  # type: ignore[misc]
    @overload
    def __new__(cls, sampler: VariableVideoBatchSampler, paths: Any, **kwargs: Any) -> Loader: ...
    def __init__(
        self,
        sampler: VariableVideoBatchSampler,
        paths: Union[PathLike, Sequence[PathLike], None],
        *,
        workers: int = ...,
        prefetch: int = ...,
        dtype: Literal["uint8", "float32", "bfloat16"] = ...,
        layout: Literal["thwc", "cthw"] = ...,
        mean: Union[float, Sequence[float]] = ...,
        std: Union[float, Sequence[float]] = ...,
        pin_memory: bool = ...,
        slots: Optional[int] = ...,
        fields: Any = ...,
        tensors: Any = ...,
        filter: Literal["opensora", "bilinear", "bicubic", "area", "nearest"] = ...,
        timeout: Optional[float] = ...,
        io_timeout: Optional[float] = ...,
        retries: Optional[int] = ...,
        outage_deadline: Optional[float] = ...,
        frame_choice: Literal["opensora", "stride"] = ...,
    ) -> None: ...
    def __iter__(self) -> Iterator[Batch]: ...
    def __next__(self) -> Batch: ...
    def next(self) -> Batch: ...
    def __len__(self) -> int: ...
    def state_dict(self) -> dict: ...
    def stats(self) -> dict: ...
    def stats_table(self) -> str: ...
    def close(self) -> None: ...
    def __enter__(self) -> Loader: ...
    def __exit__(self, *exc: Any) -> None: ...

def plot_stats(stats: pd.DataFrame, path: PathLike, *, title: Optional[str] = ...) -> str: ...

class Run:
    def __init__(self, plan: Any, rank: int = ..., ledger: Optional[PathLike] = ...,
                 world: Optional[int] = ...) -> None: ...
    @classmethod
    def from_file(cls, path: PathLike, rank: int = ..., ledger: Optional[PathLike] = ...,
                  world: Optional[int] = ...) -> Run: ...
    @property
    def rank(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def step(self) -> int: ...
    @property
    def stage(self) -> int: ...
    @property
    def world(self) -> int: ...
    def batch(self, rank: Optional[int] = ...) -> dict[str, Any]: ...
    def advance(self) -> None: ...
    def __iter__(self) -> Iterator[dict[str, Any]]: ...
    def __len__(self) -> int: ...
    def set_world(self, world: int, rank: Optional[int] = ...) -> None: ...
    def out_of_memory(self, ranks: Sequence[int] = ..., factor: float = ...) -> None: ...
    def write_ledger(self, path: PathLike, ranks: Optional[Sequence[int]] = ...) -> None: ...
    def state(self) -> str: ...
    def state_dict(self) -> dict[str, str]: ...
    def load_state_dict(self, d: Mapping[str, str], world: Optional[int] = ...) -> None: ...
    @property
    def source_names(self) -> list[str]: ...

class RunBatch:
    fields: dict[str, Any]
    tensor: Any
    source: np.ndarray
    row: np.ndarray
    planned_source: np.ndarray
    planned_row: np.ndarray
    step: int
    epoch: int
    stage: int
    rank: int
    world: int
    bucket: Any
    thw: Any
    pads: int
    repeat: bool
    position: int
    substitutions: list[dict]
    packed: bool
    tensors: Optional[list[Any]]
    cu_seqlens: Any
    max_seqlen: Optional[int]
    offsets: Optional[list[int]]
    def __len__(self) -> int: ...

class RunLoader:
    def __init__(
        self,
        run: Run,
        paths: Union[Sequence[Any], Mapping[str, Any]],
        *,
        workers: int = ...,
        prefetch: int = ...,
        dtype: Literal["uint8", "float32", "bfloat16"] = ...,
        layout: Literal["thwc", "cthw"] = ...,
        mean: Union[float, Sequence[float]] = ...,
        std: Union[float, Sequence[float]] = ...,
        pin_memory: bool = ...,
        slots: Optional[int] = ...,
        filter: Literal["opensora", "bilinear", "bicubic", "area", "nearest"] = ...,
        timeout: Optional[float] = ...,
        io_timeout: Optional[float] = ...,
        retries: Optional[int] = ...,
        outage_deadline: Optional[float] = ...,
        frame_choice: Literal["opensora", "stride"] = ...,
        fields: Any = ...,
        tensors: Any = ...,
    ) -> None: ...
    @property
    def run(self) -> Run: ...
    def __iter__(self) -> Iterator[RunBatch]: ...
    def next(self) -> Optional[RunBatch]: ...
    def __len__(self) -> int: ...
    def state_dict(self) -> dict: ...
    def load_state_dict(self, d: dict, world: Optional[int] = ...) -> None: ...
    def out_of_memory(self, ranks: Sequence[int] = ..., factor: float = ...) -> None: ...
    def set_world(self, world: int, rank: Optional[int] = ...) -> None: ...
    def substitutions_by_source(self) -> dict[str, int]: ...
    def stats(self) -> dict: ...
    def stats_table(self) -> str: ...
    def close(self) -> None: ...
    def __enter__(self) -> RunLoader: ...
    def __exit__(self, *exc: Any) -> None: ...

class GroupSchedule:
    @property
    def steps(self) -> int: ...
    @property
    def world(self) -> int: ...
    @property
    def repeat_groups(self) -> int: ...
    def work(self, step: int, rank: int) -> dict: ...
    def step_seconds(self, step: int) -> float: ...
    def state_after(self, steps_done: int) -> str: ...

class GroupPlan:
    def __init__(
        self,
        meta: Any,
        config: Any,
        *,
        layouts: Optional[Mapping[str, Sequence[int]]] = ...,
        memory: Optional[Sequence[float]] = ...,
        memory_limit: Optional[float] = ...,
        config_fills_memory_at_sp: Optional[int] = ...,
        time: Optional[Sequence[float]] = ...,
        comm_per_token: Optional[float] = ...,
        comm_per_micro_step: Optional[float] = ...,
        sp_sizes: Optional[Sequence[int]] = ...,
        target_seconds: Optional[float] = ...,
        max_accumulation: Optional[int] = ...,
        remainder: Optional[Literal["refuse", "pad"]] = ...,
        **spec: Any,
    ) -> None: ...
    @property
    def sp_sizes(self) -> list[int]: ...
    @property
    def num_batches(self) -> int: ...
    @property
    def target_seconds(self) -> float: ...
    def layouts(self) -> list[dict]: ...
    def deal(self, world: int, state: Optional[str] = ...) -> GroupSchedule: ...

__all__: Sequence[str]
