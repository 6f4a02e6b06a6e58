"""A trainer that runs vbucket's per-bucket parallel layout with torch.distributed: each step the
world is split into groups of each bucket's sequence-parallel size (``vbucket.GroupPlan``), each
group trains one batch of a tiny transformer whose tokens are split over the group's ranks (keys
and values all-gathered over the group, gradients reduced back), and the gradients of the whole
world are averaged. The process groups are made once, up front; each step uses the planned one.
Stop after some steps, and resume in a new process at another world size from the saved state.

    python examples/python/parallel_layout_trainer.py --world 4 --stop 3 --out run/
    python examples/python/parallel_layout_trainer.py --world 2 --resume run/ --out run2/

Each rank writes out/rank<R>.jsonl: one line per step (step, group, batch position, repeat,
sample indices, the step's loss). With --ledger DIR the run's ledger goes to DIR (rank 0 declares
the epoch; each group's first rank records its group's batch before the step), and
``vbucket audit DIR`` proves every sample delivered once across the stop and the resume. gloo on CPU by default; --backend nccl with one GPU per rank.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import vbucket

#: The bucket config (Open-Sora 2.0 form) and the hand layouts: (sp, batch, micro-batch).
CONFIG = {"256px": {1: (1.0, 4), 33: (1.0, 2), 65: (1.0, 1)}}
LAYOUTS = {"256px:1": (1, 4, 2), "256px:33": (2, 2, 1), "256px:65": (2, 2, 1)}
DIM = 16


def metadata(n: int = 48) -> dict:
    """n web-video-like samples: images, short and long clips at 256px-ish sizes."""
    rng = np.random.default_rng(7)
    frames = rng.choice([1, 40, 80], size=n)
    return {
        "num_frames": frames.astype(np.int64),
        "height": rng.choice([256, 240, 288], size=n).astype(np.int64),
        "width": rng.choice([256, 320, 426], size=n).astype(np.int64),
        "fps": np.where(frames == 1, np.nan, 16.0),
    }


def make_plan(seed: int = 3) -> vbucket.GroupPlan:
    return vbucket.GroupPlan(metadata(), CONFIG, layouts=LAYOUTS, remainder="pad", seed=seed,
                             rng="fast")


def toy_tokens(frames: int) -> int:
    """The toy model's sequence length for a clip: 4 tokens per latent frame (divides by 2)."""
    return 4 * (1 + (frames - 1) // 4)


class GatherTokens(torch.autograd.Function):
    """All-gathers every rank's token shard over a group; the backward pass sums the gradient
    over the group (all_reduce, which gloo has) and keeps this rank's slice."""

    @staticmethod
    def forward(ctx, shard, group, sp, sp_rank):
        ctx.group, ctx.sp_rank, ctx.n = group, sp_rank, shard.shape[1]
        parts = [torch.empty_like(shard) for _ in range(sp)]
        dist.all_gather(parts, shard.contiguous(), group=group)
        return torch.cat(parts, dim=1)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad[:, ctx.sp_rank * ctx.n:(ctx.sp_rank + 1) * ctx.n], None, None, None


class TinyTransformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(DIM, 3 * DIM)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(DIM, 2 * DIM), torch.nn.GELU(),
                                       torch.nn.Linear(2 * DIM, DIM))

    def forward(self, x, group, sp, sp_rank):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if sp > 1:  # sequence parallel: my queries attend to the group's keys and values
            k = GatherTokens.apply(k, group, sp, sp_rank)
            v = GatherTokens.apply(v, group, sp, sp_rank)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(DIM), dim=-1)
        h = x + att @ v
        return h + self.mlp(h)


def sample_tokens(index: int, frames: int):
    """Sample `index`'s input tokens and target, the same on every rank that holds it."""
    g = torch.Generator().manual_seed(1000 + index)
    x = torch.randn(toy_tokens(frames), DIM, generator=g)
    return x, torch.roll(x, 1, dims=0).tanh()


def schedule_digest(schedule, world: int) -> str:
    h = hashlib.sha256()
    for k in range(schedule.steps):
        for r in range(world):
            w = schedule.work(k, r)
            h.update(f"{k}:{r}:{w['first_rank']}:{w['sp']}:{w['position']}:{w['indices']};".encode())
    return h.hexdigest()


