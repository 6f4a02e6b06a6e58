"""vbucket.Loader: per-sample fields and precomputed tensor files with each batch, the state
of the plan it runs, the position after close(), substitutes that avoid files that failed,
and its argument checks (issues 28 and 29)."""

from __future__ import annotations

import json
import struct
import threading

import numpy as np
import pytest

import vbucket
from vbucket import _vbucket

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter")
torch = pytest.importorskip("torch")

CONFIG = {"256px": {"1": (1.0, 5), "5": (1.0, 3), "9": (0.5, 2), "17": (1.0, 2)}}


@pytest.fixture(scope="module")
def table(media):
    """The scanned media with extra columns: a caption (str), a score (float32), an id (int64)."""
    df = vbucket.scan(media, progress=False)
    n = len(df)
    df["caption"] = [f"clip {i}: {'é' * (i % 3)} {df['path'][i][-12:]}" for i in range(n)]
    df["aesthetic"] = (np.arange(n, dtype=np.float32) * 0.25).astype(np.float32)
    df["uid"] = np.arange(n, dtype=np.int64) * 1000 + 7
    return df


def _sampler(df, world=1, rank=0, seed=5, **kw):
    return vbucket.VariableVideoBatchSampler(df, CONFIG, num_replicas=world, rank=rank, seed=seed,
                                             rng="fast", **kw)


def _garbled(df):
    return int(np.flatnonzero(df["path"].str.endswith("garbled.mp4").to_numpy())[0])


# --- fields ------------------------------------------------------------------------------------


def test_fields_ride_with_each_batch(table):
    """Names looked up in the sampler's DataFrame: each batch's fields are those of the samples
    it holds, substitutes included (a substituted clip's caption is its replacement's)."""
    g = _garbled(table)
    seed = next(x for x in range(100)
                if vbucket.assign(table, CONFIG, seed=x, rng="fast", as_arrays=True)[g] >= 0)
    s = _sampler(table, seed=seed)
    subs = 0
    with vbucket.Loader(s, table["path"], workers=2,
                        fields=["caption", "aesthetic", "uid"]) as loader:
        for b in loader:
            idx = b.indices.tolist()
            assert b.fields["caption"] == [table["caption"][i] for i in idx]
            assert b.fields["aesthetic"].dtype == np.float32
            np.testing.assert_array_equal(b.fields["aesthetic"], table["aesthetic"].to_numpy()[idx])
            assert b.fields["uid"].dtype == np.int64
            np.testing.assert_array_equal(b.fields["uid"], table["uid"].to_numpy()[idx])
            for sub in b.substitutions:
                assert b.fields["caption"][sub["clip"]] == table["caption"][sub["replacement"]]
            subs += len(b.substitutions)
    assert subs >= 1


def test_fields_as_columns_and_from_a_csv(table, tmp_path):
    """A dict of columns (any sequence), and names looked up in a CSV the sampler reads."""
    captions = [f"given {i}" for i in range(len(table))]
    s = _sampler(table)
    with vbucket.Loader(s, table["path"], workers=2,
                        fields={"text": captions, "score": table["aesthetic"]}) as loader:
        b = next(loader)
        assert b.fields["text"] == [captions[i] for i in b.indices.tolist()]
        np.testing.assert_array_equal(b.fields["score"], table["aesthetic"].to_numpy()[b.indices])
    csv = tmp_path / "meta.csv"
    good = table[table["error"] == ""].reset_index(drop=True)
    good[["path", "num_frames", "height", "width", "fps", "caption", "uid"]].to_csv(csv,
                                                                                    index=False)
    s = _sampler(str(csv))
    with vbucket.Loader(s, good["path"], workers=2, fields=["caption", "uid"]) as loader:
        for b in loader:
            assert b.fields["caption"] == [good["caption"][i] for i in b.indices.tolist()]
            np.testing.assert_array_equal(b.fields["uid"], good["uid"].to_numpy()[b.indices])


def test_field_errors(table):
    s = _sampler(table)
    with pytest.raises(KeyError, match="no column 'nope'"):
        vbucket.Loader(s, table["path"], fields=["nope"])
    with pytest.raises(ValueError, match="column 'short' has 3 values for the sampler's 64"):
        vbucket.Loader(s, table["path"], fields={"short": ["a", "b", "c"]})
    bad = list(table["caption"])
    bad[4] = float("nan")
    with pytest.raises(TypeError, match='column "caption" row 4 must be a str, got float nan'):
        vbucket.Loader(s, table["path"], fields={"caption": bad})


# --- precomputed tensors -----------------------------------------------------------------------


