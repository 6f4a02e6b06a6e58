"""vbucket from Python: bucket configs, metadata, assignment, statistics and a batch sampler
that drops into PyTorch and Open-Sora trainers (``VariableVideoBatchSampler``).

The planning is vbucket's C++ library (``vbucket._vbucket``); this package converts Python
values and calls it, so the Python results are the CLI's and the C++ API's, number for number.
"""

from . import _vbucket
from ._core import (
    DEFAULTS,
    FIELDS,
    BucketConfig,
    assign,
    explain,
    read_meta,
    stats,
    stats_table,
    stream_csv,
)
from ._vbucket import decode_opensora_index, encode_opensora_index
from .layout import GroupPlan, GroupSchedule
from .media import Batch, Loader, decode_clip, scan
from .plots import plot_stats
from .precompute import cache_plan, precompute
from .run import Run
from .run_loader import RunBatch, RunLoader

if getattr(_vbucket, "HAS_FFMPEG", False):
    from ._vbucket import DecodeError
else:  # pragma: no cover - a build without the FFmpeg adapter

    class DecodeError(ValueError):
        """A file that cannot be decoded (never raised by a build without FFmpeg)."""

__version__ = "0.1.0"

#: Whether this build has the CUDA adapter: Loader(pin_memory=True) then stages batches in
#: vbucket's pinned ring and copies them on its own stream (else through tensor.pin_memory()).
HAS_CUDA: bool = bool(getattr(_vbucket, "HAS_CUDA", False))

__all__ = [
    "HAS_CUDA",
    "Batch",
    "BucketConfig",
    "DEFAULTS",
    "FIELDS",
    "DecodeError",
    "GroupPlan",
    "GroupSchedule",
    "Loader",
    "Run",
    "RunBatch",
    "RunLoader",
    "VariableVideoBatchSampler",
    "assign",
    "cache_plan",
    "decode_clip",
    "decode_opensora_index",
    "encode_opensora_index",
    "explain",
    "plot_stats",
    "precompute",
    "read_meta",
    "scan",
    "stats",
    "stats_table",
    "stream_csv",
]


def __getattr__(name):
    # The sampler module imports torch (slow): only when the sampler is asked for.
    if name == "VariableVideoBatchSampler":
        from .sampler import VariableVideoBatchSampler

        return VariableVideoBatchSampler
    raise AttributeError(f"module 'vbucket' has no attribute {name!r}")
