"""VariableVideoBatchSampler: a DataLoader epoch with Open-Sora's string parsing, state_dict
round trips (mid-epoch, another world size, a new process), refused states, bad arguments,
and lifetime (the sampler outlives its DataFrame)."""

from __future__ import annotations

import collections
import gc
import json
import subprocess
import sys
import weakref

import numpy as np
import pandas as pd
import pytest

import vbucket
from conftest import CONFIG_360P, CONFIG_V2, ROOT, SAMPLE_META

torch = pytest.importorskip("torch", reason="the sampler's DataLoader tests need torch")


class OpenSoraLikeDataset(torch.utils.data.Dataset):
    """Parses "index-T-H-W" as Open-Sora's VariableVideoTextDataset.__getitem__ does."""

    def __init__(self, data: pd.DataFrame):
        self.data = data

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        index, num_frames, height, width = [int(val) for val in index.split("-")]
        row = self.data.iloc[index]
        return {"index": index, "shape": torch.tensor([num_frames, height, width]),
                "source_frames": int(row["num_frames"])}


def _sampler(data=SAMPLE_META, **kw):
    kw.setdefault("seed", 3)
    return vbucket.VariableVideoBatchSampler(data, CONFIG_V2, **kw)


def test_is_a_torch_sampler_with_opensoras_shape(sample_df):
    s = vbucket.VariableVideoBatchSampler(OpenSoraLikeDataset(sample_df), CONFIG_V2, 1, 0, True,
                                          3, False)
    assert isinstance(s, torch.utils.data.Sampler)
    assert s.num_replicas == 1 and s.rank == 0 and s.seed == 3
    assert len(s) == s.get_num_batch() > 0


def test_dataloader_epoch_with_two_workers(sample_df):
    ds = OpenSoraLikeDataset(sample_df)
    s = vbucket.VariableVideoBatchSampler(ds, CONFIG_V2, num_replicas=1, rank=0, seed=3)
    loader = torch.utils.data.DataLoader(ds, batch_sampler=s, num_workers=2)
    assert len(loader) == len(s)
    seen = collections.Counter()
    steps = 0
    for batch in loader:
        steps += 1
        shapes = batch["shape"]
        assert (shapes == shapes[0]).all()  # one bucket shape per batch
        t, h, w = shapes[0].tolist()
        assert t <= int(batch["source_frames"].min()) or t == 1
        seen.update(batch["index"].tolist())
    assert steps == len(s)
    st = vbucket.stats(SAMPLE_META, CONFIG_V2, seed=3, rng="numpy")
    # every assigned sample exactly once, apart from the counted pads
    assert len(seen) == st.attrs["total"]["samples"]
    assert sum(seen.values()) == st.attrs["total"]["slots"]
    assert sum(c - 1 for c in seen.values()) == st.attrs["total"]["pads"]


def test_epochs_differ_and_repeat(sample_df):
    s = _sampler(sample_df, output="indices")
    s.set_epoch(0)
    e0 = list(s)
    assert list(s) == e0  # iterating again without set_epoch replays the epoch
    s.set_epoch(1)
    e1 = list(s)
    assert e1 != e0 and sorted(map(tuple, e1)) != sorted(map(tuple, e0))


def test_state_dict_mid_epoch_resumes_exactly():
    s = _sampler(output="indices")
    s.set_epoch(2)
    full = list(s)
    s.set_epoch(2)
    it = iter(s)
    first = [next(it) for _ in range(7)]
    state = s.state_dict()
    assert json.loads(json.dumps(state)) == state  # JSON-serialisable as is
    assert state["consumed_batches"] == 7 and state["epoch"] == 2
    r = _sampler(output="indices")  # a fresh sampler at epoch 0: the state moves it
    r.load_state_dict(state)
    # len() is the epoch's length in its step numbering (Open-Sora's), steps_left() the rest
    assert r.epoch == 2 and len(r) == len(full) and r.steps_left() == len(full) - 7
    assert first + list(r) == full
    # Open-Sora's call: state_dict(num_steps) is the state after num_steps of the epoch
    assert s.state_dict(7)["state"] == state["state"]


def test_state_under_another_world_size_covers_the_rest_exactly_once():
    world_a, world_b, done_steps = 2, 3, 5
    samplers = [_sampler(num_replicas=world_a, rank=r, output="indices") for r in range(world_a)]
    whole = _sampler(num_replicas=1, rank=0, output="indices")
    global_seq = list(whole)  # the global batch sequence (world 1)
    trained = []
    states = []
    for s in samplers:
        it = iter(s)
        trained.append([next(it) for _ in range(done_steps)])
        states.append(s.state_dict())
    assert states[0]["state"] == states[1]["state"]  # any rank's state restores every rank
    rest = []
    for r in range(world_b):
        s = _sampler(num_replicas=world_b, rank=r, output="indices")
        s.load_state_dict(states[r % world_a])
        rest.append(list(s))
    consumed = done_steps * world_a
    # the global batches consumed + the rest dealt round robin = the whole sequence, each once;
    # the last step is completed with repeats of whole batches (counted, at the end)
    interleaved = [rest[r][k] for k in range(len(rest[0])) for r in range(world_b)]
    remaining = global_seq[consumed:]
    assert interleaved[: len(remaining)] == remaining
    repeats = interleaved[len(remaining):]
    assert len(repeats) < world_b and all(b in global_seq for b in repeats)
    done = [trained[r][k] for k in range(done_steps) for r in range(world_a)]
    assert done == global_seq[:consumed]


