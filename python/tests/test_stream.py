"""vbucket.stream_csv: a sampler over a metadata CSV read in chunks at each epoch's planning
gives the batches, lengths, fingerprints, statistics and resume states of a sampler over the
same CSV held whole, for both rules, both rngs and both batchings; bad files are refused with
the file and row named, and what needs the table in memory says so; a file appended to,
truncated or edited after its first read is refused when an epoch is planned again."""

from __future__ import annotations

import os

import numpy as np
import pytest

import vbucket
from conftest import CONFIG_V2, CONFIG_V12

pytest.importorskip("torch", reason="VariableVideoBatchSampler imports torch")


@pytest.fixture(scope="module")
def meta_csv(tmp_path_factory):
    """3001 rows of web-video shapes with images, fractional rates and unusable rows."""
    rng = np.random.default_rng(11)
    shapes = [(1080, 1920), (720, 1280), (1024, 1024), (1920, 1080), (360, 640), (240, 426)]
    lines = ["num_frames,height,width,fps,error"]
    for i in range(3001):
        h, w = shapes[int(rng.integers(len(shapes)))]
        if i % 97 == 5:
            lines.append(",,,,unreadable")  # an unusable row, counted as such
        elif i % 5 == 0:
            lines.append(f"1,{h},{w},,")  # an image
        else:
            fps = [23.976, 24, 25, 29.97, 30, 50, 60][int(rng.integers(7))]
            lines.append(f"{int(rng.integers(2, 400))},{h},{w},{fps},")
    path = tmp_path_factory.mktemp("stream") / "meta.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _pair(path, chunk_rows, config, **kw):
    kw.setdefault("seed", 7)
    kw.setdefault("output", "indices")
    whole = vbucket.VariableVideoBatchSampler(path, config, **kw)
    streamed = vbucket.VariableVideoBatchSampler(
        vbucket.stream_csv(path, chunk_rows=chunk_rows), config, **kw)
    return whole, streamed


@pytest.mark.parametrize("rule,config", [("opensora-v2", CONFIG_V2), ("opensora-v1.2", CONFIG_V12)])
@pytest.mark.parametrize("rng", ["fast", "numpy"])
@pytest.mark.parametrize("batching", ["fixed", "packed"])
def test_streamed_equals_whole(meta_csv, rule, config, rng, batching):
    kw = dict(rule=rule, rng=rng, batching=batching, num_replicas=3, rank=1)
    if batching == "packed":
        kw["token_budget"] = 200_000
        kw["drop_oversized"] = True
    for chunk_rows in (7, 1000, 1 << 20):
        whole, streamed = _pair(meta_csv, chunk_rows, config, **kw)
        for epoch in (0, 2):
            whole.set_epoch(epoch)
            streamed.set_epoch(epoch)
            assert streamed.fingerprint() == whole.fingerprint()
            assert len(streamed) == len(whole) > 0
            assert list(streamed) == list(whole)
            assert streamed.stats() == whole.stats()


def test_streamed_state_resumes_a_whole_sampler_and_back(meta_csv):
    whole, streamed = _pair(meta_csv, 100, CONFIG_V2, rng="numpy", seed=2**70 + 3)
    whole.set_epoch(1)
    full = list(whole)
    streamed.set_epoch(1)
    it = iter(streamed)
    first = [next(it) for _ in range(5)]
    state = streamed.state_dict()
    resumed, _ = _pair(meta_csv, 100, CONFIG_V2, rng="numpy", seed=2**70 + 3)
    resumed.load_state_dict(state)
    assert first + list(resumed) == full
    _, back = _pair(meta_csv, 100, CONFIG_V2, rng="numpy", seed=2**70 + 3)
    back.load_state_dict(whole.state_dict(5))
    assert first + list(back) == full


def test_stats_over_a_streamed_csv(meta_csv):
    streamed = vbucket.stats(vbucket.stream_csv(meta_csv, chunk_rows=50), CONFIG_V2, seed=4,
                             epoch=1, world=2)
    whole = vbucket.stats(meta_csv, CONFIG_V2, seed=4, epoch=1, world=2)
    assert streamed.equals(whole)
    assert streamed.attrs == whole.attrs


