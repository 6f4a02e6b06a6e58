"""The pictures: plot_stats and `python -m vbucket report`, rendered headless (Agg); every
image must decode and show something (not a blank canvas), every report figure is SVG with
its labels as text."""

from __future__ import annotations

import base64
import io
import os
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


def _headless_env():
    """No display, no backend chosen; where the package and its libraries were found kept (a
    package installed with --target, FFmpeg libraries from LD_LIBRARY_PATH)."""
    env = {"MPLBACKEND": "", "PATH": "/usr/bin"}
    for name in ("PYTHONPATH", "LD_LIBRARY_PATH"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


def test_report_renders_headless(tmp_path):
    out = tmp_path / "report.html"
    r = subprocess.run([sys.executable, "-m", "vbucket", "report", "--config", str(CONFIG_360P),
                        "--meta", str(SAMPLE_META), "--world", "4", "--out", str(out)],
                       capture_output=True, text=True, env=_headless_env())
    assert r.returncode == 0, r.stderr
    _check_figures(out.read_text(), 4)


def _check_figures(html: str, count: int) -> None:
    figures = re.findall(r"<figure>(.*?)</figure>", html, re.S)
    assert len(figures) == count
    # self-contained: nothing fetched (the SVG namespaces are names, not fetches)
    assert not re.search(r"(?:src|href)=['\"]?(?:https?:)?//", html)
    for svg in figures:
        # drawn content, its labels kept as text for the browser (test_report_browser.py
        # renders and measures them)
        assert svg.startswith("<svg") and svg.count("<path") + svg.count("<image") > 10
        assert len(re.findall(r"<text[^>]*>[^<]+</text>", svg)) > 5
    # the heatmaps' pixels: embedded PNGs, each of the grid's cells
    for data in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=\n]+)", html):
        img = mpimg.imread(io.BytesIO(base64.b64decode(data)), format="png")
        assert img.ndim == 3 and img.size > 0


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


# --- the memory picture (--profile): the fitted model of `vbucket fit-bs` ------------------------

# tests/cli/fit_bs.sh's profile: Open-Sora v1.2's 360p (largest entry 350×662: 905 latent
# pixels), memory = 3 + bs·(1e-4·t + 1e-10·t²) GiB; 360p:408 at bs 5 ran out of memory.
FRAMES_TOKENS = {1: 905, 51: 11765, 102: 23530, 204: 46155, 408: 92310}


def _memory(t, bs):
    return 3 + bs * (1e-4 * t + 1e-10 * t * t)


@pytest.fixture()
def profile(tmp_path):
    lines = ["frames,resolution,batch_size,step_seconds,peak_memory_gib"]
    for f, t in FRAMES_TOKENS.items():
        for b in (1, 2, 4):
            lines.append(f"{f},360p,{b},{0.3 + b * (4e-6 * t + 2e-11 * t * t):.9f},"
                         f"{_memory(t, b):.9f}")
    lines.append("408,360p,5,,OOM")
    path = tmp_path / "profile.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.skipif(not getattr(vbucket._vbucket, "HAS_EIGEN", False), reason="no Eigen adapter")