def _write_safetensors(path, name, arr, dtype="F32"):
    data = arr.tobytes()
    header = {"__metadata__": {"format": "pt"},
              name: {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [0, len(data)]}}
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def _cached(table, tmp_path, seed=5):
    """Per row: a latent .npy whose shape follows the row's bucket (T, 4, 4) and a text
    embedding .safetensors (3, 8); values derived from the row."""
    ids = vbucket.assign(table, CONFIG, seed=seed, rng="fast", as_arrays=True)
    frames = {}
    s = _sampler(table, seed=seed)
    for b in s.batches():
        for i in b[4].tolist():
            frames[i] = b[1]
    lat, txt = [], []
    for i in range(len(table)):
        t = frames.get(i, 1)
        lp, tp = tmp_path / f"lat_{i}.npy", tmp_path / f"txt_{i}.safetensors"
        np.save(lp, np.full((t, 4, 4), i, dtype=np.float16))
        _write_safetensors(tp, "text", np.arange(24, dtype=np.float32).reshape(3, 8) + i)
        lat.append(str(lp))
        txt.append(tp)
    assert (ids >= 0).sum() == len(frames)
    return lat, txt


def test_a_csv_caption_that_is_not_utf8_is_named(table, tmp_path):
    """fields= over a CSV whose caption holds bytes that are not UTF-8: one ValueError naming
    the file, the row and the column (not a bare UnicodeDecodeError)."""
    meta = tmp_path / "meta.csv"
    lines = [b"path,num_frames,height,width,fps,caption"]
    good = table.dropna(subset=["num_frames", "height", "width"]).reset_index(drop=True)
    for i in range(len(good)):
        caption = b"caf\xe9" if i == 1 else b"ok"
        lines.append(",".join(str(good[c][i]) for c in ("path", "num_frames", "height", "width",
                                                        "fps")).encode() + b"," + caption)
    meta.write_bytes(b"\n".join(lines) + b"\n")
    s = vbucket.VariableVideoBatchSampler(str(meta), CONFIG, seed=5, rng="fast")
    with pytest.raises(ValueError, match=r"meta.csv: row 2 .*column \"caption\": is not UTF-8"):
        vbucket.Loader(s, good["path"], fields=["caption"])


def test_tensors_instead_of_video_resume_exactly(table, tmp_path):
    """Open-Sora's cached path: no decoding, the tensors of each batch stacked, the same
    batches as the sampler's, and a mid-epoch resume that continues exactly."""
    lat, txt = _cached(table, tmp_path)
    ref = [(b[4].tolist(), b[1]) for b in _sampler(table).batches()]
    s = _sampler(table)
    got = []
    with vbucket.Loader(s, None, workers=2, tensors={"latent": lat, "text": txt},
                        fields=["caption"]) as loader:
        for k, b in enumerate(loader):
            assert b.tensor is None and b.substitutions == []
            idx = b.indices.tolist()
            t = b.thw[0]
            assert b.tensors["latent"].dtype == torch.float16
            assert tuple(b.tensors["latent"].shape) == (len(idx), t, 4, 4)
            assert b.tensors["latent"][:, 0, 0, 0].tolist() == idx
            assert tuple(b.tensors["text"].shape) == (len(idx), 3, 8)
            assert b.tensors["text"][:, 0, 0].tolist() == idx
            assert b.fields["caption"] == [table["caption"][i] for i in idx]
            got.append((idx, t))
            if k == 2:
                state = loader.state_dict()
    assert got == ref
    s2 = _sampler(table)
    s2.load_state_dict(state)
    with vbucket.Loader(s2, None, tensors={"latent": lat}) as loader:
        rest = [b.indices.tolist() for b in loader]
    assert rest == [g[0] for g in got[3:]]


def test_tensor_file_errors(table, tmp_path):
    lat, _ = _cached(table, tmp_path)
    s = _sampler(table)
    # Two batches of buckets with other samples to substitute (not one padded with repeats).
    batches = s.batches()
    per_bucket = {}
    for b in batches:
        per_bucket.setdefault(b[0], set()).update(b[4].tolist())
    steps = [k for k, b in enumerate(batches) if len(per_bucket[b[0]]) >= 4][:2]
    victims = [s.batches()[k][4].tolist()[0] for k in steps]
    # A Fortran-order file and a big-endian one fail their clip (replaced); the message names it.
    np.save(lat[victims[0]], np.asfortranarray(np.zeros((2, 3, 4), np.float16)))
    np.save(lat[victims[1]], np.zeros(np.load(lat[victims[1]]).shape, ">f4"))
    with vbucket.Loader(s, None, tensors={"latent": lat}) as loader:
        errors = {sub["failed"]: sub["error"] for b in loader for sub in b.substitutions}
    assert errors[victims[0]].startswith(lat[victims[0]] + ": Fortran-order")
    assert errors[victims[1]] == (lat[victims[1]] + ": unsupported dtype '>f4' (supported: "
                                  "little-endian bool, int8-64, uint8-64, float16/32/64)")
    first = _sampler(table).batches()[steps[0]][4].tolist()
    # Two readable files of one batch with different shapes: an error naming both.
    (tmp_path / "again").mkdir()
    lat2, _ = _cached(table, tmp_path / "again")
    np.save(lat2[first[1]], np.zeros((7, 4, 4), np.float16))
    with vbucket.Loader(_sampler(table), None, tensors={"latent": lat2}) as loader:
        with pytest.raises(ValueError) as e:
            for _ in loader:
                pass
    msg = str(e.value)
    assert lat2[first[1]] in msg and "(7, 4, 4)" in msg and lat2[first[0]] in msg
    with pytest.raises(ValueError, match="paths=None decodes nothing"):
        vbucket.Loader(_sampler(table), None)


