"""Without torch the sampler is a plain iterable with the same batches; without torch and
pyarrow, planning, stats and scan work and the Loader and Parquet say what they need."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import CONFIG_V2, ROOT, SAMPLE_META

CLIPS = [str(ROOT / "tests" / "fuzz" / "corpus" / "probe" / n) for n in ("h264.mp4", "vp9.webm")]

CODE = f"""
import json, sys, vbucket
s = vbucket.VariableVideoBatchSampler({str(SAMPLE_META)!r}, {str(CONFIG_V2)!r}, seed=3,
                                      output="indices")
print(json.dumps([type(s).__mro__[1].__name__, "torch" in sys.modules, list(s)]))
"""


def _run(env_extra):
    env = dict(os.environ, **env_extra)
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         check=True, env=env)
    return json.loads(out.stdout)


def test_plain_iterable_without_torch():
    base, torch_loaded, batches = _run({"VBUCKET_NO_TORCH": "1"})
    assert base == "object" and not torch_loaded
    assert batches
    with_torch = _run({})
    if with_torch[1]:  # torch is installed: a Sampler subclass, the same batches
        assert with_torch[0] == "Sampler" and with_torch[2] == batches


# A machine without torch and pyarrow, made in a fresh interpreter: importing either (or a
# submodule) fails as it would there. What needs neither works; what needs one says which.
BLOCKED = f"""
import json, sys
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "pyarrow"):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _Absent())
import vbucket
meta, cfg = {str(SAMPLE_META)!r}, {str(CONFIG_V2)!r}
out = {{"stats_rows": len(vbucket.stats(meta, cfg, world=2)),
       "batches": len(list(vbucket.VariableVideoBatchSampler(meta, cfg, seed=3, output="indices"))),
       "assigned": int((vbucket.assign(meta, cfg).bucket >= 0).sum())}}
if vbucket._vbucket.HAS_FFMPEG:
    out["scanned"] = [int(v) for v in vbucket.scan({CLIPS!r}, progress=False).num_frames]
    sampler = vbucket.VariableVideoBatchSampler(meta, cfg, seed=3)
    try:
        vbucket.Loader(sampler, ["x.mp4"] * 10)
    except ImportError as e:
        out["loader"] = str(e)
try:
    vbucket.read_meta("meta.parquet")
except ImportError as e:
    out["parquet"] = str(e)
out["modules"] = sorted(m for m in ("torch", "pyarrow") if m in sys.modules)
print(json.dumps(out))
"""


def test_without_torch_and_pyarrow():
    out = subprocess.run([sys.executable, "-c", BLOCKED], capture_output=True, text=True,
                         check=True)
    got = json.loads(out.stdout)
    assert got["modules"] == []
    assert got["stats_rows"] > 0 and got["batches"] > 0 and got["assigned"] > 0
    assert "pyarrow" in got["parquet"] and "meta.parquet" in got["parquet"]
    import vbucket

    if vbucket._vbucket.HAS_FFMPEG:
        assert got["scanned"] == [6, 5]  # ffprobe -count_frames of the two clips
        assert got["loader"].startswith("vbucket.Loader needs torch") and "pip install" in \
            got["loader"]
