"""Pictures of the buckets: ``plot_stats`` (one image of a plan's statistics) and the HTML report
of ``python -m vbucket report`` (every picture embedded, one self-contained file).

The numbers are the library's (``vbucket.stats``, the sampler's batches); this module only
draws them, with matplotlib (no display needed); the report's pictures are inline SVG whose
labels stay text.
"""

from __future__ import annotations

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


#: Bars drawn per chart at most: the rest are summed into one "other" bar (a config can have
#: thousands of buckets, whose labels would be unreadable).
TOP_N = 40


def _integer_axis(axis) -> None:
    """Sample counts are whole numbers: ticks only at integers."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _thin_ticks(labels: List[str], most: int = TOP_N) -> List[str]:
    """Every k-th label kept (the others blank) so that at most ``most`` are drawn."""
    step = max(1, -(-len(labels) // most))
    return [t if i % step == 0 else "" for i, t in enumerate(labels)]


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
    ax.set_xticks(range(len(frames)), _thin_ticks(frames),
                  rotation=90 if len(frames) > 12 else 0)
    ax.set_yticks(range(len(res)), _thin_ticks(res))
    ax.set_xlabel("frames")
    ax.set_ylabel("resolution")
    ax.set_title(title)
    if grid.size <= 200 and _cell_text_fits(ax, grid, fontsize=8):
        for i in range(grid.shape[0]):
            for j in range(grid.shape[1]):
                if grid[i, j]:
                    # viridis is dark below about 60 % of its range (the colorbar's, min..max)
                    ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=8,
                            color="white" if im.norm(grid[i, j]) < 0.6 else "black")
    ax.figure.colorbar(im, ax=ax)


def _cell_text_fits(ax, grid: np.ndarray, fontsize: float) -> bool:
    """Whether the widest cell value, at ``fontsize`` points, fits a heatmap cell with half an
    em to spare on the axes as drawn (the colorbar and the layout still take about a fifth of
    its width): otherwise neighbouring values run together ("119126") and the colorbar alone
    tells the values."""
    box = ax.get_position()
    fig_w, fig_h = ax.figure.get_size_inches()
    cell_w = 0.8 * box.width * fig_w * 72 / max(1, grid.shape[1])
    cell_h = 0.9 * box.height * fig_h * 72 / max(1, grid.shape[0])
    chars = max((len(f"{v:.0f}") for v in grid.ravel() if v), default=0)
    return chars * 0.64 * fontsize + 0.5 * fontsize <= cell_w and 1.3 * fontsize <= cell_h


def _ratio_order(stats) -> Dict[str, float]:
    """Each aspect ratio's numeric H/W (from its buckets' target H and W), to sort by: the
    ratio names ("16:9" W:H in 2.0 tables, "0.56" H/W in v1.2's) do not sort as numbers."""
    hw = (stats["H"].astype(float) / stats["W"].astype(float)).groupby(
        stats["ratio"].astype(str)).first()
    return hw.to_dict()


def _ratio_bars(ax, stats) -> None:
    res = list(dict.fromkeys(stats["resolution"].astype(str)))
    by = stats.groupby([stats["resolution"].astype(str), stats["ratio"].astype(str)])[
        "samples"].sum()
    order = _ratio_order(stats)
    totals = by.groupby(level=1).sum()
    ratios = list(totals.index)
    other: List[str] = []
    if len(ratios) > TOP_N:  # the ratios with most samples; the rest as one bar
        keep = set(totals.sort_values(ascending=False, kind="stable").index[:TOP_N - 1])
        other = [q for q in ratios if q not in keep]
        ratios = [q for q in ratios if q in keep]
    ratios.sort(key=lambda q: order.get(q, float("inf")))
    labels = [f"{q} ({order[q]:.2f})" if q in order else q for q in ratios]
    if other:
        labels.append(f"other ({len(other)})")
    width = 0.8 / max(1, len(res))
    x = np.arange(len(labels))
    for k, r in enumerate(res):
        values = [by.get((r, q), 0) for q in ratios]
        if other:
            values.append(sum(by.get((r, q), 0) for q in other))
        ax.bar(x + k * width, values, width, label=r)
    ax.set_xticks(x + width * (len(res) - 1) / 2, labels, rotation=90 if len(labels) > 8 else 0,
                  fontsize=7)
    ax.set_xlabel("aspect ratio, in order of H/W (its H/W)")
    _integer_axis(ax.yaxis)
    ax.set_ylabel("samples")
    title = "samples per aspect ratio, by resolution"
    if other:
        title += f" ({TOP_N - 1} ratios with most samples; {len(other)} more as \"other\")"
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)


