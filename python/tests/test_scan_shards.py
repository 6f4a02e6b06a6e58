"""vbucket.scan over tar shards (WebDataset, written by Python's tarfile: pax headers, long
names): one row per media member with its shard, offset, size and sidecar fields, the member
decoded in place with the plain file's bytes, a cut shard named in the error column."""
from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile

import numpy as np
import pytest

import vbucket
from vbucket import _vbucket

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter")


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    if shutil.which("ffmpeg") is None:
        pytest.skip("the ffmpeg command is needed to generate the clips")
    d = tmp_path_factory.mktemp("shards")
    clip = d / "plain.mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i",
                    "testsrc=size=96x64:rate=25:duration=1", "-c:v", "libx264", "-g", "5",
                    "-pix_fmt", "yuv420p", str(clip)], check=True)
    data = clip.read_bytes()
    long_key = "k" * 120  # a pax 'path' record
    with tarfile.open(d / "s0.tar", "w") as t:  # PAX_FORMAT, as webdataset's TarWriter
        for name, payload in [("k0.mp4", data), ("k0.txt", "a caption\n".encode()),
                              ("k0.json", json.dumps({"caption": "é", "score": 2}).encode()),
                              (f"{long_key}.mp4", data), (f"{long_key}.txt", b"long")]:
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            t.addfile(info, io.BytesIO(payload))
    whole = (d / "s0.tar").read_bytes()
    (d / "s1.tar").write_bytes(whole[:len(whole) // 2])  # cut inside the second clip
    return d, long_key


def test_scan_lists_members_with_offsets_and_sidecars(shards):
    d, long_key = shards
    df = vbucket.scan(d, progress=False)
    s0 = str(d / "s0.tar")
    rows = df[df["shard"] == s0]
    assert list(rows["member"]) == ["k0.mp4", f"{long_key}.mp4"]
    assert (rows["error"] == "").all()
    assert list(rows["num_frames"]) == [25, 25]
    assert rows["path"].iloc[0] == f"{s0}#k0.mp4@{rows['member_offset'].iloc[0]}+" \
                                   f"{rows['member_size'].iloc[0]}"
    assert list(rows["txt"]) == ["a caption", "long"]
    assert list(rows["caption"]) == ["é", ""]
    assert list(rows["score"]) == ["2", ""]
    plain = df[df["path"] == str(d / "plain.mp4")]
    assert plain["shard"].iloc[0] == "" and plain["member_offset"].isna().all()
    # The cut shard: its first clip is listed, the damage is a row naming the shard and member.
    cut = df[df["shard"] == str(d / "s1.tar")]
    assert list(cut["member"]) == ["k0.mp4", ""]
    assert cut["error"].iloc[0] == ""
    assert "runs past the end of the archive" in cut["error"].iloc[1]
    assert f"member {long_key}.mp4" in cut["error"].iloc[1]


def test_member_decodes_in_place_with_the_plain_file_bytes(shards):
    d, _ = shards
    df = vbucket.scan(d / "s0.tar", progress=False)
    for path in df["path"]:
        a = vbucket.decode_clip(path, 3, 4, 2, size=(32, 48))
        b = vbucket.decode_clip(str(d / "plain.mp4"), 3, 4, 2, size=(32, 48))
        np.testing.assert_array_equal(a, b)
    with pytest.raises(vbucket.DecodeError, match="no tar header before byte 1024"):
        vbucket.decode_clip(f"{d / 's0.tar'}#k0.mp4@1024+10", 0, 1, 1, size=(32, 48))
