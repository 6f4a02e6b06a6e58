"""``python -m vbucket stats --config CFG.json --meta META.csv [...]``: the bucket table of one
epoch from Python (the same table `vbucket stats` prints), ``assign`` with a summary,
``report ... --out report.html``: the pictures of the buckets in one self-contained HTML file,
and ``explain ... --index I``: why sample I got its bucket, a smaller one or none (the rule's
decisions: resolutions and frames tried, draws and probabilities, downgrades).
"""

from __future__ import annotations

import argparse
import sys

from . import _core


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m vbucket", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("stats", "assign", "report", "explain"):
        c = sub.add_parser(name)
        c.add_argument("--config", required=True)
        c.add_argument("--meta", required=True)
        c.add_argument("--rule", default="opensora-v2")
        d = _core.DEFAULTS  # the library's defaults, as the CLI's and the sampler's
        c.add_argument("--rng", default=d["rng"], help=f"numpy or fast ({d['rng']})")
        c.add_argument("--seed", type=int, default=d["seed"], help=f"({d['seed']})")
        c.add_argument("--epoch", type=int, default=d["epoch"], help=f"({d['epoch']})")
        c.add_argument("--fps-max", type=float, default=16)
        c.add_argument("--frame-interval", type=int, default=1)
        if name in ("stats", "report"):
            c.add_argument("--world", type=int, default=d["world"], help=f"({d['world']})")
            c.add_argument("--policy", default=d["policy"], help=f"pad, drop or downgrade "
                           f"({d['policy']})")
            c.add_argument("--drop-last", action="store_true")
            if name == "stats":
                c.add_argument("--balance", action="store_true")
            else:
                c.add_argument("--profile", help="profiled steps (as `vbucket fit-bs` reads)")
                c.add_argument("--memory-gib", type=float)
                c.add_argument("--margin", type=float, default=0.05,
                               help="fraction of the memory kept free, as fit-bs (0.05)")
                c.add_argument("--out", required=True, help="the HTML file to write")
        elif name == "assign":
            c.add_argument("--out", help="write the assignment as CSV")
        else:
            c.add_argument("--index", type=int, required=True, action="append",
                           help="the sample (metadata row) to explain; may be repeated")
    a = p.parse_args(argv)
    common = dict(seed=a.seed, epoch=a.epoch, rule=a.rule, rng=a.rng, fps_max=a.fps_max,
                  frame_interval=a.frame_interval)
    try:
        config = _core.BucketConfig(a.config, rule=a.rule)
        if a.command == "report":
            from .plots import render_report

            r = render_report(a.meta, config, a.out, world=a.world, profile=a.profile,
                              memory_gib=a.memory_gib, margin=a.margin, policy=a.policy,
                              drop_last=a.drop_last, **common)
            if r["message"]:
                print(f"python -m vbucket report: {r['message']}", file=sys.stderr)
            print(f"python -m vbucket report: {r['images']} pictures in {r['path']}")
        elif a.command == "explain":
            for i in a.index:
                sys.stdout.write(_core.explain(a.meta, config, i, **common)["text"])
        elif a.command == "stats":
            sys.stdout.write(_core.stats_table(a.meta, config, world=a.world, policy=a.policy,
                                               drop_last=a.drop_last, balance=a.balance,
                                               **common))
        else:
            df = _core.assign(a.meta, config, **common)
            if a.out:
                # the CLI's header: index,resolution,frames,ratio,T,H,W
                df.drop(columns="bucket").rename(columns=_core.ASSIGN_CSV_NAMES).to_csv(a.out)
            counts = (df[df.bucket >= 0].groupby(["resolution", "frames", "ratio"], observed=True)
                      .size().rename("samples").reset_index())
            print(counts.to_string(index=False))
            print(f"\n{int((df.bucket >= 0).sum())} of {len(df)} samples in buckets")
    except (ValueError, TypeError, OSError, ImportError) as e:
        print(f"python -m vbucket {a.command}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
