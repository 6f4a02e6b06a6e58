"""Metadata rows whose samples are tensor files: the Loader tests that need no video decoding
(kills, restarts, held epochs) read these, so a delivered sample names its row exactly."""

from __future__ import annotations

import numpy as np


def tensor_meta(folder, n: int = 900, seed: int = 7):
    """``n`` rows of metadata whose sample i is a tensor file holding [i, i] (column
    ``tensor``), as a DataFrame; the files are written into ``folder``."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        p = folder / f"t{i}.npy"
        np.save(p, np.array([i, i], dtype=np.int32))
        paths.append(str(p))
    return pd.DataFrame({"num_frames": rng.integers(1, 30, n),
                         "height": rng.choice([256, 360, 480], n),
                         "width": rng.choice([256, 480, 640], n), "fps": 24.0, "tensor": paths})
