"""vbucket.scan, vbucket.decode_clip and vbucket.Loader over media generated with the ffmpeg CLI
(tests/e2e/make_dataset.sh): the scan against `vbucket scan`, clips against `vbucket decode`'s
bytes, an epoch over world 2, mid-epoch resume, corrupt files, and the tensor-lifetime rule."""

from __future__ import annotations

import gc
import os
import shutil
import sys
import time

import numpy as np
import pytest

import vbucket
from vbucket import _vbucket

from conftest import run_cli

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter")

# Buckets the generated media fill (every good file is large enough for 256px).
CONFIG = {"256px": {"1": (1.0, 5), "5": (1.0, 3), "9": (0.5, 2), "17": (1.0, 2)}}


@pytest.fixture(scope="session")
def scanned(media):
    return vbucket.scan(media, progress=False)


def _sampler(df, world, rank, seed=5, **kw):
    return vbucket.VariableVideoBatchSampler(df, CONFIG, num_replicas=world, rank=rank, seed=seed,
                                             rng="fast", **kw)


# --- scan --------------------------------------------------------------------------------------


def test_scan_matches_the_cli(cli, media, scanned, tmp_path):
    csv = tmp_path / "meta.csv"
    run_cli(cli, "scan", media, "--out", csv)
    import pandas as pd

    ref = pd.read_csv(csv, keep_default_na=False, na_values=[""])
    assert list(scanned.columns[:8]) == ["path", "num_frames", "height", "width", "fps",
                                         "duration", "codec", "error"]
    assert list(scanned["path"]) == list(ref["path"])
    good = scanned["error"] == ""
    # make_dataset.sh: 48 videos, 12 images, garbled.mp4 (probes fine) and three unusable files
    assert good.sum() == 61 and (~good).sum() == 3
    assert (ref["error"].fillna("") != "").tolist() == (~good).tolist()
    for c in ("num_frames", "height", "width"):
        assert scanned.loc[good, c].astype(int).tolist() == ref.loc[good, c].astype(int).tolist()
        assert scanned.loc[~good, c].isna().all()
    np.testing.assert_allclose(scanned.loc[good, "fps"].to_numpy(float),
                               ref.loc[good, "fps"].to_numpy(float), equal_nan=True, rtol=1e-6)
    assert scanned.loc[good, "codec"].tolist() == ref.loc[good, "codec"].tolist()
    for path, err in zip(scanned.loc[~good, "path"], scanned.loc[~good, "error"]):
        assert err.startswith(path + ": ")


def test_scan_inputs(media, scanned, tmp_path):
    paths = list(scanned["path"][:5])
    by_list = vbucket.scan(paths, threads=2, progress=False)
    assert list(by_list["path"]) == paths
    listing = tmp_path / "list.txt"
    listing.write_text("# files\n" + "\n".join(paths) + "\n\n")
    by_file = vbucket.scan(listing, progress=False)
    assert by_file.drop(columns="path").equals(by_list.drop(columns="path"))
    with pytest.raises(ValueError, match="nowhere: no such file or directory"):
        vbucket.scan(str(tmp_path / "nowhere"), progress=False)
    with pytest.raises(ValueError, match="threads"):
        vbucket.scan(paths, threads=-1, progress=False)
    with pytest.raises(TypeError, match="source 1"):
        vbucket.scan([paths[0], 3], progress=False)


