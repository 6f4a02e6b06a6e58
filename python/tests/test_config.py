"""BucketConfig: Open-Sora's dict shapes, JSON paths, and the CLI's messages for bad configs."""

from __future__ import annotations

import json

import numpy as np
import pytest

import vbucket
from conftest import CONFIG_360P, CONFIG_V2, CONFIG_V12, SAMPLE_META, run_cli


def _opensora_form(cfg: dict) -> dict:
    """The JSON config written the way Open-Sora's Python configs are: int keys, tuples."""
    def value(v):
        return tuple(value(x) for x in v) if isinstance(v, list) else v

    return {res: {int(t): value(e) for t, e in frames.items()} for res, frames in cfg.items()}


@pytest.mark.parametrize("path,rule", [(CONFIG_360P, "opensora-v2"), (CONFIG_V2, "opensora-v2"),
                                       (CONFIG_V12, "opensora-v1.2")])
def test_dict_forms_equal_the_json_file(path, rule):
    from_file = vbucket.BucketConfig(path, rule=rule)
    raw = json.loads(path.read_text())
    as_opensora = vbucket.BucketConfig(_opensora_form(raw), rule=rule)
    as_json_dict = vbucket.BucketConfig(raw, rule=rule)
    expected = from_file.buckets()
    assert len(expected) == from_file.num_buckets > 0
    assert as_opensora.buckets().equals(expected)
    assert as_json_dict.buckets().equals(expected)


def test_opensora_docs_example():
    # Open-Sora's documented shape: a single probability, a pair, and a disabled entry (None).
    cfg = vbucket.BucketConfig({"360p": {1: (0.5, 141), 51: ((0.5, 0.5), 8), 102: (0.0, None)},
                                "240p": {"16": [1.0, np.int64(16)]}})
    b = cfg.buckets()
    assert set(b.resolution) == {"360p", "240p"}
    assert set(b[b.resolution == "360p"].frames) == {102, 51, 1}
    assert (b[(b.resolution == "360p") & (b.frames == 102)].batch_size == 0).all()  # disabled
    assert (b[(b.resolution == "360p") & (b.frames == 51)].batch_size == 8).all()


@pytest.mark.parametrize(
    "cfg",
    [
        {"360p": {1: (1.5, 141)}},          # probability outside [0, 1]
        {"huge": {1: (0.5, 141)}},          # unknown resolution
        {"360p": {1: (0.5, 0)}},            # batch size <= 0
        {"360p": {1: (0.5, None)}},         # disabled with a non-zero probability
        {"360p": {0: (0.5, 4)}},            # frames key below 1
    ],
)
def test_invalid_config_raises_the_clis_message(cfg, cli, tmp_path):
    with pytest.raises(ValueError) as e:
        vbucket.BucketConfig(cfg)
    message = str(e.value)
    assert "\n" not in message and message.startswith("bucket config: ")
    # The CLI reads the same config as JSON: the message after the file name is the same.
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({r: {str(t): list(v) if isinstance(v, tuple) else v
                                    for t, v in f.items()} for r, f in cfg.items()}))
    r = run_cli(cli, "stats", "--config", path, "--meta", SAMPLE_META, check=False)
    assert r.returncode == 1
    assert r.stderr.strip().endswith(message[len("bucket config: "):]), (r.stderr, message)
    # And a path gives the CLI's message with the file name.
    with pytest.raises(ValueError) as from_path:
        vbucket.BucketConfig(path)
    assert str(from_path.value) == f"{path}: " + message[len("bucket config: "):]


@pytest.mark.parametrize(
    "cfg,error",
    [
        (["360p"], TypeError),
        ({1: {1: (0.5, 1)}}, TypeError),
        ({"360p": [(0.5, 1)]}, TypeError),
        ({"360p": {1.5: (0.5, 1)}}, TypeError),
        ({"360p": {1: (object(), 1)}}, TypeError),
    ],
)
def test_config_of_wrong_types_raises_type_error(cfg, error):
    with pytest.raises(error):
        vbucket.BucketConfig(cfg)


def test_missing_file_raises_value_error(tmp_path):
    with pytest.raises(ValueError, match="nope.json"):
        vbucket.BucketConfig(tmp_path / "nope.json")


def test_unknown_rule_raises():
    with pytest.raises(ValueError, match="unknown rule"):
        vbucket.BucketConfig(CONFIG_360P, rule="opensora-v3")