# --- state and close (issue 29 items 2 and 3) --------------------------------------------------


def test_state_dict_is_of_the_plan_the_loader_runs(table):
    """sampler.set_epoch(1) while a loader of epoch 0 runs: its checkpoints still resume."""
    s = _sampler(table, world=2, rank=1)
    loader = vbucket.Loader(s, table["path"], workers=2)
    fp0 = s.fingerprint()
    done = [next(loader).indices.tolist() for _ in range(2)]
    s.set_epoch(1)
    assert s.fingerprint() != fp0
    state = loader.state_dict()
    assert state["fingerprint"] == fp0 and state["epoch"] == 0
    rest = [b.indices.tolist() for b in loader]
    s2 = _sampler(table, world=2, rank=1)
    s2.load_state_dict(state)  # refused before: the fingerprint was epoch 1's
    with vbucket.Loader(s2, table["path"], workers=2) as again:
        assert [b.indices.tolist() for b in again] == rest
    assert len(done) == 2


def test_close_keeps_the_position(table):
    s = _sampler(table, world=2, rank=0)
    with vbucket.Loader(s, table["path"], workers=2) as loader:
        for _ in range(3):
            next(loader)
    state = loader.state_dict()  # raised "Loader: closed" before
    assert state["consumed_batches"] == 6
    now = s.state_dict()  # the sampler is where the loader stopped
    assert (now["epoch"], now["consumed_batches"], now["fingerprint"]) == (
        0, 6, state["fingerprint"])
    with pytest.raises(ValueError, match="closed"):
        next(loader)
    assert loader.stats()["batches"] == 3
    # A sampler moved meanwhile is left where it was moved to.
    s = _sampler(table)
    loader = vbucket.Loader(s, table["path"], workers=2)
    next(loader)
    s.set_epoch(3)
    moved = s.state_dict()
    loader.close()
    assert s.state_dict() == moved


def test_close_from_another_thread_raises_in_next(table):
    """close() while the loop waits in next() on another thread: that next() raises, the loop
    does not end as if the epoch had ended."""
    s = _sampler(table)
    total = len(s)
    loader = vbucket.Loader(s, list(table["path"]), workers=1, prefetch=1)
    seen, outcome = [], []
    first = threading.Event()

    def run():
        try:
            for b in loader:
                seen.append(b.step)
                first.set()
            outcome.append("ended")
        except ValueError as e:
            outcome.append(str(e))
        first.set()

    t = threading.Thread(target=run)
    t.start()
    first.wait(30)
    loader.close()
    t.join(30)
    assert not t.is_alive()
    assert len(seen) < total
    assert outcome and outcome[0] != "ended" and "closed" in outcome[0]
    assert loader.state_dict()["consumed_batches"] == len(seen)


# --- substitutes and arguments (issue 29 items 8 and 9) ----------------------------------------


def test_substitutes_avoid_files_that_failed(table):
    """Rows naming the same bad file: a substitute is never another row of that file (nor of a
    file that failed earlier this epoch), so each failure costs one decode."""
    import pandas as pd

    g = _garbled(table)
    df = pd.concat([table] + [table.iloc[[g]]] * 12, ignore_index=True)
    bad = set(np.flatnonzero(df["path"].str.endswith("garbled.mp4").to_numpy()).tolist())
    s = _sampler(df)
    planned_bad = sum(len(bad & set(b[4].tolist())) for b in s.batches())
    assert planned_bad >= 5
    with vbucket.Loader(s, df["path"], workers=2) as loader:
        subs = [sub for b in loader for sub in b.substitutions]
        stats = loader.stats()
    assert len(subs) == planned_bad
    assert all(sub["replacement"] not in bad for sub in subs)
    # Before: candidates that were other rows of garbled.mp4 were decoded and failed again.
    assert stats["failed"] == planned_bad


@pytest.mark.parametrize("kw, message", [
    ({"slots": -1}, r"slots must be an int in \[3, \d+\] \(at least prefetch \+ 1 = 3\), got -1"),
    ({"slots": 2}, r"slots must be an int in \[3, \d+\].*got 2"),
    ({"workers": 2**40}, r"workers must be an int in \[1, 1024\], got 1099511627776"),
    ({"workers": -1}, r"workers must be an int in \[1, 1024\], got -1"),
    ({"prefetch": 2.0}, r"prefetch must be an int in \[1, 65536\], got 2.0"),
    ({"layout": "hwc"}, r"layout must be one of thwc, cthw; got 'hwc'"),
    ({"pin_memory": 1}, r"pin_memory must be True or False, got 1"),
])
def test_bad_arguments_name_the_parameter(table, kw, message):
    with pytest.raises(ValueError, match=message):
        vbucket.Loader(_sampler(table), table["path"], **kw)
