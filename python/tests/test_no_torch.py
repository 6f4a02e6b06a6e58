"""Without torch the sampler is a plain iterable with the same batches."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import CONFIG_V2, SAMPLE_META

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
