"""The package's optional dependencies, imported when a function needs one: a missing one is an
ImportError that names the function, the package and how to install it (never a bare "No module
named ..." from deep inside). ``import vbucket``, the planning (sampler, stats, assign, explain,
run plans) and ``scan`` need numpy and pandas only; torch is for the Loader (and the sampler's
torch base class, optional), pyarrow for Parquet, matplotlib for the pictures."""

from __future__ import annotations

import importlib

_INSTALL = {
    "torch": "pip install torch (or the trainer's own PyTorch)",
    "pyarrow": "pip install pyarrow (or pip install 'vbucket[parquet]')",
    "matplotlib": "pip install matplotlib (Debian: python3-matplotlib)",
}


def need(module: str, what: str):
    """``module`` imported, or an ImportError saying that ``what`` needs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        top = module.split(".")[0]
        raise ImportError(f"{what} needs {top}, which is not installed here ({e}): "
                          f"{_INSTALL.get(top, 'pip install ' + top)}") from None
