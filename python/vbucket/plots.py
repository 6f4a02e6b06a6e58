"""Pictures of the buckets: ``plot_stats`` (one image of a plan's statistics) and the HTML report
of ``python -m vbucket report`` (every picture embedded, one self-contained file).

The numbers are the library's (``vbucket.stats``, the sampler's batches); this module only
draws them, with matplotlib's Agg backend (no display needed).
"""

from __future__ import annotations

import base64
import html
import io
import os
from typing import Any, Dict, List, Optional, Tuple

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _frames_key(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("inf")


def _grid(stats, column: str) -> Tuple[List[str], List[str], np.ndarray]:
    """``column`` summed over ratios, as a resolution × frames grid (config order, frames
    ascending)."""
    res = list(dict.fromkeys(stats["resolution"].astype(str)))
    frames = sorted(dict.fromkeys(stats["frames"].astype(str)), key=_frames_key)
    grid = np.zeros((len(res), len(frames)))
    for (r, f), v in stats.groupby([stats["resolution"].astype(str),
                                    stats["frames"].astype(str)])[column].sum().items():
        grid[res.index(r), frames.index(f)] = v
    return res, frames, grid


def _heatmap(ax, stats, column: str, title: str) -> None:
    res, frames, grid = _grid(stats, column)
    im = ax.imshow(grid, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(frames)), frames, rotation=90 if len(frames) > 12 else 0)
    ax.set_yticks(range(len(res)), res)
    ax.set_xlabel("frames")
    ax.set_ylabel("resolution")
    ax.set_title(title)
    top = grid.max() if grid.size else 0
    if grid.size <= 200:
        for i in range(grid.shape[0]):
            for j in range(grid.shape[1]):
                if grid[i, j]:
                    ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=7,
                            color="white" if grid[i, j] < 0.6 * top else "black")
    ax.figure.colorbar(im, ax=ax)


def _ratio_bars(ax, stats) -> None:
    res = list(dict.fromkeys(stats["resolution"].astype(str)))
    by = stats.groupby([stats["resolution"].astype(str), stats["ratio"].astype(str)])[
        "samples"].sum()
    ratios = sorted({r for _, r in by.index}, key=_frames_key)
    width = 0.8 / max(1, len(res))
    x = np.arange(len(ratios))
    for k, r in enumerate(res):
        ax.bar(x + k * width, [by.get((r, q), 0) for q in ratios], width, label=r)
    ax.set_xticks(x + width * (len(res) - 1) / 2, ratios, rotation=90 if len(ratios) > 8 else 0)
    ax.set_xlabel("aspect ratio (H/W)")
    ax.set_ylabel("samples")
    ax.set_title("samples per aspect ratio, by resolution")
    ax.legend(fontsize=7)


def _label(stats, b) -> str:
    row = stats.loc[b]
    return f"{row['resolution']}/{row['frames']}/{row['ratio']}"


def _changes(ax, stats) -> None:
    cols = ["pads", "dropped", "moved_in", "moved_out"]
    used = stats[(stats[cols + ["samples"]].sum(axis=1) > 0)]
    x = np.arange(len(used))
    width = 0.2
    for k, c in enumerate(cols):
        ax.bar(x + k * width, used[c].to_numpy(), width, label=c.replace("_", " "))
    ax.set_xticks(x + 1.5 * width, [_label(stats, b) for b in used.index], rotation=90,
                  fontsize=6)
    ax.set_ylabel("samples")
    ax.set_title("pads, drops and moves per bucket")
    ax.legend(fontsize=7)


