#!/usr/bin/env bash
# Compile cost of vbucket's headers, as a user's translation unit pays it: configures a tree
# (build-compile-times/, -O2, the examples and the CLI on, compile_commands.json exported), then
# compiles each example's and each CLI source's TU alone (and the probes of
# scripts/compile_probes/ with the quickstart example's command), three times, with the exact
# command CMake would use (output to /dev/null), and prints the median user CPU seconds and peak memory
# of each, slowest first. Needs nothing built. The peak needs GNU time (Debian's `time`).
# The examples and the CLI link vbucket::compiled when it is built (the default at the top
# level): its own sources (src/, adapters/*/src/) are listed after the total, as a cost paid
# once per build tree. COMPILED=OFF measures the header-only way (every TU compiles it all).
#
#   bash scripts/compile_times.sh            # all example, CLI and probe TUs
#   bash scripts/compile_times.sh compile_probes  # the umbrella alone and the umbrella trainer
#   bash scripts/compile_times.sh quickstart # only the TUs whose path contains "quickstart"
#   COMPILED=OFF bash scripts/compile_times.sh  # header-only (in build-compile-times-header/)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
filter=${1:-}
compiled=${COMPILED:-ON}
tree=build-compile-times
[[ $compiled == ON ]] || tree=build-compile-times-header
generator=()
[[ -f $tree/CMakeCache.txt ]] || generator=(-G Ninja)
cmake -S . -B "$tree" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DVBUCKET_BUILD_EXAMPLES=ON -DVBUCKET_BUILD_TOOLS=ON -DVBUCKET_BUILD_TESTS=OFF \
  -DVBUCKET_BUILD_BENCH=OFF -DVBUCKET_INSTALL=OFF -DVBUCKET_WERROR=OFF \
  -DVBUCKET_COMPILED="$compiled" >/dev/null

python3 - "$tree/compile_commands.json" "$filter" "$PWD" <<'PY'
import json, os, resource, shlex, statistics, subprocess, sys, time

commands, wanted, root = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
# The probes (scripts/compile_probes/*.cpp: the umbrella header alone, the quickstart trainer
# including the umbrella) compile with the quickstart example's command line.
probe_dir = os.path.join(root, "scripts", "compile_probes")
quickstart = next((e for e in commands if e["file"].endswith("examples/quickstart/main.cpp")), None)
if quickstart and os.path.isdir(probe_dir):
    for name in sorted(os.listdir(probe_dir)):
        if name.endswith(".cpp"):
            probe = os.path.join(probe_dir, name)
            commands.append(dict(quickstart, file=probe,
                                 command=quickstart["command"].replace(quickstart["file"], probe)))
gnu_time = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None
report = os.path.abspath(os.path.join(os.path.dirname(sys.argv[1]), "compile_times.out"))
rows, once = [], []
for entry in commands:
    path = os.path.relpath(entry["file"], root)
    library = path.startswith("src/") or (path.startswith("adapters/") and "/src/" in path)
    if not (path.startswith(("examples/", "tools/", "scripts/compile_probes/")) or library):
        continue
    if wanted not in path:
        continue
    if not path.endswith(".cpp"):
        continue
    args = shlex.split(entry["command"])
    if "-o" in args:  # compile only, write nothing
        args[args.index("-o") + 1] = "/dev/null"
    users, peaks = [], []
    for _ in range(3):
        if gnu_time:  # per-process user time and peak RSS
            done = subprocess.run([gnu_time, "-f", "%U %M", "-o", report] + args,
                                  cwd=entry["directory"], capture_output=True, text=True)
            user, peak_kib = open(report).read().split()[-2:]
            users.append(float(user))
            peaks.append(int(peak_kib) / 1024)
        else:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            done = subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True)
            users.append(resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before.ru_utime)
        if done.returncode != 0:
            sys.exit(f"compile_times: {path} failed to compile:\n{done.stderr[-2000:]}")
    (once if library else rows).append(
        (statistics.median(users), max(peaks) if peaks else float("nan"), path))
if not rows:
    sys.exit(f"compile_times: no example or CLI source matches '{wanted}'")
rows.sort(reverse=True)
print(f"{'user s (median of 3)':>20}  {'peak MiB':>8}  translation unit")
for user, peak, path in rows:
    print(f"{user:20.2f}  {peak:8.0f}  {path}")
print(f"{sum(r[0] for r in rows):20.2f}  {'':8}  total of {len(rows)} TUs")
for user, peak, path in sorted(once, reverse=True):
    print(f"{user:20.2f}  {peak:8.0f}  {path} (vbucket::compiled, once per build)")
PY