def test_memory_prediction_is_fit_bs(cli, profile, tmp_path):
    import json

    mem = plots.memory_prediction(CONFIG_360P, profile, 80, rule="opensora-v1.2")
    assert mem.attrs["limit_gib"] == pytest.approx(76)
    used = mem[mem["enabled"]]
    assert len(used) >= 3
    for _, row in used.iterrows():
        t = FRAMES_TOKENS[int(row["frames"])]
        assert row["tokens"] == t
        assert row["predicted_gib"] == pytest.approx(_memory(t, row["batch_size"]), rel=1e-6)
        expected = int((76 - 3) // (1e-4 * t + 1e-10 * t * t))
        largest_peak = max(_memory(u, 4) for u in FRAMES_TOKENS.values())
        if t == FRAMES_TOKENS[408] and 76 <= largest_peak:
            expected = min(expected, 4)  # an OOM caps only limits within the profiled peaks
        assert row["new_batch_size"] == expected
    # The same batch sizes as `vbucket fit-bs` writes.
    from conftest import run_cli

    run_cli(cli, "fit-bs", "--config", CONFIG_360P, "--profile", profile, "--memory-gib", 80,
            "--out", tmp_path / "new.json")
    new = json.loads((tmp_path / "new.json").read_text())
    for _, row in used.iterrows():
        assert new["360p"][str(row["frames"])][1] == row["new_batch_size"]


@pytest.mark.skipif(not getattr(vbucket._vbucket, "HAS_EIGEN", False), reason="no Eigen adapter")
def test_report_with_profile(profile, tmp_path):
    out = tmp_path / "report.html"
    r = subprocess.run([sys.executable, "-m", "vbucket", "report", "--config", str(CONFIG_360P),
                        "--meta", str(SAMPLE_META), "--rule", "opensora-v1.2", "--world", "2",
                        "--profile", str(profile), "--memory-gib", "24", "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    _check_figures(out.read_text(), 5)
    bad = tmp_path / "bad.csv"
    bad.write_text("resolution,frames,batch_size,peak_memory_gib,step_seconds\n360p,51,2,x,1\n")
    r = subprocess.run([sys.executable, "-m", "vbucket", "report", "--config", str(CONFIG_360P),
                        "--meta", str(SAMPLE_META), "--rule", "opensora-v1.2", "--profile",
                        str(bad), "--memory-gib", "24", "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "bad.csv" in r.stderr and "peak_memory_gib" in r.stderr


# --- issue 29 item 9: one plan per picture, readable labels, 0 samples, H/W order, integers ------


def test_step_costs_from_one_plan_equal_each_ranks_own_sampler():
    # The report deals one plan to every rank; each rank's own sampler must see the same costs.
    from vbucket.sampler import VariableVideoBatchSampler

    world = 3
    for balance in (False, True):
        costs, _ = plots.step_costs(SAMPLE_META, CONFIG_360P, world=world, balance=balance,
                                    seed=2)
        st = vbucket.stats(SAMPLE_META, CONFIG_360P, world=world, balance=balance, seed=2)
        per_batch = (st["tokens"] / st["batches"].where(st["batches"] > 0)).fillna(0)
        for r in range(world):
            s = VariableVideoBatchSampler(SAMPLE_META, CONFIG_360P, num_replicas=world, rank=r,
                                          seed=2, balance=balance)
            s.set_epoch(0)
            assert costs[:, r].tolist() == [per_batch[b[0]] for b in s.batches()]


def _many_bucket_stats(n=600):
    import pandas as pd

    rng = np.random.default_rng(0)
    h = rng.integers(100, 1000, n)
    w = rng.integers(100, 1000, n)
    return pd.DataFrame({
        "resolution": [f"r{k % 7}" for k in range(n)], "frames": [k % 50 for k in range(n)],
        "ratio": [f"{a}:{b}" for a, b in zip(w, h)], "T": 1, "H": h, "W": w,
        "samples": rng.integers(0, 9, n), "batches": rng.integers(0, 3, n),
        "pads": rng.integers(0, 5, n), "dropped": rng.integers(0, 2, n),
        "moved_in": 0, "moved_out": 0}).rename_axis("bucket")


def test_many_buckets_show_the_top_and_an_other_bar():
    plt = plots._pyplot()
    st = _many_bucket_stats()
    fig, ax = plt.subplots()
    plots._changes(ax, st)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert len(labels) == plots.TOP_N and labels[-1].startswith("other (")
    assert "summed as \"other\"" in ax.get_title()
    pads = sum(b.get_height() for b in ax.containers[0])
    assert pads == st["pads"].sum()  # nothing lost: the top plus "other" sum to the total
    fig2, ax2 = plt.subplots()
    plots._ratio_bars(ax2, st)
    assert len(ax2.get_xticklabels()) == plots.TOP_N
    assert sum(b.get_height() for c in ax2.containers for b in c) == st["samples"].sum()
    plt.close(fig)
    plt.close(fig2)


def test_ratio_bars_in_h_over_w_order_and_integer_axes():
    plt = plots._pyplot()
    st = vbucket.stats(SAMPLE_META, CONFIG_360P)
    # each ratio's H/W from the config's own bucket table, independently of the picture
    table = vbucket.BucketConfig(CONFIG_360P).buckets()
    hw = {r: h / w for r, h, w in zip(table["ratio"], table["H"], table["W"])}
    fig, ax = plt.subplots()
    plots._ratio_bars(ax, st)
    names = [t.get_text().split(" (")[0] for t in ax.get_xticklabels()]
    values = [hw[n] for n in names]
    assert values == sorted(values) and len(names) > 3
    assert all(float(v).is_integer() for v in ax.get_yticks())
    fig2, ax2 = plt.subplots()
    plots._changes(ax2, st)
    assert all(float(v).is_integer() for v in ax2.get_yticks())
    plt.close(fig)
    plt.close(fig2)


def test_report_with_no_sample_in_a_bucket_says_so_without_warnings(tmp_path):
    import warnings

    tiny = {"num_frames": np.array([1, 51]), "height": np.array([8, 8]),
            "width": np.array([8, 8]), "fps": np.array([np.nan, 24.0])}
    out = tmp_path / "empty.html"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = plots.render_report(tiny, CONFIG_360P, out)
    assert r["images"] == 0 and "No sample is in a bucket" in r["message"]
    assert "No sample is in a bucket" in out.read_text()
