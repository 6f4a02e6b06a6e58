"""Open-Sora's train.py data path (python/tests/opensora_trainpy.py) with vbucket's sampler:
a run stopped after a checkpoint and resumed in a new process trains on exactly the batches
of the uninterrupted run — same world with train.py's loop unchanged, another world size with
the README's one-line change — and the batch counts per epoch are Open-Sora's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter, defaultdict

import pytest

from conftest import CONFIG_360P, SAMPLE_META

torch = pytest.importorskip("torch")

import vbucket  # noqa: E402

DRIVER = os.path.join(os.path.dirname(__file__), "opensora_trainpy.py")

# Every probability 1: the same buckets every epoch, so len(dataloader) taken once (as train.py
# does) is every epoch's length. Batch sizes that leave remainders and a bucket below half a
# batch are avoided here (test_batch_counts covers them).
FIXED_CONFIG = {
    "360p": {"1": [1.0, 20], "51": [1.0, 7], "102": [1.0, 5], "204": [1.0, 3]},
    "144p": {"1": [1.0, 40], "51": [1.0, 12], "102": [1.0, 9], "204": [1.0, 6]},
}


def run_driver(tmp_path, name, *args):
    out = tmp_path / f"{name}.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(vbucket.__path__[0])] +
                                        [p for p in [env.get("PYTHONPATH")] if p])
    r = subprocess.run([sys.executable, DRIVER, "--meta", str(SAMPLE_META), *map(str, args),
                        "--out", str(out)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, f"{name}: {r.stderr[-3000:]}"
    with open(out) as f:
        got = json.load(f)
    run_driver.held = {int(e): h for e, h in got["held"].items()}
    return [(e, s, r, tuple(b)) for e, s, r, b in got["trained"]]


@pytest.fixture(scope="module")
def fixed_config(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "fixed.json"
    path.write_text(json.dumps(FIXED_CONFIG))
    return path


@pytest.mark.parametrize("world,drop_last,stop", [
    (1, False, (0, 9)), (2, False, (0, 4)), (2, True, (1, 6)), (3, True, (0, 0)),
])
def test_same_world_resume_with_trainpy_unchanged(tmp_path, fixed_config, world, drop_last,
                                                  stop):
    common = ["--config", fixed_config, "--world", world, "--seed", 7, "--epochs", 2]
    if drop_last:
        common.append("--drop-last")
    whole = run_driver(tmp_path, "whole", *common)
    first = run_driver(tmp_path, "first", *common, "--save", tmp_path / "ckpt",
                       "--stop-after", f"{stop[0]},{stop[1]}")
    second = run_driver(tmp_path, "second", *common, "--load", tmp_path / "ckpt")
    assert first and second
    assert sorted(first + second) == sorted(whole)
    # and no batch twice within a rank's epoch, none lost
    assert Counter(first + second) == Counter(whole)


def global_sequences(trained, segments):
    """Per epoch, the global batch sequence: {epoch: {position: batch}}. ``segments`` maps a
    run's part to its numbering: a list of (epoch, first step, world, anchor step, anchor
    position) in the order the parts ran; a batch's position is anchor position + (step -
    anchor step) * world + rank."""
    out = defaultdict(dict)
    for epoch, step, rank, batch in trained:
        seg = [s for s in segments if s[0] == epoch and s[1] <= step][-1]
        _, _, world, a_step, a_pos = seg
        pos = a_pos + (step - a_step) * world + rank
        assert pos not in out[epoch], f"epoch {epoch} position {pos} delivered twice"
        out[epoch][pos] = batch
    return out


@pytest.mark.parametrize("old,new,stop_step", [(2, 3, 5), (4, 1, 3), (1, 2, 8), (3, 2, 0)])
def test_resume_under_another_world_is_exact(tmp_path, old, new, stop_step):
    common = ["--config", CONFIG_360P, "--seed", 11, "--epochs", 2, "--len-per-epoch"]
    reference = run_driver(tmp_path, "ref", *common, "--world", 1)
    ref = global_sequences(reference, [(0, 0, 1, 0, 0), (1, 0, 1, 0, 0)])
    first = run_driver(tmp_path, "first", *common, "--world", old, "--save", tmp_path / "ckpt",
                       "--stop-after", f"0,{stop_step}")
    second = run_driver(tmp_path, "second", *common, "--world", new, "--load", tmp_path / "ckpt")
    k = stop_step + 1  # the checkpoint after step stop_step records k steps
    got = global_sequences(first + second, [
        (0, 0, old, 0, 0), (0, k, new, k, k * old), (1, 0, new, 0, 0)])
    for epoch in (0, 1):
        n = len(ref[epoch])
        seq = got[epoch]
        # the uninterrupted run's global sequence, position for position
        assert [seq.get(p) for p in range(n)] == [ref[epoch][p] for p in range(n)], epoch
        # beyond it only the alignment repeats of the last step (fewer than a world)
        extra = [p for p in seq if p >= n]
        assert len(extra) < max(old, new)
        assert all(seq[p] in set(ref[epoch].values()) for p in extra)


def opensora_steps(bucket_sizes, world, drop_last):
    """Open-Sora's VariableVideoBatchSampler.__iter__ arithmetic (DESIGN.md): per bucket of n
    samples and batch size bs, pad with the bucket's first bs - n % bs samples (at most n) or
    drop the remainder; then the access order is padded or cut to a multiple of the world."""
    batches = 0
    for n, bs in bucket_sizes:
        rem = n % bs
        if rem and not drop_last:
            n += min(bs - rem, n)
        elif rem:
            n -= rem
        batches += n // bs
    if drop_last:
        return batches // world
    return -(-batches // world)


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_batch_counts_are_opensoras(sample_df, world, drop_last):
    # bucket sizes from the world-1 plan: distinct samples and batch size of each bucket
    one = vbucket.VariableVideoBatchSampler(sample_df, str(CONFIG_360P), num_replicas=1, rank=0,
                                            seed=3, drop_last=False)
    per_bucket = defaultdict(set)
    bs = {}
    for bucket, _t, _h, _w, idx, _rep in one.batches():
        per_bucket[bucket].update(idx.tolist())
        bs[bucket] = len(idx)
    sizes = [(len(per_bucket[b]), bs[b]) for b in per_bucket]
    # a bucket below half a batch loses samples in Open-Sora (its padding takes list[:bs-rem]):
    # vbucket pads it to a whole batch instead; no such bucket here, so the counts must agree
    small = [(n, b) for n, b in sizes if n % b and n < b - n % b]
    s = vbucket.VariableVideoBatchSampler(sample_df, str(CONFIG_360P), num_replicas=world,
                                          rank=0, seed=3, drop_last=drop_last, num_groups=world)
    steps = len(list(iter(s)))
    expected = opensora_steps(sizes, world, drop_last)
    if drop_last or not small:
        assert steps == expected
    else:
        assert steps >= expected
    assert len(s) == steps  # len() with num_groups = world is the steps of the epoch
    if drop_last:  # the dropped remainders are counted
        st = s.stats()
        assert st["dropped"]["samples"] if "dropped" in st else True


def test_set_epoch_keeps_the_position_and_reset_rewinds(sample_df):
    s = vbucket.VariableVideoBatchSampler(sample_df, str(CONFIG_360P), num_replicas=2, rank=1,
                                          seed=5)
    s.set_epoch(0)
    it = iter(s)
    first = [next(it) for _ in range(4)]
    s.set_epoch(0)  # Open-Sora: sets the number only
    assert s.last_micro_batch_access_index == 8
    assert next(iter(s)) != first[0]
    s.reset()
    assert s.last_micro_batch_access_index == 0
    assert next(iter(s)) == first[0]
    # an epoch iterated to its end starts the next one at its beginning
    s.reset()
    n = len(list(iter(s)))
    s.set_epoch(1)
    assert s.last_micro_batch_access_index == 0 and len(list(iter(s))) > 0 and n > 0


def data_epochs(config, seed, epochs, drop_last):
    """Each data epoch's global batch sequence (world 1, epochs not held): the plan itself."""
    out = []
    for epoch in range(epochs):
        s = vbucket.VariableVideoBatchSampler(
            str(SAMPLE_META), str(config), num_replicas=1, rank=0, seed=seed,
            drop_last=drop_last, output="indices", hold_epochs=False)
        s.set_epoch(epoch)
        out.append([tuple(b) for b in s])
    return out


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("world", [1, 3, 4])
def test_stock_trainpy_with_epochs_of_other_lengths(tmp_path, world, drop_last):
    """The done-when of issue 43: train.py unchanged (len(dataloader) taken once) over 4 epochs
    whose real lengths differ, stopped in epochs 0 and 2 and resumed in new processes: no
    exception, the batches trained are the uninterrupted run's, and against the plan every
    drawn batch is trained once (a long epoch's tail carried into the next), apart from the
    counted repeats (a short epoch filled up, alignment) and the untrained tail at the end."""
    seed, epochs = 0, 4
    data = data_epochs(CONFIG_360P, seed, epochs + 1, drop_last)
    lengths = [len(d) for d in data[:epochs]]
    assert len(set(lengths)) > 1, lengths  # the epochs' real lengths differ
    assert any(n > lengths[0] for n in lengths) and any(n < lengths[0] for n in lengths), lengths
    common = ["--config", CONFIG_360P, "--world", world, "--seed", seed, "--epochs", epochs,
              "--workers", 0]
    if drop_last:
        common.append("--drop-last")
    whole = run_driver(tmp_path, "whole", *common)
    held = run_driver.held
    steps = lengths[0] // world if drop_last else -(-lengths[0] // world)
    parts = []
    for k, (name, stop) in enumerate((("first", "0,5"), ("second", f"2,{steps - 3}"),
                                      ("third", None))):
        # each process its own checkpoint directory (its ranks run one after the other here, and
        # rank 0 writes as it goes, before rank 1 reads the one it resumes from)
        args = list(common) + ["--save", tmp_path / f"ckpt{k}"]
        if parts:
            args += ["--load", tmp_path / f"ckpt{k - 1}"]
        if stop:
            args += ["--stop-after", stop]
        parts += run_driver(tmp_path, name, *args)
    # the resumed run trains exactly the uninterrupted run's batches (repeats included)
    assert Counter(parts) == Counter(whole)
    per_epoch = Counter(e for e, _, _, _ in whole)
    assert all(per_epoch[e] == steps * world for e in range(epochs)), per_epoch
    # against the plan: the data batches from the start to where epoch 4 would start, each once
    end_epoch, end_pos = held[epochs - 1]["end"]
    drawn = [b for e in range(end_epoch) for b in data[e]] + data[end_epoch][:end_pos]
    trained = Counter(b for _, _, _, b in whole)
    repeats = sum(h["repeats"] for h in held.values())
    quota = held[0]["quota"]
    assert quota == lengths[0]
    align = epochs * (steps * world - quota)  # < 0: the incomplete last step, dropped
    missing = Counter(drawn) - trained
    extra = trained - Counter(drawn)
    if drop_last:
        # the incomplete last step of each epoch is dropped (counted), as Open-Sora drops it
        assert sum(missing.values()) == -align
        assert sum(extra.values()) == repeats
    else:
        assert not missing, f"{sum(missing.values())} drawn batches never trained"
        assert sum(extra.values()) == repeats + align
    print(f"world {world} drop_last {drop_last}: epochs of {lengths} global batches held to "
          f"{quota} ({steps} steps); {len(whole)} batches trained, {repeats} counted repeats "
          f"filling short epochs, {max(align, 0)} alignment repeats, {max(-align, 0)} dropped "
          f"with drop_last; carried tails {[held[e]['start'] for e in range(epochs)]}")