def train(rank: int, world: int, args) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(args.port)
    torch.set_num_threads(1)
    dist.init_process_group(args.backend, rank=rank, world_size=world)
    device = torch.device(f"cuda:{rank}") if args.backend == "nccl" else torch.device("cpu")
    plan = make_plan()
    model = TinyTransformer().to(device)
    torch.manual_seed(0)
    for p in model.parameters():  # the same start on every rank
        torch.nn.init.normal_(p, std=0.2)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    state, steps_before = "", 0
    if args.resume:
        saved = torch.load(os.path.join(args.resume, "checkpoint.pt"))
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        state, steps_before = saved["state"], saved["steps"]
    schedule = plan.deal(world, state)
    if args.ledger and rank == 0:
        plan.write_ledger_epoch(args.ledger)

    # Every rank computes the plan alone: they must agree.
    digests = [None] * world
    dist.all_gather_object(digests, schedule_digest(schedule, world))
    assert len(set(digests)) == 1, f"rank {rank}: the ranks' plans differ"

    # The process groups, made once by every rank in the same order: ranks k·sp .. k·sp + sp - 1.
    groups = {}
    for sp in plan.sp_sizes:
        if sp > 1 and world % sp == 0:
            for k in range(world // sp):
                groups[(k * sp, sp)] = dist.new_group(list(range(k * sp, k * sp + sp)))

    checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    log = open(os.path.join(args.out, f"rank{rank}.jsonl"), "w")
    log.write(json.dumps({"start": True, "state": state, "checksum": checksum}) + "\n")
    stop = schedule.steps if args.stop is None else min(args.stop, schedule.steps)
    for step in range(stop):
        w = schedule.work(step, rank)
        sp, sp_rank = w["sp"], w["sp_rank"]
        group = groups.get((w["first_rank"], sp))
        if args.ledger:  # recorded before it is trained on
            schedule.write_ledger(args.ledger, step, rank, steps_before + step)
        opt.zero_grad()
        local = torch.zeros((), dtype=torch.float64)
        for micro in w["micro_steps"]:
            xs, ys = zip(*(sample_tokens(i, w["thw"][0]) for i in micro))
            x, y = torch.stack(xs).to(device), torch.stack(ys).to(device)
            n = x.shape[1] // sp  # my shard of every sample's tokens
            x, y = x[:, sp_rank * n:(sp_rank + 1) * n], y[:, sp_rank * n:(sp_rank + 1) * n]
            loss = ((model(x, group, sp, sp_rank) - y) ** 2).sum() / (len(w["indices"]) * DIM)
            loss.backward()
            local += loss.detach().double().cpu()
        for p in model.parameters():  # data parallel over the whole world
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        total = local.clone()
        dist.all_reduce(total)
        loss_value = float(total) / world
        assert math.isfinite(loss_value), f"rank {rank}: step {step} loss is {loss_value}"
        log.write(json.dumps({"step": step, "first_rank": w["first_rank"], "sp": sp,
                              "position": w["position"], "repeat": w["repeat"],
                              "indices": w["indices"], "loss": loss_value}) + "\n")
    log.close()
    if args.stop is not None and rank == 0:
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                    "state": schedule.state_after(stop), "steps": steps_before + stop},
                   os.path.join(args.out, "checkpoint.pt"))
        with open(os.path.join(args.out, "checksum.json"), "w") as f:
            json.dump(sum(float(p.detach().double().sum()) for p in model.parameters()), f)
    dist.barrier()
    dist.destroy_process_group()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--stop", type=int, default=None, help="save a checkpoint after N steps")
    ap.add_argument("--resume", default=None, help="a --stop run's --out folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--ledger", default=None, help="write the run's ledger into this folder")
    ap.add_argument("--backend", default="gloo", choices=("gloo", "nccl"))
    ap.add_argument("--port", type=int, default=29645)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    mp.start_processes(train, args=(args.world, args), nprocs=args.world, join=True,
                       start_method="fork")
    return 0


if __name__ == "__main__":
    sys.exit(main())
