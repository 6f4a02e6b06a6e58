"""vbucket from Python: bucket configs, metadata, assignment, statistics and a batch sampler
that drops into PyTorch and Open-Sora trainers (``VariableVideoBatchSampler``).

The planning is vbucket's C++ library (``vbucket._vbucket``); this package converts Python
values and calls it, so the Python results are the CLI's and the C++ API's, number for number.
"""

from ._core import (
    BucketConfig,
    assign,
    read_meta,
    stats,
    stats_table,
)
from ._vbucket import decode_opensora_index, encode_opensora_index

__version__ = "0.1.0"

__all__ = [
    "BucketConfig",
    "VariableVideoBatchSampler",
    "assign",
    "decode_opensora_index",
    "encode_opensora_index",
    "read_meta",
    "stats",
    "stats_table",
]


def __getattr__(name):
    # The sampler module imports torch (slow): only when the sampler is asked for.
    if name == "VariableVideoBatchSampler":
        from .sampler import VariableVideoBatchSampler

        return VariableVideoBatchSampler
    raise AttributeError(f"module 'vbucket' has no attribute {name!r}")
