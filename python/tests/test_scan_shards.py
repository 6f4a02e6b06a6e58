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

from fault_server import NGINX, Nginx

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
                              ("k0.json", json.dumps({"caption": "é", "score": 2, "none": None}).encode()),
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
    assert list(rows["none"]) == ["null", ""]  # JSON text, as the docs say
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


def _clip(path, frames: int, size: str = "96x64"):
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i",
                    f"testsrc2=size={size}:rate=25", "-frames:v", str(frames), "-c:v", "libx264",
                    "-g", "5", "-pix_fmt", "yuv420p", str(path)], check=True)
    return path.read_bytes()


def test_webdataset_shard_with_non_ascii_spaced_and_long_names(tmp_path):
    """Shards written by webdataset's own TarWriter (pax `path` records: '?' in the ustar name of
    a non-ASCII name, the name cut past 100 bytes): every member scans and decodes with the bytes
    of the loose file of the same name."""
    wds = pytest.importorskip("webdataset")
    if shutil.which("ffmpeg") is None:
        pytest.skip("the ffmpeg command is needed to generate the clips")
    keys = ["vidéo_1", "a spaced name", "d" * 200 + "/" + "é" * 60 + " x"]
    assert len(keys[2]) > 255
    loose = tmp_path / "loose"
    samples = []
    for i, key in enumerate(keys):  # a different length each: a mix-up changes num_frames
        (loose / key).parent.mkdir(parents=True, exist_ok=True)
        data = _clip(loose / f"{key}.mp4", 20 + 5 * i)
        samples.append({"__key__": key, "mp4": data, "txt": f"caption {i}"})
    shard = tmp_path / "wds-000.tar"
    with wds.TarWriter(str(shard)) as sink:
        for sample in samples:
            sink.write(sample)
    df = vbucket.scan(shard, progress=False)
    assert list(df["member"]) == [f"{k}.mp4" for k in keys]
    assert (df["error"] == "").all(), list(df["error"])
    assert list(df["txt"]) == [f"caption {i}" for i in range(3)]
    ref = vbucket.scan(loose, progress=False).set_index("path")
    for key, path, frames in zip(keys, df["path"], df["num_frames"]):
        plain = str(loose / f"{key}.mp4")
        assert frames == ref.loc[plain, "num_frames"]
        np.testing.assert_array_equal(vbucket.decode_clip(path, 3, 6, 2, size=(32, 48)),
                                      vbucket.decode_clip(plain, 3, 6, 2, size=(32, 48)))


def test_nested_list_scans_the_same_from_the_cli_and_python(shards, tmp_path, cli):
    """LIST.txt naming a directory, a shard, another list (naming a shard) and a shard URL: the
    CLI and vbucket.scan list the same rows (one resolver in the library); a sequence of shards
    scans their members (not the shards as videos)."""
    d, long_key = shards
    videos = tmp_path / "videos"
    videos.mkdir()
    shutil.copy(d / "plain.mp4", videos / "a.mp4")
    (tmp_path / "inner.txt").write_text(f"{d / 's0.tar'}\n")
    lines = [str(videos), str(tmp_path / "inner.txt"), str(d / "s0.tar")]
    srv = None
    if NGINX is not None:
        srv = Nginx(d, tmp_path / "nginx")
        lines.append(srv.url("s0.tar"))
    try:
        (tmp_path / "list.txt").write_text("# nested\n" + "\n".join(lines) + "\n")
        df = vbucket.scan(tmp_path / "list.txt", progress=False)
        out = tmp_path / "meta.csv"
        r = subprocess.run([cli, "scan", str(tmp_path / "list.txt"), "--out", str(out)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    finally:
        if srv is not None:
            srv.stop()
    import pandas as pd

    csv = pd.read_csv(out, keep_default_na=False, dtype=str)
    assert list(csv["path"]) == list(df["path"])
    assert list(csv["member"]) == list(df["member"])
    assert list(csv["num_frames"]) == [str(n) for n in df["num_frames"]]
    members = ["k0.mp4", f"{long_key}.mp4"]
    assert list(df["member"]) == [""] + members * (len(lines) - 1)
    assert (df["error"] == "").all(), list(df["error"])
    seq = vbucket.scan([d / "s0.tar", str(d / "s0.tar")], progress=False)
    assert list(seq["member"]) == members * 2
    assert (seq["error"] == "").all()