def _label(stats, b) -> str:
    row = stats.loc[b]
    return f"{row['resolution']}/{row['frames']}/{row['ratio']}"


def _changes(ax, stats) -> None:
    cols = ["pads", "dropped", "moved_in", "moved_out"]
    used = stats[(stats[cols + ["samples"]].sum(axis=1) > 0)]
    changed = used[cols].sum(axis=1)
    n_used = len(used)
    rest = None
    if n_used > TOP_N:  # the buckets with most pads, drops and moves; the rest summed
        top = changed.sort_values(ascending=False, kind="stable").index[:TOP_N - 1]
        rest = used.drop(index=top)
        used = used.loc[[b for b in used.index if b in set(top)]]
    labels = [_label(stats, b) for b in used.index]
    if rest is not None:
        labels.append(f"other ({len(rest)} buckets)")
    x = np.arange(len(labels))
    width = 0.2
    for k, c in enumerate(cols):
        values = list(used[c].to_numpy())
        if rest is not None:
            values.append(rest[c].sum())
        ax.bar(x + k * width, values, width, label=c.replace("_", " "))
    ax.set_xticks(x + 1.5 * width, labels, rotation=90, fontsize=6)
    _integer_axis(ax.yaxis)
    ax.set_ylabel("samples")
    title = "pads, drops and moves per bucket"
    if rest is not None:
        title += (f" ({TOP_N - 1} of {n_used} buckets with the most; the other {len(rest)} "
                  "summed as \"other\")")
    ax.set_title(title, fontsize=9)
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
            "moved_out", "H", "W"}
    missing = need - set(getattr(stats, "columns", ()))
    if missing:
        raise TypeError("plot_stats: expected vbucket.stats(...)'s DataFrame; missing columns "
                        + ", ".join(sorted(missing)))


# --- the report --------------------------------------------------------------------------------


def step_costs(meta, config, *, world: int, balance, **kw) -> Tuple[np.ndarray, dict]:
    """Steps × ranks: the cost (latent tokens × batch size) of each rank's batch at each step
    of the epoch, from one plan dealt to ``world`` ranks (the library's schedule); and the
    plan's own step-balance figures (``stats(...).attrs["step_balance"]``)."""
    from . import _core

    s = _core._plan(meta, config, world=world, balance=balance, **kw)
    return _step_costs_of(s, world), dict(s.stats().get("step_balance", {}))


def _step_costs_of(sampler, world: int) -> np.ndarray:
    from . import _vbucket

    return np.asarray(_vbucket.step_costs(sampler), dtype=float).reshape(-1, world)


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