def test_bad_files_and_arguments(tmp_path, meta_csv):
    missing = tmp_path / "missing.csv"
    with pytest.raises(Exception, match=r"missing\.csv.*cannot open"):
        vbucket.stream_csv(missing)
    header = tmp_path / "header.csv"
    header.write_text("num_frames,height,fps\n30,360,30\n")
    with pytest.raises(Exception, match=r'header\.csv.*"width"'):
        vbucket.stream_csv(header)
    bad_row = tmp_path / "bad_row.csv"
    bad_row.write_text("num_frames,height,width,fps\n" + "30,360,640,30\n" * 20
                       + "30,360,abc,30\n")
    s = vbucket.VariableVideoBatchSampler(vbucket.stream_csv(bad_row, chunk_rows=8), CONFIG_V2)
    with pytest.raises(Exception, match=r"bad_row\.csv.*row 21"):
        len(s)
    for chunk_rows in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="chunk_rows"):
            vbucket.stream_csv(meta_csv, chunk_rows=chunk_rows)
    streamed = vbucket.stream_csv(meta_csv)
    assert streamed.path == str(meta_csv) and streamed.chunk_rows == 1 << 20
    with pytest.raises(TypeError, match="in memory"):
        vbucket.assign(streamed, CONFIG_V2)


def test_the_loader_needs_the_table(meta_csv):
    if not getattr(vbucket._vbucket, "HAS_FFMPEG", False):
        pytest.skip("a build without the FFmpeg adapter has no Loader")
    s = vbucket.VariableVideoBatchSampler(vbucket.stream_csv(meta_csv), CONFIG_V2)
    paths = [f"clip{i}.mp4" for i in range(3001)]
    with pytest.raises(Exception, match="streams its metadata CSV"):
        vbucket.Loader(s, paths, workers=1)


def _streamed_copy(tmp_path, meta_csv, name):
    path = tmp_path / name
    path.write_bytes(meta_csv.read_bytes())
    s = vbucket.VariableVideoBatchSampler(
        vbucket.stream_csv(path, chunk_rows=500), CONFIG_V2, seed=7, num_replicas=2, rank=0,
        output="indices")
    s.set_epoch(0)
    first = [list(b) for b in s]
    assert first and max(max(b) for b in first) < 3001
    return path, s


@pytest.mark.parametrize("change", ["append", "truncate", "edit"])
def test_a_changed_file_is_refused_at_the_next_epoch(tmp_path, meta_csv, change):
    path, s = _streamed_copy(tmp_path, meta_csv, f"{change}.csv")
    text = path.read_text()
    if change == "append":  # rows appended mid-run would be trained from the next epoch
        path.write_text(text + "".join(f"{40 + i},720,1280,24,\n" for i in range(500)))
        what = r"size is \d+ bytes, it was \d+ bytes .*rows appended"
    elif change == "truncate":
        path.write_text(text[: len(text) // 2].rsplit("\n", 1)[0] + "\n")
        what = r"truncated"
    else:  # one row edited in place, the same size
        lines = text.split("\n")
        k = next(i for i, line in enumerate(lines) if line.startswith("1,1080,1920"))
        lines[k] = "2" + lines[k][1:]
        path.write_text("\n".join(lines))
        what = r"same size, different content"
    # The next epoch's planning reads the file again: refused, whichever call plans it.
    for plan_again in (lambda: s.set_epoch(1), lambda: s.set_epoch(0), s.reset):
        with pytest.raises(ValueError, match=rf"{change}\.csv: the metadata file changed.*{what}"):
            plan_again()
            len(s)
    with pytest.raises(ValueError, match="explicit new version .* epoch boundary"):
        list(s)
    # A new source is the explicit new version: it plans the file as it is now.
    fresh = vbucket.VariableVideoBatchSampler(vbucket.stream_csv(path), CONFIG_V2, seed=7)
    assert len(fresh) > 0


def test_an_unchanged_file_plans_every_epoch(tmp_path, meta_csv):
    path, s = _streamed_copy(tmp_path, meta_csv, "same.csv")
    fp = s.fingerprint()
    os.utime(path, None)  # touched: the same bytes, the same samples
    s.set_epoch(1)
    assert len(s) > 0
    s.set_epoch(0)
    assert s.fingerprint() == fp