def test_scan_progress_without_tqdm(scanned, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # import fails: the plain count
    vbucket.scan(list(scanned["path"][:6]), progress=True)
    assert "scan: 6/6 files" in capsys.readouterr().err
    vbucket.scan(list(scanned["path"][:6]), progress=False)
    assert capsys.readouterr().err == ""


def test_scan_progress_with_tqdm(scanned, capsys):
    pytest.importorskip("tqdm")
    vbucket.scan(list(scanned["path"][:6]), progress=True)
    err = capsys.readouterr().err
    assert "6/6" in err and "scan" in err


def _threads():
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_scan_interrupted_stops_cleanly(scanned, monkeypatch):
    # Ctrl-C arrives as KeyboardInterrupt in the polling loop: simulated by the progress update.
    paths = list(scanned["path"]) * 300
    before = _threads()
    calls = []

    def interrupt(self, done):
        calls.append(done)
        raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # tqdm's monitor is a thread of its own
    monkeypatch.setattr(vbucket.media._Progress, "update", interrupt)
    with pytest.raises(KeyboardInterrupt):
        vbucket.scan(paths, threads=2, progress=True)
    assert calls and calls[0] < len(paths)  # it was interrupted mid-scan
    assert _threads() == before  # every probing thread joined


SCAN_UNTIL_INTERRUPTED = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored
import vbucket
paths = sys.argv[1:] * 400
vbucket.scan(paths[:1], threads=2, progress=False)  # libraries start their threads lazily
baseline = len(os.listdir("/proc/self/task"))  # the interpreter's and its libraries' threads
print("scanning", flush=True)
t0 = time.perf_counter()
try:
    vbucket.scan(paths, threads=2, progress=False)
    print("finished")
except KeyboardInterrupt:
    print("interrupted", time.perf_counter() - t0, len(os.listdir("/proc/self/task")) - baseline)
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_scan_stops_on_a_real_ctrl_c(scanned):
    import signal
    import subprocess

    p = subprocess.Popen([sys.executable, "-c", SCAN_UNTIL_INTERRUPTED, *scanned["path"]],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "scanning"
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    words = out.split()
    assert words[0] == "interrupted", out
    assert float(words[1]) < 10  # stopped at once, not after the 25 600 files
    assert int(words[2]) <= 0  # no prober (nor the scan's runner) left


def test_scan_is_sampler_metadata(scanned):
    s = _sampler(scanned, 1, 0)
    bad = set(np.flatnonzero((scanned["error"] != "").to_numpy()))
    used = {int(i) for b in s.batches() for i in b[4]}
    assert used and not (used & bad)


# --- decode_clip -------------------------------------------------------------------------------


def _cli_decode(cli, tmp_path, path, start, frames, interval, h, w, *extra):
    out = tmp_path / "clip.rgb"
    run_cli(cli, "decode", path, "--start", start, "--frames", frames, "--interval", interval,
            "--size", f"{h}x{w}", "--out", out, *extra)
    return out.read_bytes()


@pytest.mark.parametrize("which,start,frames,interval,size,layout", [
    ("clip_00_", 0, 4, 2, (64, 96), "thwc"),
    ("clip_05_", 3, 5, 1, (48, 48), "cthw"),  # rotated
    ("clip_13_", 1, 3, 3, (80, 40), "thwc"),  # mpeg4
    ("image_03_", 0, 1, 1, (32, 56), "cthw"),
])
def test_decode_clip_equals_cli_bytes(cli, scanned, tmp_path, which, start, frames, interval,
                                      size, layout):
    path = next(p for p in scanned["path"] if os.path.basename(p).startswith(which))
    a = vbucket.decode_clip(path, start, frames, interval, size, layout)
    h, w = size
    assert a.dtype == np.uint8
    assert a.shape == ((frames, h, w, 3) if layout == "thwc" else (3, frames, h, w))
    assert a.flags.c_contiguous and a.flags.writeable
    ref = _cli_decode(cli, tmp_path, path, start, frames, interval, h, w, "--layout", layout)
    assert a.tobytes() == ref


def test_decode_clip_pad_and_errors(cli, scanned, tmp_path):
    row = scanned[scanned["path"].str.contains("clip_00_")].iloc[0]
    n = int(row["num_frames"])
    with pytest.raises(vbucket.DecodeError, match="too short"):
        vbucket.decode_clip(row["path"], n - 2, 4, 1, (32, 32))
    padded = vbucket.decode_clip(row["path"], n - 2, 4, 1, (32, 32), pad=True)
    assert padded.tobytes() == _cli_decode(cli, tmp_path, row["path"], n - 2, 4, 1, 32, 32,
                                           "--pad")
    assert (padded[3] == padded[1]).all()  # the last frame repeated
    garbled = next(p for p in scanned["path"] if p.endswith("garbled.mp4"))
    with pytest.raises(vbucket.DecodeError) as e:
        vbucket.decode_clip(garbled, 0, 2, 1, (64, 64))
    msg = str(e.value)
    assert msg.startswith(garbled + ": ") and "\n" not in msg
    r = run_cli(cli, "decode", garbled, "--start", 0, "--frames", 2, "--interval", 1, "--size",
                "64x64", "--out", tmp_path / "x.rgb", check=False)
    assert r.returncode == 1 and msg in r.stderr  # the adapter's message, as the CLI prints it
    with pytest.raises(vbucket.DecodeError, match="missing.mp4"):
        vbucket.decode_clip(tmp_path / "missing.mp4", 0, 1, 1, (8, 8))
    with pytest.raises(ValueError, match="layout"):
        vbucket.decode_clip(row["path"], 0, 1, 1, (8, 8), layout="hwc")
    with pytest.raises(ValueError, match="frames"):
        vbucket.decode_clip(row["path"], 0, 0, 1, (8, 8))
    with pytest.raises(TypeError, match="size"):
        vbucket.decode_clip(row["path"], 0, 1, 1, 8)


# --- Loader ------------------------------------------------------------------------------------

torch = pytest.importorskip("torch")


def _kept(b):
    """The batch with a copy of its tensor: holding the batches themselves would hold every
    staging slot (the documented rule; see test_held_batches_raise_instead_of_hanging)."""
    b.tensor = b.tensor.clone()
    return b


def _epoch(df, world, rank, seed=5, **kw):
    s = _sampler(df, world, rank, seed=seed)
    with vbucket.Loader(s, df["path"], workers=2, **kw) as loader:
        batches = [_kept(b) for b in loader]
        stats = loader.stats()
    return batches, stats


def _seed_sampling(df, path_end):
    """The first seed whose assignment puts the file ending in `path_end` in a bucket (the 9
    frame buckets keep half their candidates)."""
    i = int(np.flatnonzero(df["path"].str.endswith(path_end).to_numpy())[0])
    return next(s for s in range(100)
                if vbucket.assign(df, CONFIG, seed=s, rng="fast", as_arrays=True)[i] >= 0)


def test_loader_world2_epoch_delivers_every_sample(scanned):
    seed = _seed_sampling(scanned, "garbled.mp4")
    bucket_size = {}
    for res, cfg in CONFIG.items():
        for frames, (_, bs) in cfg.items():
            bucket_size[int(frames)] = bs
    delivered, planned = set(), set()
    garbled = int(np.flatnonzero(scanned["path"].str.endswith("garbled.mp4").to_numpy())[0])
    subs_total = 0
    steps = []
    for rank in (0, 1):
        batches, stats = _epoch(scanned, 2, rank, seed=seed, dtype="uint8")
        steps.append(len(batches))
        for b in batches:
            t, h, w = b.thw
            assert b.tensor.dtype == torch.uint8
            assert tuple(b.tensor.shape) == (bucket_size[t], t, h, w, 3)  # never short
            assert len(b.indices) == len(b.planned) == bucket_size[t]
            planned |= set(b.planned.tolist())
            delivered |= set(b.indices.tolist())
            for sub in b.substitutions:
                assert sub["failed"] == garbled and sub["replacement"] != garbled
                assert b.indices[sub["clip"]] == sub["replacement"]
                assert sub["error"].startswith(scanned["path"][garbled] + ": ")
            subs_total += len(b.substitutions)
        assert stats["substitutions"] == sum(len(b.substitutions) for b in batches)
        assert stats["failed"] >= stats["substitutions"]
        assert stats["batches"] == len(batches)
    assert steps[0] == steps[1]
    ids = vbucket.assign(scanned, CONFIG, seed=seed, rng="fast", as_arrays=True)
    expected = set(np.flatnonzero(ids >= 0).tolist())
    assert planned == expected  # every bucketed sample, on one rank or the other
    assert garbled in planned and garbled not in delivered and subs_total >= 1
    assert delivered == expected - {garbled}


def test_loader_tensor_values(scanned):
    # Images (T = 1) start at frame 0: each clip is decode_clip's, independently of the crop.
    s = _sampler(scanned, 1, 0)
    mean, std = (0.1, 0.2, 0.3), (0.5, 0.25, 0.2)
    u8 = vbucket.Loader(s, scanned["path"], workers=2)
    f32 = vbucket.Loader(s, scanned["path"], workers=2, dtype="float32", layout="cthw", mean=mean,
                         std=std)
    bf16 = vbucket.Loader(s, scanned["path"], workers=2, dtype="bfloat16")
    checked = 0
    for a, b, c in zip(u8, f32, bf16):
        assert b.tensor.dtype == torch.float32 and c.tensor.dtype == torch.bfloat16
        assert tuple(b.tensor.shape) == (a.tensor.shape[0], 3, *a.thw)
        x = a.tensor.permute(0, 4, 1, 2, 3).double() / 255
        ref = (x - torch.tensor(mean, dtype=torch.float64).view(1, 3, 1, 1, 1)) / torch.tensor(
            std, dtype=torch.float64).view(1, 3, 1, 1, 1)
        assert torch.allclose(b.tensor.double(), ref, atol=1e-5)
        assert torch.equal(c.tensor, ((a.tensor.float() / 255 - 0.5) / 0.5).bfloat16())
        if a.thw[0] == 1:
            for k, i in enumerate(a.indices):
                ref = vbucket.decode_clip(scanned["path"][int(i)], 0, 1, 1, a.thw[1:],
                                          filter="opensora")
                assert a.tensor[k].numpy().tobytes() == ref.tobytes()
                checked += 1
    assert checked >= 5


def test_loader_resumes_mid_epoch_exactly(scanned):
    full, _ = _epoch(scanned, 2, 1)
    k = len(full) // 2
    s = _sampler(scanned, 2, 1)
    loader = vbucket.Loader(s, scanned["path"], workers=2)
    for _ in range(k):
        next(loader)
    state = loader.state_dict()
    loader.close()
    assert state["consumed_batches"] == 2 * k
    ref = _sampler(scanned, 2, 1)  # the sampler itself after k batches: the same state
    batches = iter(ref)
    for _ in range(k):
        next(batches)
    assert ref.state_dict() == state
    s2 = _sampler(scanned, 2, 1)
    s2.load_state_dict(state)
    rest = [_kept(b) for b in vbucket.Loader(s2, scanned["path"], workers=3, prefetch=1)]
    assert len(rest) == len(full) - k
    for a, b in zip(full[k:], rest):
        assert a.position == b.position and a.bucket == b.bucket  # (steps count from the state)
        assert a.indices.tolist() == b.indices.tolist()
        assert torch.equal(a.tensor, b.tensor)  # the same frames (crops seeded per sample)


def test_tensor_outlives_the_loader(scanned):
    # The documented rule: a tensor is valid while referenced, after the loader is gone.
    s = _sampler(scanned, 1, 0)
    loader = vbucket.Loader(s, scanned["path"], workers=2)
    kept = next(loader).tensor[1:]  # a view keeps the batch too
    copy = kept.clone()
    del loader
    gc.collect()
    churn = vbucket.Loader(_sampler(scanned, 1, 0, seed=9), scanned["path"], workers=2)
    for b in churn:  # other batches are decoded into other memory
        b.tensor.fill_(7)
    del churn
    assert torch.equal(kept, copy)


def test_held_batches_raise_instead_of_hanging(scanned):
    s = _sampler(scanned, 1, 0)
    loader = vbucket.Loader(s, scanned["path"], workers=2, prefetch=1)  # slots = 3
    held = [next(loader) for _ in range(3)]
    with pytest.raises(RuntimeError, match="all 3 staging slots are held"):
        next(loader)
    del held[0]
    assert next(loader).step == 3  # a slot came back: the loader goes on where it was
    held[0].tensor.clone()
    loader.close()
    loader.close()
    with pytest.raises(ValueError, match="closed"):
        next(loader)


def test_loader_errors(scanned):
    s = _sampler(scanned, 1, 0)
    with pytest.raises(ValueError, match="the sources give 63 clips but the metadata has 64 rows"):
        vbucket.Loader(s, scanned["path"][:-1])
    with pytest.raises(TypeError, match="source 2 must be a str or os.PathLike"):
        vbucket.Loader(s, list(scanned["path"][:2]) + [float("nan")] + list(scanned["path"][3:]))
    with pytest.raises(TypeError, match="VariableVideoBatchSampler"):
        vbucket.Loader(object(), scanned["path"])
    with pytest.raises(ValueError, match="dtype"):
        vbucket.Loader(s, scanned["path"], dtype="float16")
    with pytest.raises(ValueError, match="workers"):
        vbucket.Loader(s, scanned["path"], workers=0)
    with pytest.raises(ValueError, match="std"):
        vbucket.Loader(s, scanned["path"], dtype="float32", std=(1, 0, 1))


def test_pin_memory_without_gpu(scanned):
    """Where torch or the machine has no CUDA: pin_memory=True is refused with the reason, and
    the extension's pinned staging (built whenever the CUDA toolkit was found) refuses to start
    without a device instead of failing later."""
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: test_pin_memory runs the real path")
    s = _sampler(scanned, 1, 0)
    with pytest.raises(RuntimeError, match="pin_memory=True needs a CUDA-enabled torch"):
        vbucket.Loader(s, scanned["path"], pin_memory=True)
    core = s._s
    args = (core, list(scanned["path"]), False, 1, 1, 3, "uint8", "thwc", (0.5,) * 3,
            (0.5,) * 3, 0, [], True, "opensora", {})
    if vbucket.HAS_CUDA:
        with pytest.raises(ValueError, match="pin_memory=True: no CUDA device can be used"):
            _vbucket.Loader(*args)
    else:
        with pytest.raises(ValueError, match="no CUDA adapter"):
            _vbucket.Loader(*args)


@pytest.mark.parametrize("dtype,layout", [("uint8", "thwc"), ("float32", "cthw"),
                                          ("bfloat16", "thwc")])
def test_pin_memory(scanned, dtype, layout):
    """pin_memory=True on a GPU: device tensors equal to the host loader's, bit for bit, staged
    through vbucket's pinned ring when the CUDA adapter is built in; device batches do not hold
    staging slots, so keeping more of them alive than there are slots is fine."""
    if not torch.cuda.is_available():
        pytest.skip("pin_memory=True: no CUDA torch or GPU here (test_pin_memory_without_gpu "
                    "checks the error paths)")
    loader = vbucket.Loader(_sampler(scanned, 2, 1), scanned["path"], pin_memory=True,
                            dtype=dtype, layout=layout, prefetch=1, slots=2, workers=2)
    assert (loader._stream is not None) == vbucket.HAS_CUDA
    ref = vbucket.Loader(_sampler(scanned, 2, 1), scanned["path"], dtype=dtype, layout=layout)
    kept = []
    n = 0
    for a, b in zip(loader, ref):
        assert a.tensor.is_cuda and a.tensor.device.index == torch.cuda.current_device()
        assert a.tensor.dtype == b.tensor.dtype and a.tensor.shape == b.tensor.shape
        assert torch.equal(a.tensor.cpu(), b.tensor)
        assert list(a.indices) == list(b.indices)
        kept.append(a)  # more than `slots` device batches alive at once
        n += 1
    assert n == len(ref) and n > 2
    assert loader._core.held == 0
    # Still intact after the loader is gone (PyTorch owns device tensors).
    copies = [k.tensor.clone() for k in kept]
    loader.close()
    del loader
    for k, c in zip(kept, copies):
        assert torch.equal(k.tensor, c)


def test_pin_memory_stream_order(scanned):
    """Work queued on PyTorch's current stream after next() sees the copied batch, also when
    the current stream is busy when the batch arrives (the copy runs on the loader's stream)."""
    if not torch.cuda.is_available() or not vbucket.HAS_CUDA:
        pytest.skip("needs a GPU and the CUDA adapter")
    loader = vbucket.Loader(_sampler(scanned, 1, 0), scanned["path"], pin_memory=True,
                            dtype="float32")
    ref = vbucket.Loader(_sampler(scanned, 1, 0), scanned["path"], dtype="float32")
    side = torch.cuda.Stream()
    big = torch.randn(4096, 4096, device="cuda")
    for a, b in zip(loader, ref):
        for _ in range(4):  # keep the current stream busy while the copy is queued
            big = big @ big / 64
        with torch.cuda.stream(side):
            side.wait_stream(torch.cuda.current_stream())
            total = a.tensor.double().sum()
        assert total.item() == b.tensor.double().sum().item()


LOAD_UNTIL_INTERRUPTED = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import vbucket
meta = vbucket.scan([sys.argv[1]] * 100, progress=False)
sampler = vbucket.VariableVideoBatchSampler(meta, {"720p": {"33": (1.0, 1)}}, seed=1,
                                            num_replicas=1, rank=0)
baseline = len(os.listdir("/proc/self/task"))
loader = vbucket.Loader(sampler, meta["path"], workers=1, prefetch=1)
print("loading", flush=True)
t0 = time.perf_counter()
result = ["finished"]
received = 0
batch = None  # no batch may have arrived before the signal on a loaded machine
try:
    for batch in loader:
        received += 1
except KeyboardInterrupt:
    seconds = time.perf_counter() - t0
    state = loader.state_dict()["consumed_batches"]
    try:
        next(loader)
        after = "went on"
    except ValueError as e:
        after = "refused" if "KeyboardInterrupt" in str(e) else str(e)
    result = ["interrupted", seconds, state, after, received]
del loader, batch  # the last references: the staging ring's thread goes with them
print(*result, len(os.listdir("/proc/self/task")) - baseline)
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_loader_stops_on_a_real_ctrl_c(tmp_path):
    # 720p clips take a while to decode: the signal arrives while the loader waits for a batch.
    import signal
    import subprocess

    if shutil.which("ffmpeg") is None:
        pytest.skip("the ffmpeg command is needed")
    clip = tmp_path / "hd.mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i",
                    "testsrc2=size=1280x720:rate=30", "-t", "3", "-c:v", "libx264", "-preset",
                    "ultrafast", "-g", "90", "-pix_fmt", "yuv420p", str(clip)], check=True)
    p = subprocess.Popen([sys.executable, "-c", LOAD_UNTIL_INTERRUPTED, str(clip)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "loading"
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    words = out.split()
    assert words[0] == "interrupted", out
    assert int(words[2]) < 100  # mid-epoch
    assert words[3] == "refused"  # the loader stopped; its state_dict is for a resume
    # The state counts exactly the batches the loop received: a Ctrl-C arriving as a batch
    # becomes ready loses nothing on resume.
    assert int(words[2]) == int(words[4])
    assert int(words[5]) == 0  # every thread joined


def test_scan_progress_rate_is_windowed_and_waits_a_second(capsys):
    """The progress line's rate: "—" during the first second (a jump of the count over 0.1 s
    read as 403010 file/s in tqdm's rate), then files per second over the last few seconds."""
    from vbucket import media

    now = [100.0]
    p = media._Progress(1_000_000, True, clock=lambda: now[0])
    if p.bar is not None:
        p.bar.close()
    p.bar = None  # the plain count on stderr, whether or not tqdm is installed
    now[0] = 100.1
    p.update(40301)
    assert p.rate() == "— file/s"
    for k in range(1, 101):  # then 100 files a second for 10 s
        now[0] = 100.1 + 0.1 * k
        p.update(40301 + 10 * k)
    assert p.rate() == "100 file/s"
    p.close()
    assert "40301/1000000 files, — file/s" in capsys.readouterr().err
