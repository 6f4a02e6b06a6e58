"""The pictures: plot_stats and `python -m vbucket report`, rendered headless (Agg); every
embedded image must decode and show something (not a blank canvas)."""

from __future__ import annotations

import base64
import io
import re
import subprocess
import sys

import numpy as np
import pytest

import vbucket
from vbucket import plots

from conftest import CONFIG_360P, SAMPLE_META

mpimg = pytest.importorskip("matplotlib.image", reason="matplotlib (python3-matplotlib) needed")


def _not_blank(png: bytes) -> None:
    img = mpimg.imread(io.BytesIO(png), format="png")
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    rgb = img[..., :3]
    background = np.median(rgb.reshape(-1, 3), axis=0)
    differs = np.abs(rgb - background).max(axis=2) > 0.1
    assert differs.mean() > 0.02  # drawn content, not an empty canvas
    assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 20  # colours: heatmaps, bars, lines


def test_plot_stats_png_and_svg(tmp_path):
    st = vbucket.stats(SAMPLE_META, CONFIG_360P, world=2)
    png = vbucket.plot_stats(st, tmp_path / "stats.png", title="sample")
    _not_blank(open(png, "rb").read())
    svg = vbucket.plot_stats(st, tmp_path / "stats.svg")
    text = open(svg).read()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and text.count("<path") > 50
    with pytest.raises(TypeError, match="missing columns"):
        vbucket.plot_stats(st.drop(columns="pads"), tmp_path / "x.png")


def test_report_renders_headless(tmp_path):
    out = tmp_path / "report.html"
    r = subprocess.run([sys.executable, "-m", "vbucket", "report", "--config", str(CONFIG_360P),
                        "--meta", str(SAMPLE_META), "--world", "4", "--out", str(out)],
                       capture_output=True, text=True, env={"MPLBACKEND": "", "PATH": "/usr/bin"})
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
    assert len(images) == 4
    assert "http" not in html.replace("http-equiv", "")  # self-contained: nothing fetched
    for data in images:
        _not_blank(base64.b64decode(data))


def test_report_usage_errors(tmp_path):
    r = subprocess.run([sys.executable, "-m", "vbucket", "report", "--config", str(CONFIG_360P),
                        "--meta", str(SAMPLE_META), "--profile", "p.csv", "--out",
                        str(tmp_path / "r.html")], capture_output=True, text=True)
    assert r.returncode == 1 and "--memory-gib" in r.stderr


def test_step_costs_agree_with_the_plans_balance():
    # Costs per rank and step from the sampler's batches, against the library's step balance.
    for balance in (False, True):
        costs, bal = plots.step_costs(SAMPLE_META, CONFIG_360P, world=4, balance=balance)
        assert costs.shape == (bal["steps"], 4)
        assert costs.max(axis=1).sum() / costs.mean(axis=1).sum() == pytest.approx(
            bal["max_over_mean"], rel=1e-9)
        assert (costs.max(axis=1) / costs.mean(axis=1)).max() == pytest.approx(
            bal["worst_step_ratio"], rel=1e-9)
