"""The checked-in stubs are the generated ones (python/gen_stubs.py): `_vbucket.pyi` is
nanobind's stubgen of the built extension, and the run-field blocks of `__init__.pyi` list the
library's field table with its defaults. A new run field, a changed default or a binding change
without regenerating the stubs fails here."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

import vbucket
from vbucket import _core, _vbucket

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_checked_in_stubs_are_the_generated_ones():
    pytest.importorskip("nanobind.stubgen")
    if not (_vbucket.HAS_FFMPEG and _vbucket.HAS_EIGEN and _vbucket.HAS_FMT):
        pytest.skip("the stub lists the FFmpeg, Eigen and {fmt} bindings; this build lacks one")
    # the package under test (its directory unresolved: a dev tree links the sources there)
    here = os.path.dirname(os.path.dirname(os.path.abspath(vbucket.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    r = subprocess.run([sys.executable, str(ROOT / "python" / "gen_stubs.py"), "--check"],
                       capture_output=True, text=True, env=env, cwd=here)
    assert r.returncode == 0, r.stderr + r.stdout


def test_the_stub_says_the_librarys_defaults():
    """Independently of the generator: every run field with a default appears in the sampler's
    stub block with the value the library gives it."""
    text = (ROOT / "python" / "vbucket" / "__init__.pyi").read_text()
    block = text.split("# BEGIN run fields: VariableVideoBatchSampler.__init__\n")[1]
    block = block.split("# END run fields")[0]
    seen = {line.split(":")[0].strip(): line.split(" = ")[1].rstrip(",")
            for line in block.splitlines() if line.strip()}
    for name, default in _vbucket.DEFAULTS.items():
        if name in ("world", "rank", "seed", "drop_last"):  # num_replicas, rank, positional
            continue
        shown = f'"{default}"' if isinstance(default, str) else repr(default)
        assert seen[name] == shown, name
    assert seen["token_budget"] == "None"  # no default: required with packed batching
    assert set(seen) == set(_core.FIELDS) - {"meta", "config", "world", "rank", "seed",
                                             "drop_last"}
