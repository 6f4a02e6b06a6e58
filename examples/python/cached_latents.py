"""Train from cached latents without giving up random bucketing (issue 32), end to end on CPU
in seconds:

1. make a few small videos (the ffmpeg command's test sources, two classes) and scan them;
2. ``vbucket.cache_plan``: every sample's exact distribution over bucket shapes under a
   config with random choices, and the entries to cache (here coverage 1: every shape a sample
   can draw, so every epoch's draw is cached);
3. ``vbucket.precompute``: decode each entry's clip (its own start frame, keyed by seed and
   sample, not by epoch), encode it with a stand-in "VAE" (average pooling), one ``.npy`` per
   entry, written atomically (run it twice: the second run skips everything);
4. train a tiny classifier for a few epochs with ``vbucket.Loader(sampler, None,
   tensors={"latent": paths})``: the sampler draws each sample's bucket anew every epoch, and
   the epoch's column of paths names the latent of the drawn shape.

    python examples/python/cached_latents.py [--workdir DIR]

Prints one JSON line at the end: entries, written, skipped on the second run, steps, first and
last loss.
"""

import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
import torch

import vbucket

CONFIG = {  # Open-Sora 2.0 form: each draw picks a resolution and a length at random
    "128px": {"1": (1.0, 4), "9": ((0.5, 0.5), 4), "17": ((0.6, 0.5), 2)},
    "64px": {"1": (1.0, 8), "5": (1.0, 4), "9": (1.0, 4), "17": (1.0, 4)},
}
SEED = 3


def make_videos(root):
    """12 clips of 1.5 to 3 s at 16 fps, two test patterns (the class), three sizes."""
    os.makedirs(root, exist_ok=True)
    labels = {}
    sizes = ["160x128", "128x160", "144x144"]
    for i in range(12):
        pattern = "testsrc2" if i % 2 == 0 else "smptebars"
        path = os.path.join(root, f"clip{i:02d}.mp4")
        if not os.path.exists(path):
            subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                            f"{pattern}=size={sizes[i % 3]}:rate=16:duration={1.5 + (i % 4) * 0.5}",
                            "-pix_fmt", "yuv420p", "-c:v", "libx264", "-g", "8", path],
                           check=True)
        labels[path] = float(i % 2)
    return labels


def vae(batch):
    """A stand-in encoder: (B, 3, T, H, W) uint8 -> (B, 3, 1 + (T - 1) // 4, H / 8, W / 8)
    float32 (time kept every 4th frame from the first, space average-pooled 8 x 8)."""
    x = batch.float() / 255.0
    x = x[:, :, ::4]
    return torch.nn.functional.avg_pool3d(x, (1, 8, 8))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--epochs", type=int, default=4)
    args = ap.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="vbucket-cached-")
    labels = make_videos(os.path.join(work, "videos"))
    df = vbucket.scan(os.path.join(work, "videos"), progress=False)
    df = df[df["error"].fillna("") == ""].reset_index(drop=True)

    plan = vbucket.cache_plan(df, CONFIG, coverage=1.0, seed=SEED, encoder="pool8",
                              compression=(4, 8, 8), channels=3, bytes_per_element=4,
                              out=os.path.join(work, "manifest.csv"))
    c = plan["chosen"]
    print(f"cache: {c['files']} entries for {plan['bucketable']} samples "
          f"({c['shapes_per_sample']:.2f} shapes per sample, coverage {c['coverage']:.3f}); "
          f"most probable shape only: coverage {plan['one_per_sample']['coverage']:.3f}")

    latents = os.path.join(work, "latents")
    first = vbucket.precompute(os.path.join(work, "manifest.csv"), vae, latents, batch_size=4)
    again = vbucket.precompute(os.path.join(work, "manifest.csv"), vae, latents, batch_size=4)
    print(f"precompute: {first['encoded']} encoded, then {again['skipped']} skipped")

    file_of = {(r["sample"], r["T"], r["H"], r["W"]): os.path.join(latents, r["file"])
               for r in plan["entries"]}
    any_file = {r["sample"]: os.path.join(latents, r["file"]) for r in plan["entries"]}
    y_all = torch.tensor([labels[p] for p in df["path"]])

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=2.0)
    losses, steps = [], 0
    for epoch in range(args.epochs):
        sampler = vbucket.VariableVideoBatchSampler(df, CONFIG, seed=SEED, rng="fast")
        sampler.set_epoch(epoch)
        # This epoch's draw: each sample's latent of the shape its bucket has.
        paths = [any_file.get(i, "") for i in range(len(df))]
        for _, t, h, w, idx, _ in sampler.batches():
            for i in idx.tolist():
                paths[i] = file_of[(i, t, h, w)]
        with vbucket.Loader(sampler, None, workers=2, tensors={"latent": paths}) as loader:
            for b in loader:
                x = b.tensors["latent"].float().mean(dim=(2, 3, 4))  # (B, 3)
                y = y_all[torch.from_numpy(np.asarray(b.indices, dtype=np.int64))]
                loss = torch.nn.functional.binary_cross_entropy_with_logits(
                    model((x - 0.5) * 8).squeeze(1), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(float(loss))
                steps += 1
    print(json.dumps({"entries": c["files"], "written": first["encoded"] + first["skipped"],
                      "skipped_second_run": again["skipped"], "steps": steps,
                      "loss_first": float(np.mean(losses[:3])),
                      "loss_last": float(np.mean(losses[-3:]))}))


if __name__ == "__main__":
    main()
