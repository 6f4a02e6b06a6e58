"""Open-Sora conformance from Python: the golden files made by Open-Sora's own code (2.0 with
fps_max 16, v1.2 with frame_interval 1; NumPy draws, seed from the file's first line)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import vbucket
from conftest import DATA


@pytest.mark.parametrize("name,rule", [("opensora_v2_golden.jsonl", "opensora-v2"),
                                       ("opensora_v12_golden.jsonl", "opensora-v1.2")])
def test_golden(name, rule):
    lines = (DATA / name).read_text().splitlines()
    head = json.loads(lines[0])
    rows = [json.loads(x) for x in lines[1:] if x.strip()]
    assert len(rows) > 100
    cfg = vbucket.BucketConfig(head["config"], rule=rule)
    assert cfg.num_buckets == head["num_bucket"]
    meta = {
        "num_frames": np.array([r["T"] for r in rows]),
        "height": np.array([r["H"] for r in rows]),
        "width": np.array([r["W"] for r in rows]),
        "fps": np.array([np.nan if r["fps"] is None else r["fps"] for r in rows]),
    }
    got = vbucket.assign(meta, cfg, seed=head["seed"], epoch=0, rule=rule, rng="numpy")
    assert len(got) == len(rows)
    mismatches = []
    for i, r in enumerate(rows):
        g = got.iloc[i]
        if r["bucket"] is None:
            ok = g.bucket < 0
        else:
            ok = (g.bucket >= 0
                  and [g.resolution, int(g.frames), g.ratio] == r["bucket"]
                  and [int(g["bucket_t"]), int(g["bucket_h"]), int(g["bucket_w"])] == r["thw"])
        if not ok:
            mismatches.append(i)
    assert not mismatches, f"{len(mismatches)} samples differ, first {mismatches[:5]}"
    assert (got.bucket >= 0).sum() > 0 and (got.bucket < 0).sum() > 0  # both kinds covered
