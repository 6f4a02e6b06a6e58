"""The README's folder-of-videos-to-training-batches example runs as written (on generated
media instead of videos/)."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT

from vbucket import _vbucket

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter")


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- python/tests/test_readme.py runs this block[^>]*-->\n```python\n(.*?)```",
                  text, re.S)
    assert m, "the README's tested example is gone"
    return m.group(1)


def test_readme_example_runs(media, capsys):
    torch = pytest.importorskip("torch")
    code = readme_example()
    assert len(code.strip().splitlines()) <= 11  # "ten lines of Python" (and the import)
    assert '"videos/"' in code
    seen = []

    def train_step(tensor, thw):
        assert tensor.dtype == torch.bfloat16 and tuple(tensor.shape[1:]) == (3, *thw)
        assert float(tensor.min()) >= -1 and float(tensor.max()) <= 1
        seen.append(tensor.shape[0])

    exec(compile(code.replace('"videos/"', repr(str(media))), "README.md", "exec"),
         {"train_step": train_step})
    assert len(seen) > 10 and sum(seen) > 40
    assert capsys.readouterr().out.count("throughput") == 2  # the stats table, per epoch
