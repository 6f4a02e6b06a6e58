"""The data path of Open-Sora 2.0's ``scripts/diffusion/train.py``, with vbucket's sampler.

Our own code making the calls ``train.py`` makes, in its order: the sampler and a DataLoader
with workers (``prepare_dataloader``), ``num_steps_per_epoch = len(dataloader)``, the resume
(``load_state_dict(torch.load(ckpt/"sampler"))``, the start step from the checkpoint, the
step wrap, ``set_step(start_step)``), then per epoch ``set_epoch(epoch)``, ``iter(dataloader)``,
``enumerate(..., start=start_step)`` read one batch ahead, ``range(start_step,
num_steps_per_epoch)``, a checkpoint (``sampler.state_dict(step + 1)`` and the step) every
``--ckpt-every`` steps, and ``sampler.reset()`` at the end of the epoch.

The ranks of a data-parallel world run one after another in this process (each with its own
sampler and DataLoader, as each GPU's process would); ``--stop-after E,S`` ends the run after
step S of epoch E (a crash after that checkpoint). ``--len-per-epoch`` reads ``len(dataloader)``
after each ``set_epoch`` (docs/opensora.md's one-line change for a resume under another world
size); without it the loop is train.py's, unchanged: ``len(dataloader)`` taken once, before the
epoch loop, sizes every epoch (the sampler holds every epoch to it).

Writes JSON: {"trained": the batches every rank trained on, as [epoch, step, rank, [sample
indices]], "held": per epoch this run entered, rank 0's ``held_epoch(epoch)``}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
from torch.utils.data import DataLoader, Dataset

from vbucket import VariableVideoBatchSampler  # the README's one-line change


class ParsedIndexDataset(Dataset):
    """What Open-Sora's dataset does with the sampler's "index-T-H-W" strings: parses them."""

    def __init__(self, data):
        self.data = data  # Open-Sora's datasets hold the metadata as .data

    def __len__(self):
        return len(self.data)

    def __getitem__(self, key):
        index, t, h, w = (int(x) for x in str(key).split("-"))
        return {"index": index, "thw": (t, h, w)}


def collate(items):
    return {"index": [it["index"] for it in items], "thw": [it["thw"] for it in items]}


def run_rank(args, rank, meta, config):
    dataset = ParsedIndexDataset(meta)
    sampler = VariableVideoBatchSampler(
        dataset, config, num_replicas=args.world, rank=rank, shuffle=True, seed=args.seed,
        drop_last=args.drop_last, num_groups=args.world)
    extra = {"prefetch_factor": 2} if args.workers else {}  # torch 1.x refuses None
    dataloader = DataLoader(dataset, batch_sampler=sampler, num_workers=args.workers,
                            collate_fn=collate, **extra)
    num_steps_per_epoch = len(dataloader)

    start_epoch = start_step = None
    if args.load:
        sampler.load_state_dict(torch.load(os.path.join(args.load, "sampler")))
        with open(os.path.join(args.load, "running_states.json")) as f:
            running = json.load(f)
        start_epoch, start_step = running["epoch"], running["step"]
    if start_step is not None:
        if start_step > num_steps_per_epoch:
            start_epoch = (start_epoch + start_step // num_steps_per_epoch
                           if start_epoch is not None else start_step // num_steps_per_epoch)
            start_step = start_step % num_steps_per_epoch
    else:
        start_step = 0
    sampler.set_step(start_step)
    start_epoch = start_epoch if start_epoch is not None else 0

    trained = []
    held = {}
    stop_epoch, stop_step = args.stop_after if args.stop_after else (None, None)
    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)
        held[epoch] = sampler.held_epoch(epoch)
        if args.len_per_epoch:
            num_steps_per_epoch = len(dataloader)
        dataloader_iter = iter(dataloader)
        pbar_iter = iter(enumerate(dataloader_iter, start=start_step))

        def fetch_data():
            step, batch = next(pbar_iter)
            return batch, step

        batch_, step_ = fetch_data()
        for _ in range(start_step, num_steps_per_epoch):
            batch, step = batch_, step_
            if step + 1 < num_steps_per_epoch:
                batch_, step_ = fetch_data()
            trained.append([epoch, step, rank, batch["index"]])
            if args.save and rank == 0 and (step + 1) % args.ckpt_every == 0:
                # the checkpoint's one sampler file, written by the coordinator (rank 0)
                os.makedirs(args.save, exist_ok=True)
                torch.save(sampler.state_dict(step + 1), os.path.join(args.save, "sampler"))
                with open(os.path.join(args.save, "running_states.json"), "w") as f:
                    json.dump({"epoch": epoch, "step": step + 1}, f)
            if epoch == stop_epoch and step == stop_step:
                return trained, held
        sampler.reset()
        start_step = 0
    return trained, held


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--meta", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--drop-last", action="store_true")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--ckpt-every", type=int, default=1)
    p.add_argument("--save")
    p.add_argument("--load")
    p.add_argument("--stop-after", type=lambda s: tuple(int(x) for x in s.split(",")))
    p.add_argument("--len-per-epoch", action="store_true")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)

    import pandas as pd

    meta = pd.read_csv(args.meta)
    with open(args.config) as f:
        config = json.load(f)
    trained, held = [], {}
    for rank in range(args.world):
        got, held_of_rank = run_rank(args, rank, meta, config)
        trained += got
        if rank == 0:
            held = held_of_rank
    with open(args.out, "w") as f:
        json.dump({"trained": trained, "held": held}, f)


if __name__ == "__main__":
    sys.exit(main())