def test_state_in_a_new_process(tmp_path):
    s = _sampler(output="indices")
    s.set_epoch(1)
    it = iter(s)
    for _ in range(4):
        next(it)
    (tmp_path / "state.json").write_text(json.dumps(s.state_dict()))
    expected = list(it)
    code = f"""
import json, vbucket
s = vbucket.VariableVideoBatchSampler({str(SAMPLE_META)!r}, {str(CONFIG_V2)!r}, seed=3,
                                      output="indices")
s.load_state_dict(json.load(open({str(tmp_path / 'state.json')!r})))
print(json.dumps(list(s)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == expected


def test_state_of_another_plan_is_refused(tmp_path):
    s = _sampler()
    next(iter(s))
    state = s.state_dict()
    with pytest.raises(ValueError, match="seed"):
        _sampler(seed=4).load_state_dict(state)
    with pytest.raises(ValueError, match="fingerprint"):  # another config, same seed and epoch
        vbucket.VariableVideoBatchSampler(SAMPLE_META, CONFIG_360P, seed=3).load_state_dict(state)
    with pytest.raises(ValueError, match="fingerprint"):  # another rng mode
        _sampler(rng="fast").load_state_dict(state)
    with pytest.raises(ValueError, match="balance"):
        _sampler(balance=True).load_state_dict(dict(state, fingerprint=None))
    with pytest.raises(ValueError, match="plan state"):
        _sampler().load_state_dict(dict(state, state="garbage"))
    with pytest.raises(TypeError):
        _sampler().load_state_dict("vbucket-plan seed=3 epoch=0 consumed=1")


def test_opensora_samplers_own_state_is_refused():
    # Open-Sora's sampler saves a position in its own batch order: not this plan's.
    with pytest.raises(ValueError, match="Open-Sora's sampler state"):
        _sampler().load_state_dict({"seed": 3, "epoch": 0, "last_micro_batch_access_index": 6})


def test_opensora_training_script_calls():
    # Open-Sora's train.py saves sampler.state_dict(step) and loads it back into a new sampler
    s = _sampler(num_replicas=2, rank=1, output="indices")
    full = list(s)
    saved = json.loads(json.dumps(s.state_dict(3)))
    r = _sampler(num_replicas=2, rank=1, output="indices")
    r.load_state_dict(saved)
    assert list(r) == full[3:]


def test_big_numpy_seed():
    seed = 2**64 + 5
    s = _sampler(seed=seed, output="indices")
    batches = list(s)
    assert batches and s.state_dict()["seed"] == seed
    with pytest.raises(ValueError, match="64 bits"):
        _sampler(seed=seed, rng="fast")


@pytest.mark.parametrize(
    "kwargs,error,pattern",
    [
        (dict(rule="opensora-v3"), ValueError, "unknown rule"),
        (dict(rng="mt19937"), ValueError, "unknown random source"),
        (dict(policy="keep"), ValueError, "unknown policy"),
        (dict(output="tensors"), ValueError, "output"),
        (dict(shuffle=False), ValueError, "shuffle=False"),
        (dict(seed=-1), ValueError, "non-negative"),
        (dict(seed="3"), TypeError, "seed"),
        (dict(num_replicas=2, rank=2), ValueError, "rank must be an integer from 0 to 1, got 2"),
        (dict(num_replicas=0, rank=0), ValueError, "num_replicas"),
        # The run spec's range for world (its field table), named as the keyword
        (dict(num_replicas=2**24 + 1, rank=0), ValueError,
         "num_replicas must be an integer from 1 to 16777216, got 16777217"),
        (dict(fps_max=0), ValueError, "fps_max"),
        (dict(balance=-2), ValueError, "balance"),
    ],
)
def test_bad_arguments(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        _sampler(**kwargs)


def test_bad_epoch():
    s = _sampler()
    with pytest.raises(ValueError):
        s.set_epoch(-1)
    with pytest.raises(TypeError):
        s.set_epoch("1")


def test_sampler_outlives_its_dataframe():
    df = pd.read_csv(SAMPLE_META)
    ref = weakref.ref(df)
    s = _sampler(df, output="indices")
    expected = list(_sampler(output="indices"))
    df["height"] = 1  # the sampler read its own table at construction
    frames = df["num_frames"].to_numpy()
    if frames.flags.writeable:
        frames[:] = 1  # the column's own buffer (pandas 3's copy-on-write hands out no such view)
    else:
        df.loc[:, "num_frames"] = 1
    assert list(s) == expected
    s.dataset = None  # the only Python reference besides `df` (Open-Sora keeps it too)
    del df
    gc.collect()
    assert ref() is None  # the DataFrame is gone; the sampler owns its table
    s.set_epoch(0)
    assert list(s) == expected


def test_iterator_outlives_its_sampler():
    s = _sampler(output="indices")
    expected = list(_sampler(output="indices"))
    it = iter(s)
    first = next(it)
    del s
    gc.collect()
    assert [first, *it] == expected


def test_verify_same_plan_without_a_process_group():
    s = _sampler()
    assert s.verify_same_plan() == s.fingerprint()
    assert s.fingerprint().startswith("0x") and len(s.fingerprint()) == 18


def _verify_worker(rank, world, port, seeds, results):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        s = vbucket.VariableVideoBatchSampler(str(SAMPLE_META), str(CONFIG_V2), seed=seeds[rank])
        assert s.num_replicas == world and s.rank == rank  # from torch.distributed
        try:
            results[rank] = ("ok", s.verify_same_plan())
        except RuntimeError as e:
            results[rank] = ("error", str(e))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("seeds,agree", [((3, 3, 3), True), ((3, 3, 4), False)])
def test_verify_same_plan_all_gathers(seeds, agree):
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    manager = mp.Manager()
    results = manager.dict()
    mp.spawn(_verify_worker, args=(3, port, seeds, results), nprocs=3, join=True)
    kinds = {results[r][0] for r in range(3)}
    if agree:
        assert kinds == {"ok"} and len({results[r][1] for r in range(3)}) == 1
    else:
        assert kinds == {"error"}
        assert all("rank 2 has" in results[r][1] and "rank 1 has" not in results[r][1]
                   for r in range(3))


def test_opensora_2_constructor_and_attributes(sample_df, capsys):
    ds = OpenSoraLikeDataset(sample_df)
    ds.fps_max = 8  # Open-Sora 2.0's sampler reads fps_max from its dataset
    s = vbucket.VariableVideoBatchSampler(ds, CONFIG_V2, num_replicas=1, rank=0, shuffle=True,
                                          seed=3, drop_last=False, verbose=True,
                                          num_bucket_build_workers=4, num_groups=1,
                                          output="indices")
    explicit = _sampler(fps_max=8, output="indices")
    default = _sampler(output="indices")
    assert s.fingerprint() == explicit.fingerprint() != default.fingerprint()
    full = list(s)
    assert "Buckets" in capsys.readouterr().out  # verbose: rank 0 prints the bucket table
    s.set_step(5)
    assert s.last_micro_batch_access_index == 5 and list(s) == full[5:]
    s.last_micro_batch_access_index = 2
    assert list(s) == full[2:]
    s.reset()
    assert len(s) == len(full)
    # num_groups divides len() only (train.py passes the data-parallel size)
    assert len(_sampler(fps_max=8, num_groups=2)) == len(full) // 2
    with pytest.raises(ValueError, match="num_groups must be an integer from 1"):
        _sampler(num_groups=0)


def test_planning_releases_the_gil():
    # While one thread plans an epoch in C++, another runs Python: with the GIL held there
    # would be no Python step of the main thread between the call's start and end.
    import threading
    import time

    from vbucket.bench import synthetic

    meta = synthetic(2_000_000)
    s = vbucket.VariableVideoBatchSampler(meta, CONFIG_V2, seed=1, rng="fast", threads=1)
    window = {}

    def plan():
        window["start"] = time.perf_counter()
        s.fingerprint()  # assigns, plans and hashes the epoch
        window["end"] = time.perf_counter()

    t = threading.Thread(target=plan)
    stamps = []
    t.start()
    while t.is_alive():
        stamps.append(time.perf_counter())
    t.join()
    inside = [x for x in stamps if window["start"] < x < window["end"]]
    points = [window["start"], *inside, window["end"]]
    longest_pause = max(b - a for a, b in zip(points, points[1:]))
    duration = window["end"] - window["start"]
    assert duration > 0.02  # a call long enough to see
    # Holding the GIL, the call would pause the main thread for about its whole duration.
    assert longest_pause < 0.5 * duration, (longest_pause, duration)


def test_chunk_rows_streams_a_csv_path_with_the_same_batches():
    """chunk_rows (a run field): a CSV path is read that many rows at a time at each epoch's
    planning instead of held; the batches are the same."""
    whole = vbucket.VariableVideoBatchSampler(str(SAMPLE_META), CONFIG_360P, num_replicas=2,
                                              rank=1, seed=3, output="indices")
    chunked = vbucket.VariableVideoBatchSampler(str(SAMPLE_META), CONFIG_360P, num_replicas=2,
                                                rank=1, seed=3, output="indices", chunk_rows=7)
    assert whole._s.table() is not None and chunked._s.table() is None
    assert list(chunked) == list(whole) != []
    with pytest.raises(ValueError, match="chunk_rows: expected an integer from 1 to"):
        vbucket.VariableVideoBatchSampler(str(SAMPLE_META), CONFIG_360P, chunk_rows=0)
