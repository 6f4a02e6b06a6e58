"""vbucket.Loader over a packing sampler (``batching="packed"``) and media generated with the
ffmpeg CLI: each batch is one flat buffer with the sampler's mixed shapes back to back; offsets,
cu_seqlens and max_seqlen recomputed here from the documented formulas; per-clip views alias
the buffer; images equal decode_clip's bytes; the corrupt file is replaced by a sample of its own
bucket and counted; state_dict resumes exactly."""

from __future__ import annotations

import numpy as np
import pytest

import vbucket
from vbucket import _vbucket

pytestmark = pytest.mark.skipif(not getattr(_vbucket, "HAS_FFMPEG", False),
                                reason="vbucket built without the FFmpeg adapter")
torch = pytest.importorskip("torch")

CONFIG = {"256px": {"1": (1.0, 5), "5": (1.0, 3), "9": (0.5, 2), "17": (1.0, 2)}}
BUDGET = 2600.0  # latent tokens: 1 to 10 clips of the 256px buckets a batch


@pytest.fixture(scope="session")
def scanned(media):
    return vbucket.scan(media, progress=False)


def _sampler(df, world, rank, seed=5):
    return vbucket.VariableVideoBatchSampler(df, CONFIG, num_replicas=world, rank=rank, seed=seed,
                                             rng="fast", batching="packed", token_budget=BUDGET)


def _seqlen(t, h, w):
    return (1 + (t - 1) // 4) * -(-h // 16) * -(-w // 16)


def _garbled_seed(df):
    i = int(np.flatnonzero(df["path"].str.endswith("garbled.mp4").to_numpy())[0])
    seed = next(s for s in range(100)
                if vbucket.assign(df, CONFIG, seed=s, rng="fast", as_arrays=True)[i] >= 0)
    return i, seed


def test_packed_loader_layout_bytes_and_substitution(scanned):
    garbled, seed = _garbled_seed(scanned)
    ids = vbucket.assign(scanned, CONFIG, seed=seed, rng="fast", as_arrays=True)
    delivered, subs_total, mixed = set(), 0, 0
    for rank in (0, 1):
        planned = [[tuple(int(v) for v in x.split("-")) for x in b]
                   for b in _sampler(scanned, 2, rank, seed)]
        with vbucket.Loader(_sampler(scanned, 2, rank, seed), scanned["path"], workers=2) as ld:
            n = 0
            for b, want in zip(ld, planned):
                n += 1
                assert b.packed and b.tensor.dim() == 1 and b.tensor.dtype == torch.uint8
                thw = [(t, h, w) for _, t, h, w in want]
                mixed += len(set(thw)) > 1
                assert b.thw == thw  # never short, shapes as planned
                assert b.planned.tolist() == [i for i, *_ in want]
                sizes = [t * h * w * 3 for t, h, w in thw]
                assert b.offsets == [sum(sizes[:k]) for k in range(len(sizes) + 1)]
                assert b.tensor.numel() == sum(sizes)
                lens = [_seqlen(*s) for s in thw]
                assert b.cu_seqlens.dtype == torch.int32
                assert b.cu_seqlens.tolist() == [sum(lens[:k]) for k in range(len(lens) + 1)]
                assert b.max_seqlen == max(lens)
                for k, (t, h, w) in enumerate(thw):
                    v = b.tensors[k]
                    assert tuple(v.shape) == (t, h, w, 3)
                    assert v.data_ptr() == b.tensor.data_ptr() + b.offsets[k]  # a view
                    i = int(b.indices[k])
                    assert ids[i] == ids[want[k][0]]  # the planned bucket, substituted or not
                    if t == 1 and i != garbled:
                        ref = vbucket.decode_clip(scanned["path"][i], 0, 1, 1, (h, w),
                                                  filter="opensora")  # the Loader's default
                        assert v.numpy().tobytes() == ref.tobytes()
                for sub in b.substitutions:
                    assert sub["failed"] == garbled and sub["replacement"] != garbled
                    assert int(b.indices[sub["clip"]]) == sub["replacement"]
                subs_total += len(b.substitutions)
                delivered |= set(b.indices.tolist())
            assert n == len(planned)
            st = ld.stats()
            assert st["batches"] == n and st["substitutions"] >= 0
    assert mixed > 0
    assert subs_total >= 1 and garbled not in delivered
    assert delivered == set(np.flatnonzero(ids >= 0).tolist()) - {garbled}


def test_packed_loader_float32_and_resume(scanned):
    full = [(b.indices.tolist(), b.tensor.clone(), b.position)
            for b in vbucket.Loader(_sampler(scanned, 2, 1), scanned["path"], workers=2)]
    k = len(full) // 2
    loader = vbucket.Loader(_sampler(scanned, 2, 1), scanned["path"], workers=2)
    for _ in range(k):
        next(loader)
    state = loader.state_dict()
    loader.close()
    assert state["consumed_batches"] == 2 * k
    s2 = _sampler(scanned, 2, 1)
    s2.load_state_dict(state)
    mean, std = (0.1, 0.2, 0.3), (0.5, 0.25, 0.2)
    rest = vbucket.Loader(s2, scanned["path"], workers=3, prefetch=1, dtype="float32",
                          layout="cthw", mean=mean, std=std)
    got = 0
    for (idx, u8, pos), b in zip(full[k:], rest):
        assert b.position == pos and b.indices.tolist() == idx
        assert b.tensor.dtype == torch.float32 and b.tensor.numel() == u8.numel()
        for v, (t, h, w), o0, o1 in zip(b.tensors, b.thw, b.offsets, b.offsets[1:]):
            assert tuple(v.shape) == (3, t, h, w)
            x = u8[o0:o1].view(t, h, w, 3).permute(3, 0, 1, 2).double() / 255
            ref = (x - torch.tensor(mean, dtype=torch.float64).view(3, 1, 1, 1)) / torch.tensor(
                std, dtype=torch.float64).view(3, 1, 1, 1)
            assert torch.allclose(v.double(), ref, atol=1e-5)
        got += 1
    assert got == len(full) - k > 0


@pytest.mark.parametrize("dtype,layout", [("uint8", "thwc"), ("float32", "cthw")])
def test_packed_loader_pin_memory(scanned, dtype, layout):
    """pin_memory=True with packed batches (a GPU): the flat buffer, its per-clip views and
    cu_seqlens on the device, equal to the host loader's."""
    if not torch.cuda.is_available():
        pytest.skip("pin_memory=True: no CUDA torch or GPU here")
    loader = vbucket.Loader(_sampler(scanned, 1, 0), scanned["path"], pin_memory=True,
                            dtype=dtype, layout=layout, prefetch=1, slots=2)
    ref = vbucket.Loader(_sampler(scanned, 1, 0), scanned["path"], dtype=dtype, layout=layout)
    n = 0
    for a, b in zip(loader, ref):
        assert a.packed and a.tensor.is_cuda and a.tensor.dim() == 1
        assert torch.equal(a.tensor.cpu(), b.tensor)
        assert a.cu_seqlens.is_cuda and torch.equal(a.cu_seqlens.cpu(), b.cu_seqlens)
        assert a.max_seqlen == b.max_seqlen and a.offsets == b.offsets and a.thw == b.thw
        assert len(a.tensors) == len(b.tensors)
        for x, y in zip(a.tensors, b.tensors):
            assert x.is_cuda and x.shape == y.shape and torch.equal(x.cpu(), y)
            assert x.untyped_storage().data_ptr() == a.tensor.untyped_storage().data_ptr()
        n += 1
    assert n == len(ref) > 0
