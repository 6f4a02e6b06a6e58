"""Shared fixtures: the repository's data files and the `vbucket` CLI to compare against."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SAMPLE_META = ROOT / "examples" / "data" / "sample_meta.csv"
CONFIG_360P = DATA / "config_360p_example.json"
CONFIG_V2 = DATA / "config_opensora_v2.json"
CONFIG_V12 = DATA / "config_opensora_v12.json"


def find_cli():
    """The CLI binary: $VBUCKET_CLI, else build-debug/vbucket or build/vbucket (the newest)."""
    env = os.environ.get("VBUCKET_CLI")
    if env:
        return env
    found = [ROOT / d / "vbucket" for d in ("build-debug", "build")]
    found = [p for p in found if p.is_file() and os.access(p, os.X_OK)]
    if found:
        return str(max(found, key=lambda p: p.stat().st_mtime))
    return shutil.which("vbucket")


@pytest.fixture(scope="session")
def cli():
    path = find_cli()
    if not path:
        pytest.skip("no vbucket CLI: set VBUCKET_CLI or build build/vbucket")
    return path


def run_cli(cli, *args, check=True):
    r = subprocess.run([cli, *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"vbucket {' '.join(map(str, args))} failed: {r.stderr}")
    return r


def ledger_lines(cli, path):
    """A ledger file's records as text lines, the magic line first (`vbucket audit --dump`: the
    binary format, the default, or text). Written back to a file they are a text ledger, which
    the loops then append to in text."""
    return run_cli(cli, "audit", "--dump", path).stdout.splitlines(keepends=True)[1:]


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="session")
def sample_df():
    import pandas as pd

    return pd.read_csv(SAMPLE_META)


@pytest.fixture(scope="session")
def media(tmp_path_factory):
    """tests/e2e/make_dataset.sh's media (videos, images, bad files), generated once; or, on a
    machine without the ffmpeg command (a GPU machine), the directory VBUCKET_TEST_MEDIA names,
    where that script already wrote them."""
    given = os.environ.get("VBUCKET_TEST_MEDIA")
    if given:
        return pathlib.Path(given)
    if shutil.which("ffmpeg") is None:
        pytest.skip("the ffmpeg command is needed to generate the test media")
    out = tmp_path_factory.mktemp("media") / "e2e"
    subprocess.run(["bash", str(ROOT / "tests" / "e2e" / "make_dataset.sh"), str(out)], check=True,
                   capture_output=True)
    return out
