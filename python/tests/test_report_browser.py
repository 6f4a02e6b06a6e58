"""The HTML report (`python -m vbucket report`) in a real browser: Debian's Chromium, headless,
at 1280×800, for configs of 40, 400 and 4,000 buckets. The page must render without a script
error, its pictures must fit the window and show something, and no two of their labels may
overlap as the browser lays them out (the report's SVG keeps its text as text, so the browser
measures the labels it draws).

Skipped without Chromium unless VBUCKET_TEST_BROWSER=1 (CI sets it). With
VBUCKET_REPORT_SCREENSHOTS=DIR the screenshots are kept there (docs/images/ holds them:
``VBUCKET_REPORT_SCREENSHOTS=docs/images .venv/bin/python -m pytest -q
python/tests/test_report_browser.py``)."""

from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from vbucket import plots

from conftest import DATA

mpimg = pytest.importorskip("matplotlib.image", reason="matplotlib (python3-matplotlib) needed")

WIDTH, HEIGHT = 1280, 800


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("VBUCKET_TEST_BROWSER") == "1":
        pytest.fail("VBUCKET_TEST_BROWSER=1 but no chromium on PATH (Debian: chromium)")
    pytest.skip("no chromium (Debian: chromium; CI installs it)")


def _dataset(tmp_path, n: int):
    """A v1.2 config and metadata with exactly ``n`` non-empty buckets: four resolutions (each
    4x the pixels of the next, so a sample fits one only), 40 ratios each, as many frames keys
    as needed; each chosen (resolution, frames, ratio) gets 1 to 5 samples of exactly its
    shape (H·W the resolution's pixels, H/W the ratio, T = frames + 1)."""
    tables = json.loads((DATA / "opensora_v12_aspect_ratios.json").read_text())["tables"]
    res = ["2048", "1024", "512", "256"]
    frames = [2 * (k + 1) for k in range(-(-n // (len(res) * 40)))]
    rng = np.random.default_rng(n)
    triples = [(r, f, q) for r in res for f in frames for q in tables[r]["ratios"]]
    chosen = [triples[i] for i in sorted(rng.permutation(len(triples))[:n])]
    rows = []
    for r, f, q in chosen:
        h_over_w = float(q)
        w = math.sqrt(tables[r]["pixels"] / h_over_w)
        for _ in range(int(rng.integers(1, 6))):
            rows.append(f"{f + 1},{round(h_over_w * w)},{round(w)},30")
    meta = tmp_path / f"meta_{n}.csv"
    meta.write_text("num_frames,height,width,fps\n" + "\n".join(rows) + "\n")
    config = {r: {str(f): [1.0, int(rng.integers(1, 5))] for f in frames} for r in res}
    cfg = tmp_path / f"config_{n}.json"
    cfg.write_text(json.dumps(config))
    return meta, cfg


# Runs in the page: script errors (window.onerror, unhandled rejections, console.error) are
# recorded from the first moment; after load, every SVG figure's size and its text boxes
# (getBoundingClientRect: the browser's layout, rotation included) are measured and written
# into the DOM as JSON, which --dump-dom returns. Two labels overlap when their boxes do, or
# when they sit side by side (on one line, or as two rotated columns) less than 3 px apart.
HOOK = """<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message || e)));
window.addEventListener('unhandledrejection', e => window.__errors.push(String(e.reason)));
const __ce = console.error; console.error = (...a) => { window.__errors.push(a.join(' ')); __ce(...a); };
</script>"""
MEASURE = """<script>
window.addEventListener('load', () => {
  const GAP = 3;  // px: side by side, labels closer than about a space read as one ("119126")
  const out = {errors: window.__errors, figures: [], width: window.innerWidth,
               page_width: document.documentElement.scrollWidth};
  for (const svg of document.querySelectorAll('figure svg')) {
    const box = svg.getBoundingClientRect();
    const labels = [];
    for (const t of svg.querySelectorAll('text')) {
      const r = t.getBoundingClientRect();
      if (t.textContent.trim() && r.width > 0 && r.height > 0)
        labels.push({text: t.textContent.trim(), l: r.left, r: r.right, t: r.top, b: r.bottom});
    }
    const overlaps = [];
    for (let i = 0; i < labels.length; ++i)
      for (let j = i + 1; j < labels.length; ++j) {
        const a = labels[i], b = labels[j];
        const w = Math.min(a.r, b.r) - Math.max(a.l, b.l), h = Math.min(a.b, b.b) - Math.max(a.t, b.t);
        const line = Math.min(a.b - a.t, b.b - b.t);
        // crossing by more than rounding (a line box's ascent and descent are not ink), or
        // side by side (sharing half a line) with less than GAP between them
        if ((w > 0.5 && h > 0.15 * line) || (h > line / 2 && w > -GAP))
          overlaps.push([a.text, b.text]);
      }
    const smallest = labels.length ? Math.min(...labels.map(l => Math.min(l.r - l.l, l.b - l.t))) : 0;
    out.figures.push({left: box.left, right: box.right, width: box.width, height: box.height,
                      labels: labels.length, smallest_px: smallest, overlaps: overlaps});
  }
  const pre = document.createElement('pre');
  pre.id = 'vbucket-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def _browser(chromium, *args):
    env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS="disabled:")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--disable-background-networking", "--disable-sync",
             "--disable-component-update", "--hide-scrollbars", "--disable-dev-shm-usage",
             f"--window-size={WIDTH},{HEIGHT}"]
    return subprocess.run([chromium, *flags, *args], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.parametrize("n", [40, 400, 4000])
def test_report_in_chromium(tmp_path, monkeypatch, n):
    chromium = _chromium()
    monkeypatch.chdir(tmp_path)  # the report names its inputs as given: short names
    meta, cfg = (p.name for p in _dataset(tmp_path, n))
    report = tmp_path / "report.html"
    r = plots.render_report(meta, cfg, str(report), world=4, rule="opensora-v1.2")
    assert r["message"] is None and r["images"] == 4
    import vbucket

    buckets = vbucket.stats(meta, cfg, world=4, rule="opensora-v1.2")
    assert int((buckets["samples"] > 0).sum()) == n  # the dataset has the buckets it says

    html = report.read_text()
    assert "<script" not in html  # the report itself runs no code; the hooks are the test's
    page = tmp_path / "page.html"
    page.write_text(html.replace("<head>", "<head>" + HOOK, 1).replace("</body>",
                                                                      MEASURE + "</body>", 1))
    dom = _browser(chromium, "--virtual-time-budget=10000", "--dump-dom", page.as_uri())
    m = re.search(r"<pre id=\"vbucket-check\">(.*?)</pre>", dom.stdout, re.S)
    assert m, f"no measurement in the page (chromium: {dom.returncode}) {dom.stderr[-2000:]}"
    got = json.loads(m.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    assert got["errors"] == []
    assert "Uncaught" not in dom.stderr
    assert got["width"] == WIDTH and got["page_width"] <= WIDTH  # nothing wider than the window
    assert len(got["figures"]) == 4
    for k, f in enumerate(got["figures"]):
        assert f["left"] >= 0 and f["right"] <= WIDTH and f["height"] > 200, (k, f)
        assert f["labels"] > 5, (k, f)
        assert f["smallest_px"] >= 4, (k, f)  # labels drawn at a readable size
        assert f["overlaps"] == [], (k, n, f["overlaps"][:10])

    shot = tmp_path / f"report_{n}_buckets.png"
    s = _browser(chromium, f"--screenshot={shot}", report.as_uri())
    assert shot.is_file(), s.stderr[-2000:]
    img = mpimg.imread(io.BytesIO(shot.read_bytes()), format="png")
    assert img.shape[:2] == (HEIGHT, WIDTH)
    rgb = img[..., :3]
    assert (np.abs(rgb - np.median(rgb.reshape(-1, 3), axis=0)).max(axis=2) > 0.1).mean() > 0.02
    assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 20  # a picture, not only text
    keep = os.environ.get("VBUCKET_REPORT_SCREENSHOTS")
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(shot, os.path.join(keep, shot.name))