def plot_stats(stats, path, *, title: Optional[str] = None) -> str:
    """Draws a plan's statistics (``vbucket.stats(...)``'s DataFrame) into one image at
    ``path`` (PNG, SVG or PDF by its extension): resolution × frames heatmaps of samples and of
    batches, samples per aspect ratio by resolution, and pads/drops/moves per bucket.
    Returns the path."""
    _check_stats(stats)
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(14, 10))
    _heatmap(axes[0, 0], stats, "samples", "samples per (resolution, frames)")
    _heatmap(axes[0, 1], stats, "batches", "batches per (resolution, frames)")
    _ratio_bars(axes[1, 0], stats)
    _changes(axes[1, 1], stats)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = os.fspath(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _check_stats(stats) -> None:
    need = {"resolution", "frames", "ratio", "samples", "batches", "pads", "dropped", "moved_in",
            "moved_out"}
    missing = need - set(getattr(stats, "columns", ()))
    if missing:
        raise TypeError("plot_stats: expected vbucket.stats(...)'s DataFrame; missing columns "
                        + ", ".join(sorted(missing)))


# --- the report --------------------------------------------------------------------------------


def step_costs(meta, config, *, world: int, balance, **kw) -> Tuple[np.ndarray, dict]:
    """Steps × ranks: the cost (latent tokens × batch size) of each rank's batch at each step
    of the epoch, from the sampler's batches and the plan's per-bucket tokens; and the plan's
    own step-balance figures (``stats(...).attrs["step_balance"]``)."""
    from . import _core
    from .sampler import VariableVideoBatchSampler

    st = _core.stats(meta, config, world=world, balance=balance, **kw)
    per_batch = (st["tokens"] / st["batches"].where(st["batches"] > 0)).fillna(0).to_dict()
    cols = []
    for r in range(world):
        s = VariableVideoBatchSampler(meta, config, num_replicas=world, rank=r,
                                      seed=kw.get("seed", 0), rule=kw.get("rule", "opensora-v2"),
                                      rng=kw.get("rng", "fast"), policy=kw.get("policy", "pad"),
                                      drop_last=kw.get("drop_last", False), balance=balance,
                                      fps_max=kw.get("fps_max"),
                                      frame_interval=kw.get("frame_interval"))
        s.set_epoch(kw.get("epoch", 0))
        cols.append([per_batch[b[0]] for b in s.batches()])
    return np.array(cols, dtype=float).T, dict(st.attrs.get("step_balance", {}))


def _step_panel(ax, costs: np.ndarray, balance: dict, title: str) -> None:
    steps = np.arange(costs.shape[0])
    if costs.size:
        ax.fill_between(steps, costs.min(axis=1), costs.max(axis=1), alpha=0.3,
                        label="min..max over ranks")
        ax.plot(steps, costs.mean(axis=1), lw=1, label="mean over ranks")
    if "max_over_mean" in balance:
        title += (f"\nsum of step maxima / sum of step means: {balance['max_over_mean']:.3f}; "
                  f"worst step: {balance.get('worst_step_ratio', float('nan')):.3f}")
    ax.set_xlabel("step")
    ax.set_ylabel("tokens × batch size")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)


def memory_prediction(config, profile, memory_gib: float, *, margin: float = 0.05,
                      rule: str = "opensora-v2"):
    """Per (resolution, frames) bucket of ``config``: the per-rank peak memory that
    `vbucket fit-bs`'s model, fitted to ``profile`` (its PROFILE.csv), predicts at the config's
    batch size and at the batch size fit-bs would choose for ``memory_gib`` (``margin`` kept
    free). A DataFrame; ``df.attrs`` has memory_gib, limit_gib, r_squared, points."""
    import pandas as pd

    from . import _core, _vbucket

    if not getattr(_vbucket, "HAS_EIGEN", False):
        raise ImportError("the memory model needs vbucket built with the Eigen adapter "
                          "(Debian: libeigen3-dev)")
    cfg = _core.BucketConfig(config, rule=rule) if not isinstance(
        config, _core.BucketConfig) else config
    d = _vbucket.memory_prediction(cfg._core(rule), os.fspath(profile), float(memory_gib),
                                   float(margin))
    df = pd.DataFrame(d.pop("buckets"))
    df.attrs.update(d)
    return df


