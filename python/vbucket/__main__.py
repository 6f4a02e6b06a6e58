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


def _add_field(parser: argparse.ArgumentParser, name: str) -> None:
    """The flag of a run spec field, as the CLI names it (--fps-max for fps_max), with its help
    and default from the library's field table; unset unless given (the spec's default)."""
    f = _core.FIELDS[name]
    flag = "--" + name.replace("_", "-")
    shown = f" (default: {_core.DEFAULTS[name]})" if name in _core.DEFAULTS else ""
    kw = dict(dest=name, default=None, help=f["help"] + shown)
    kind = f["kind"]
    if kind == "flag":
        parser.add_argument(flag, action="store_true", **kw)
        return
    if kind in ("count", "seed"):
        kw["type"] = int
    elif kind == "number":
        kw["type"] = float
    elif kind == "triple":
        kw["type"] = lambda t: tuple(int(v) for v in t.split(","))
    elif kind == "choice":
        kw["choices"] = f["choices"]
    parser.add_argument(flag, metavar=f["value_name"] or None, **kw)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m vbucket", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    fields_of = {"stats": _core.PLAN_FIELDS, "report": _core.PLAN_FIELDS,
                 "assign": _core.ASSIGN_FIELDS, "explain": _core.ASSIGN_FIELDS[:-1]}
    for name, fields in fields_of.items():
        c = sub.add_parser(name)
        c.add_argument("--config", required=True)
        c.add_argument("--meta", required=True)
        for field in fields:
            _add_field(c, field)
        if name == "report":
            c.add_argument("--profile", help="profiled steps (as `vbucket fit-bs` reads)")
            c.add_argument("--memory-gib", type=float)
            c.add_argument("--margin", type=float, default=0.05,
                           help="fraction of the memory kept free, as fit-bs (0.05)")
            c.add_argument("--out", required=True, help="the HTML file to write")
        elif name == "assign":
            c.add_argument("--out", help="write the assignment as CSV")
        elif name == "explain":
            c.add_argument("--index", type=int, required=True, action="append",
                           help="the sample (metadata row) to explain; may be repeated")
    a = p.parse_args(argv)
    spec = {f: getattr(a, f) for f in fields_of[a.command] if getattr(a, f) is not None}
    try:
        config = _core.BucketConfig(a.config, rule=spec.get("rule", _core.DEFAULTS["rule"]))
        if a.command == "report":
            from .plots import render_report

            r = render_report(a.meta, config, a.out, profile=a.profile,
                              memory_gib=a.memory_gib, margin=a.margin, **spec)
            if r["message"]:
                print(f"python -m vbucket report: {r['message']}", file=sys.stderr)
            print(f"python -m vbucket report: {r['images']} pictures in {r['path']}")
        elif a.command == "explain":
            for i in a.index:
                sys.stdout.write(_core.explain(a.meta, config, i, **spec)["text"])
        elif a.command == "stats":
            sys.stdout.write(_core.stats_table(a.meta, config, **spec))
        else:
            df = _core.assign(a.meta, config, **spec)
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
