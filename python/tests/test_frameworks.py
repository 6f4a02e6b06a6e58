"""The drop-in sampler under the data loaders video trainers use: torchdata's
StatefulDataLoader (exact mid-epoch resume with workers and prefetch) and HF Accelerate
(the README's recipe: vbucket deals the ranks, Accelerate prepares the model only; what
`prepare()` does to a DataLoader otherwise). Both are installed into .venv by
python/setup_venv.sh."""

from __future__ import annotations

import pickle

import pytest

from conftest import CONFIG_360P

torch = pytest.importorskip("torch")

import vbucket  # noqa: E402


class Parsed(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, key):
        return int(str(key).split("-")[0])


def collate(items):
    return list(items)


def sampler(df, world=2, rank=1, **kw):
    return vbucket.VariableVideoBatchSampler(df, str(CONFIG_360P), num_replicas=world,
                                             rank=rank, seed=13, **kw)


@pytest.mark.parametrize("workers,stop", [(0, 7), (2, 1), (2, 9)])
def test_stateful_dataloader_resumes_mid_epoch_exactly(sample_df, workers, stop):
    sdl = pytest.importorskip("torchdata.stateful_dataloader")

    def loader(s):
        kw = {"num_workers": workers, "collate_fn": collate}
        if workers:
            kw["prefetch_factor"] = 3
        return sdl.StatefulDataLoader(Parsed(len(sample_df)), batch_sampler=s, **kw)

    s = sampler(sample_df)
    s.set_epoch(1)
    whole = list(loader(s))
    assert len(whole) > stop + 2

    s = sampler(sample_df)
    s.set_epoch(1)
    first = loader(s)
    got = []
    for i, b in enumerate(first):
        got.append(b)
        if i == stop:
            saved = pickle.dumps(first.state_dict())  # what a checkpoint stores
            break
    del first
    s2 = sampler(sample_df)  # a new sampler and loader, as a restarted process makes them
    s2.set_epoch(1)
    second = loader(s2)
    second.load_state_dict(pickle.loads(saved))
    got += list(second)
    assert got == whole


def accelerate_data_loader():
    return pytest.importorskip("accelerate.data_loader")


def test_accelerate_prepare_reshards_a_sharded_sampler(sample_df):
    """What the README warns about: prepare() wraps any batch sampler in its own sharding, so
    a rank-sharded sampler's batches are dealt again (each rank trains on 1/world of its
    batches)."""
    adl = accelerate_data_loader()
    world, rank = 2, 1
    s = sampler(sample_df, world, rank, drop_last=True)
    mine = list(iter(s))
    s.reset()
    dl = torch.utils.data.DataLoader(Parsed(len(sample_df)), batch_sampler=s, collate_fn=collate)
    prepared = adl.prepare_data_loader(dl, num_processes=world, process_index=rank,
                                       put_on_device=False, even_batches=False)
    seen = list(prepared)
    assert len(seen) < len(mine)


@pytest.mark.parametrize("world", [2, 3])
def test_accelerate_recipe_keeps_vbuckets_batches(sample_df, world):
    """The recipe: accelerator.prepare(model, optimizer) only; the DataLoader over vbucket's
    sampler (num_replicas = accelerator.num_processes, rank = accelerator.process_index) is
    iterated as is and each batch moved with .to(accelerator.device)."""
    accelerate = pytest.importorskip("accelerate")
    acc = accelerate.Accelerator(cpu=True)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = acc.prepare(model, opt)
    for rank in range(world):
        s = sampler(sample_df, world, rank)
        expected = [[int(x.split("-")[0]) for x in b] for b in iter(s)]
        s.reset()
        dl = torch.utils.data.DataLoader(Parsed(len(sample_df)), batch_sampler=s,
                                         collate_fn=collate)
        got = [torch.tensor(b).to(acc.device).tolist() for b in dl]
        assert got == expected