def _memory_panel(ax, mem) -> None:
    used = mem[mem["enabled"]]
    labels = [f"{r}:{f}" for r, f in zip(used["resolution"], used["frames"])]
    x = np.arange(len(used))
    limit = mem.attrs["limit_gib"]
    colors = ["tab:red" if v > limit else "tab:blue" for v in used["predicted_gib"]]
    ax.bar(x, used["predicted_gib"], 0.6, color=colors, label="at the config's batch size")
    ax.plot(x, used["new_predicted_gib"], "k_", markersize=18, mew=2,
            label="at fit-bs's batch size")
    for k, (bs, nb) in enumerate(zip(used["batch_size"], used["new_batch_size"])):
        ax.text(k, 0, f"bs {bs}→{nb}", ha="center", va="bottom", fontsize=7, rotation=90,
                color="white")
    ax.axhline(mem.attrs["memory_gib"], color="tab:red", lw=1, label="device memory")
    ax.axhline(limit, color="tab:orange", lw=1, ls="--", label="limit (margin kept free)")
    ax.set_xticks(x, labels, rotation=90 if len(labels) > 10 else 0, fontsize=7)
    ax.set_ylabel("predicted peak memory per rank (GiB)")
    ax.set_title(f"predicted peak memory per bucket (fitted model, R² "
                 f"{mem.attrs['r_squared']:.4f} over {mem.attrs['points']} steps)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    _pyplot().close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def render_report(meta, config, out, *, world: int = 1, profile=None,
                  memory_gib: Optional[float] = None, margin: float = 0.05,
                  **kw) -> Dict[str, Any]:
    """Writes the HTML report to ``out``; returns {"images": n, "path": out}."""
    from . import _core

    if (profile is None) != (memory_gib is None):
        raise ValueError("report: --profile and --memory-gib go together")
    plt = _pyplot()
    cfg = _core.BucketConfig(config, rule=kw.get("rule", "opensora-v2"))
    st = _core.stats(meta, cfg, world=world, **kw)
    figures: List[Tuple[str, str]] = []

    fig, axes = plt.subplots(1, 2, figsize=(14, 5))
    _heatmap(axes[0], st, "samples", "samples per (resolution, frames)")
    _heatmap(axes[1], st, "batches", "batches per (resolution, frames)")
    fig.tight_layout()
    figures.append(("Samples and batches per resolution and frames", _png(fig)))

    fig, ax = plt.subplots(figsize=(14, 5))
    _ratio_bars(ax, st)
    fig.tight_layout()
    figures.append(("Aspect ratios per resolution", _png(fig)))

    fig, ax = plt.subplots(figsize=(14, 5))
    _changes(ax, st)
    fig.tight_layout()
    figures.append(("Pads, drops and moves per bucket", _png(fig)))

    plain = step_costs(meta, cfg, world=world, balance=False, **kw)
    balanced = step_costs(meta, cfg, world=world, balance=True, **kw)
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.5), sharey=True)
    _step_panel(axes[0], *plain, f"per-step cost over {world} ranks, without --balance")
    _step_panel(axes[1], *balanced, f"per-step cost over {world} ranks, with --balance")
    fig.tight_layout()
    figures.append(("Per-step cost across ranks", _png(fig)))

    if profile is not None:
        mem = memory_prediction(cfg, profile, memory_gib, margin=margin,
                                rule=kw.get("rule", "opensora-v2"))
        fig, ax = plt.subplots(figsize=(14, 5))
        _memory_panel(ax, mem)
        fig.tight_layout()
        figures.append((f"Predicted peak memory per bucket against {memory_gib:g} GiB",
                        _png(fig)))

    a = st.attrs
    totals = {k: a[k] for k in ("total", "images", "videos") if k in a}
    rows = "".join(
        f"<tr><th>{html.escape(k)}</th>" + "".join(
            f"<td>{html.escape(str(v))}</td>" for v in d.values()) + "</tr>"
        for k, d in totals.items())
    head = ("<tr><th></th>" + "".join(f"<th>{html.escape(c)}</th>"
                                      for c in next(iter(totals.values()), {}).keys()) + "</tr>")
    table_text = ""
    if getattr(_core._vbucket, "HAS_FMT", False):
        table_text = _core.stats_table(meta, cfg, world=world, **kw)
    body = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>vbucket report</title>",
        "<style>body{font-family:sans-serif;margin:2em}img{max-width:100%}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}</style>",
        "</head><body><h1>vbucket report</h1>",
        f"<p>metadata: {html.escape(str(meta))}; config: {html.escape(str(config))}; "
        f"world: {world}; unassigned: {a.get('unassigned')}, invalid: {a.get('invalid')}</p>",
        f"<table>{head}{rows}</table>",
    ]
    for title, data in figures:
        body.append(f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' "
                    f"src='data:image/png;base64,{data}'>")
    if table_text:
        body.append(f"<h2>Bucket table</h2><pre>{html.escape(table_text)}</pre>")
    body.append("</body></html>")
    out = os.fspath(out)
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(body))
    return {"images": len(figures), "path": out}
