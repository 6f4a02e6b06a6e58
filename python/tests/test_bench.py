"""`python -m vbucket.bench`: its numpy generator is bench/synthetic.hpp's, and it runs."""

from __future__ import annotations

import numpy as np

from vbucket import bench


def test_synthetic_equals_the_cpp_generator():
    # Rows 0, 1, 2, 1000 and 2998 printed by bench/synthetic.hpp's synthetic_sample (%.17g).
    expected = {0: (983, 1080, 1920, 29.969999999999999), 1: (304, 800, 1920, 25.0),
                2: (751, 240, 426, 60.0), 1000: (784, 1878, 2186, 24.0),
                2998: (84, 2160, 3840, 29.969999999999999)}
    s = bench.synthetic(3000)
    for i, (t, h, w, fps) in expected.items():
        assert (s["num_frames"][i], s["height"][i], s["width"][i]) == (t, h, w)
        assert s["fps"][i] == fps
    assert np.isnan(s["fps"][s["num_frames"] == 1]).all()
    share_images = float((s["num_frames"] == 1).mean())
    assert 0.10 < share_images < 0.20  # synthetic_image_permille = 150


def test_bench_runs_on_a_small_size():
    rows = bench.run([20_000], None, repetitions=1)
    assert rows[0]["samples"] == 20_000 and rows[0]["batches"] > 0
    assert rows[0]["cpp_s"] is None