def _svg(fig) -> str:
    """The figure as inline SVG markup, its text kept as text (``svg.fonttype: none``): the
    browser lays out the labels (sharp at any zoom, searchable, measurable by a test)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg")
    _pyplot().close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def render_report(meta, config, out, *, world: Optional[int] = None, profile=None,
                  memory_gib: Optional[float] = None, margin: float = 0.05,
                  **kw) -> Dict[str, Any]:
    """Writes the HTML report to ``out``; returns {"images": n, "path": out, "message": text
    or None}. The epoch is planned twice (without and with step balance), each plan dealt to
    every rank at once; arguments as ``vbucket.stats`` (the library's defaults)."""
    from . import _core

    if (profile is None) != (memory_gib is None):
        raise ValueError("report: --profile and --memory-gib go together")
    given = dict(kw, world=_core.DEFAULTS["world"] if world is None else world)
    opts = _core._plan_args(given, "report")  # the run as shown; `given` is what is planned
    world = int(opts["world"])
    cfg = _core.BucketConfig(config, rule=opts["rule"])
    table = _core._samples(meta)  # read once for both plans
    plain = _core._plan(table, cfg, **dict(given, balance=False))
    st = _core._stats_frame(plain.stats())
    a = st.attrs
    figures: List[Tuple[str, str]] = []
    message = None
    if int(st["samples"].sum()) == 0:
        message = (f"No sample is in a bucket this epoch ({a.get('unassigned', 0)} without a "
                   f"bucket, {a.get('invalid', 0)} with invalid metadata): nothing to draw. "
                   "Check the config's resolutions and frames against the metadata; "
                   "`python -m vbucket explain --index I ...` shows the rule's decisions for "
                   "sample I.")
    else:
        plt = _pyplot()
        fig, axes = plt.subplots(1, 2, figsize=(14, 5))
        _heatmap(axes[0], st, "samples", "samples per (resolution, frames)")
        _heatmap(axes[1], st, "batches", "batches per (resolution, frames)")
        fig.tight_layout()
        figures.append(("Samples and batches per resolution and frames", _svg(fig)))

        fig, ax = plt.subplots(figsize=(14, 5))
        _ratio_bars(ax, st)
        fig.tight_layout()
        figures.append(("Aspect ratios per resolution", _svg(fig)))

        fig, ax = plt.subplots(figsize=(14, 5))
        _changes(ax, st)
        fig.tight_layout()
        figures.append(("Pads, drops and moves per bucket", _svg(fig)))

        balanced = _core._plan(table, cfg, **dict(given, balance=True))
        fig, axes = plt.subplots(1, 2, figsize=(14, 4.5), sharey=True)
        _step_panel(axes[0], _step_costs_of(plain, world), dict(a.get("step_balance", {})),
                    f"per-step cost over {world} ranks, without --balance")
        _step_panel(axes[1], _step_costs_of(balanced, world),
                    dict(balanced.stats().get("step_balance", {})),
                    f"per-step cost over {world} ranks, with --balance")
        fig.tight_layout()
        figures.append(("Per-step cost across ranks", _svg(fig)))

        if profile is not None:
            mem = memory_prediction(cfg, profile, memory_gib, margin=margin, rule=opts["rule"])
            fig, ax = plt.subplots(figsize=(14, 5))
            _memory_panel(ax, mem)
            fig.tight_layout()
            figures.append((f"Predicted peak memory per bucket against {memory_gib:g} GiB",
                            _svg(fig)))

    totals = {k: a[k] for k in ("total", "images", "videos") if k in a}
    rows = "".join(
        f"<tr><th>{html.escape(k)}</th>" + "".join(
            f"<td>{html.escape(str(v))}</td>" for v in d.values()) + "</tr>"
        for k, d in totals.items())
    head = ("<tr><th></th>" + "".join(f"<th>{html.escape(c)}</th>"
                                      for c in next(iter(totals.values()), {}).keys()) + "</tr>")
    table_text = ""
    if getattr(_core._vbucket, "HAS_FMT", False):
        table_text = plain.stats_table()
    run = "; ".join(f"{k}: {opts[k]}" for k in ("rule", "rng", "seed", "epoch", "world",
                                                  "policy", "drop_last"))
    body = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>vbucket report</title>",
        "<style>body{font-family:sans-serif;margin:2em}figure{margin:0}"
        "figure svg{max-width:100%;height:auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}</style>",
        "</head><body><h1>vbucket report</h1>",
        f"<p>metadata: {html.escape(str(meta))}; config: {html.escape(str(config))}</p>",
        f"<p class='run'>{html.escape(run)}; fingerprint: {html.escape(plain.fingerprint())}</p>",
        f"<p>unassigned: {a.get('unassigned')}, invalid: {a.get('invalid')}</p>",
        f"<table>{head}{rows}</table>",
    ]
    if message:
        body.append(f"<p class='message'><b>{html.escape(message)}</b></p>")
    for title, svg in figures:
        body.append(f"<h2>{html.escape(title)}</h2><figure>{svg}</figure>")
    if table_text:
        body.append(f"<h2>Bucket table</h2><pre>{html.escape(table_text)}</pre>")
    body.append("</body></html>")
    out = os.fspath(out)
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(body))
    return {"images": len(figures), "path": out, "message": message}
