#!/usr/bin/env python3
"""The include graph of vbucket's headers (include/vbucket and adapters/*/include): fails on a
cycle and on a back-edge, a header of a lower (more generic) layer that includes one of a
higher (more specific) layer, per LAYERS below. Prints each problem with the include's line.

    python3 scripts/check_includes.py          # from anywhere; exit 1 on a problem
    python3 scripts/check_includes.py --graph  # also print every edge
    VBUCKET_ROOT=/other/tree python3 scripts/check_includes.py  # another checkout
"""
import os
import re
import sys

ROOT = os.environ.get("VBUCKET_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Layers, generic first: a header may include headers of its own layer or of earlier ones, so
# every include between two folders is checked. The core's layers are its folders, in the order
# the data flows (base -> bucket -> plan -> sample -> load -> cache -> run); inside a layer only
# cycles are refused. Patterns are paths under an include root (vbucket/...), `*` never crosses
# a `/`; the first layer with a matching pattern names a header's. A header no pattern matches is
# a problem of its own (every header has a layer).
LAYERS = [
    ("base", ["vbucket/detail/*", "vbucket/base/*"]),  # errors, vocabulary, random sources
    ("bucket", ["vbucket/bucket/*"]),  # aspect tables, configs, metadata, rules, assignment
    ("plan", ["vbucket/plan/*"]),  # options, batch plan, epoch planners, layouts
    ("sample", ["vbucket/sample/*"]),  # samplers, Open-Sora's lifecycle
    ("load", ["vbucket/load/*"]),  # decoding, normalisation, staging, the loader
    ("cache", ["vbucket/cache/*"]),  # latent caches
    ("run", ["vbucket/run/*"]),  # run spec, run plan, ledger, audit, the trainer's loop
    ("adapters", [  # never included by the core
        "vbucket/json/*", "vbucket/fmt/*", "vbucket/eigen/*", "vbucket/ffmpeg/*",
        "vbucket/ffmpeg/detail/*", "vbucket/cuda/*", "vbucket/mpi/*"]),
    ("umbrella", ["vbucket/*", "vbucket/ffmpeg/ffmpeg.hpp"]),  # one per folder, and the whole
]
# The umbrella headers come before the adapters' patterns would claim them.
_ORDERED = [LAYERS[-1]] + LAYERS[:-1]
LAYER_INDEX = {name: i for i, (name, _) in enumerate(LAYERS)}


def _matches(rel, pattern):
    return re.fullmatch(re.escape(pattern).replace(r"\*", "[^/]*"), rel) is not None


INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def layer_of(rel):
    for name, patterns in _ORDERED:
        if any(_matches(rel, p) for p in patterns):
            return name
    return None


def roots():
    found = [os.path.join(ROOT, "include")]
    adapters = os.path.join(ROOT, "adapters")
    for name in sorted(os.listdir(adapters)):
        inc = os.path.join(adapters, name, "include")
        if os.path.isdir(inc):
            found.append(inc)
    return found


def headers(include_roots):
    """{rel: absolute path} of every header under the roots (rel = path under its root)."""
    out = {}
    for root in include_roots:
        for d, _, files in os.walk(root):
            for f in files:
                if f.endswith((".hpp", ".h", ".cuh")):
                    path = os.path.join(d, f)
                    out[os.path.relpath(path, root).replace(os.sep, "/")] = path
    return out


def edges(all_headers):
    """[(from rel, to rel, line number)] for includes of vbucket headers."""
    by_path = {os.path.normpath(p): rel for rel, p in all_headers.items()}
    result = []
    for rel, path in sorted(all_headers.items()):
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                local = os.path.normpath(os.path.join(os.path.dirname(path), target))
                if local in by_path:  # "relative.hpp"
                    result.append((rel, by_path[local], number))
                elif target in all_headers:  # <vbucket/x.hpp> or "vbucket/x.hpp"
                    result.append((rel, target, number))
    return result


def cycles(nodes, graph):
    """The strongly connected components of more than one header (or a self-include)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main(argv):
    all_headers = headers(roots())
    graph_edges = edges(all_headers)
    graph = {}
    for a, b, _ in graph_edges:
        graph.setdefault(a, []).append(b)
    problems = []
    for comp in cycles(all_headers, graph):
        problems.append("cycle: " + " <-> ".join(comp))
    for rel in sorted(all_headers):
        if layer_of(rel) is None:
            problems.append(f"no layer: {rel} (add its folder to LAYERS)")
    checked = 0
    for a, b, line in graph_edges:
        la, lb = layer_of(a), layer_of(b)
        if la is None or lb is None:
            continue
        checked += 1
        if LAYER_INDEX[lb] > LAYER_INDEX[la]:
            problems.append(f"back-edge: {a}:{line} ({la}) includes {b} ({lb})")
    if "--graph" in argv:
        for a, b, line in graph_edges:
            print(f"{a}:{line} -> {b}  [{layer_of(a)} -> {layer_of(b)}]")
    for p in problems:
        print(p)
    print(f"check_includes: {len(all_headers)} headers in {len(LAYERS)} layers, "
          f"{len(graph_edges)} includes, {checked} checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
