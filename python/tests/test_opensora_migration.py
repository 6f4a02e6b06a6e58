"""docs/opensora.md's migration patches apply to Open-Sora's files as they are: each ```diff block
marked ``id=migration-...`` is applied with ``patch -p1`` to a copy of the lines of Open-Sora
2.0 it touches (python/tests/data/opensora/, kept as they are in Open-Sora), and the patched
lines are what the page says."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

FIXTURE = pathlib.Path(__file__).parent / "data" / "opensora"
PAGE = ROOT / "docs" / "opensora.md"


def migration_patches() -> dict[str, str]:
    """The page's ```diff blocks marked ``<!-- doc-test: id=migration-NAME -->``, by NAME."""
    text = PAGE.read_text()
    blocks = re.findall(r"<!-- doc-test: id=migration-(\w+) -->\n```diff\n(.*?)```", text,
                        flags=re.S)
    return dict(blocks)


@pytest.fixture
def opensora(tmp_path):
    if shutil.which("patch") is None:
        pytest.skip("no patch command")
    root = tmp_path / "Open-Sora"
    shutil.copytree(FIXTURE, root)
    return root


def apply(root: pathlib.Path, diff: str) -> subprocess.CompletedProcess:
    return subprocess.run(["patch", "-p1", "--forward", "--no-backup-if-mismatch"], cwd=root,
                          input=diff, capture_output=True, text=True)


def test_the_page_has_both_patches():
    assert set(migration_patches()) == {"import", "world"}


def test_import_patch_applies_to_opensoras_dataloader(opensora):
    r = apply(opensora, migration_patches()["import"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAILED" not in r.stdout
    lines = (opensora / "opensora/datasets/dataloader.py").read_text().splitlines()
    assert "from vbucket import VariableVideoBatchSampler" in lines
    assert "from .sampler import DistributedSampler" in lines
    assert not any("VariableVideoBatchSampler" in ln and ".sampler" in ln for ln in lines)
    # the file's other lines are untouched
    original = (FIXTURE / "opensora/datasets/dataloader.py").read_text().splitlines()
    assert [ln for ln in original if "import DistributedSampler" not in ln] == \
        [ln for ln in lines if "import DistributedSampler" not in ln and "vbucket" not in ln]


def test_world_patch_applies_to_opensoras_train_py(opensora):
    r = apply(opensora, migration_patches()["world"])
    assert r.returncode == 0, r.stdout + r.stderr
    lines = (opensora / "scripts/diffusion/train.py").read_text().splitlines()
    at = [i for i, ln in enumerate(lines) if "sampler.set_epoch(epoch)" in ln][0]
    # len(dataloader) read right after set_epoch, before the epoch's iterator, same indentation
    assert lines[at + 1].strip().startswith("num_steps_per_epoch = len(dataloader)")
    assert lines[at + 1][:8] == lines[at][:8]
    assert lines[at + 2].strip() == "dataloader_iter = iter(dataloader)"


def test_patches_refuse_a_file_they_do_not_fit(opensora):
    """The test can fail: a dataloader.py without Open-Sora's import line is refused."""
    path = opensora / "opensora/datasets/dataloader.py"
    path.write_text(path.read_text().replace("DistributedSampler, ", ""))
    r = apply(opensora, migration_patches()["import"])
    assert r.returncode != 0
