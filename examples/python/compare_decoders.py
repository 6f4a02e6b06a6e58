"""Side by side: clip decoding in vbucket against the decoders a PyTorch user would pick.

Each decoder gets the same clips (video, first frame, 33 frames at an interval), the same
decoder threads, and must give the same output: uint8 RGB frames (T, H, W, 3) at the bucket
size, Open-Sora's resize-crop (scale to cover H x W keeping the aspect ratio, center crop):

- ``vbucket``: ``vbucket.decode_clip`` (seek to the keyframe, decode only what the clip needs,
  convert only the wanted frames straight to the covering size);
- ``pyav``: PyAV, seek to the keyframe before the clip, decode on to the last wanted frame,
  ``frame.reformat`` (libswscale, bilinear) to the covering size, crop in numpy;
- ``decord``: ``VideoReader(width=, height=)`` at the covering size, ``get_batch``, crop;
- ``torchcodec``: ``VideoDecoder(seek_mode="approximate")``, ``get_frames_at``, resized by
  torchcodec's own ``transforms.Resize`` where it has one (else torch's bilinear), crop.

Every decoder runs in a process of its own (``--worker``, with ``OMP_WAIT_POLICY=PASSIVE`` unless
set: torch's idle OpenMP threads would spin and count as CPU time), one clip after another; the
parent alternates the decoders over ``--repeats`` rounds and prints, per workload, the median
samples/s, CPU seconds per sample (user + system of the worker process, all its threads), and
frames decoded per frame delivered: vbucket's own count (``clip_info::frames_decoded``), PyAV's
frames out of the decoder, and for decord and torchcodec (which do not say) every frame from the
keyframe before the clip to its last frame ("est."). The first clip of each decoder is compared
with vbucket's (PSNR: a wrong frame is far below 30 dB; the resize filters differ).
A decoder that is not installed is reported as such.

    # a separate venv: torchcodec needs a newer torch than the project's
    /usr/bin/python3 -m venv /tmp/benchvenv
    /tmp/benchvenv/bin/pip install numpy av decord torchcodec torch
    PYTHONPATH=/tmp/pypkg-NAME /tmp/benchvenv/bin/python examples/python/compare_decoders.py \\
        --make /tmp/compare-media --clips 12 --repeats 3 --threads 1

``--make DIR`` generates 10 s 720p clips once (testsrc2 with light noise; H.264 GOP 60 and 250,
and HEVC, VP9, AV1 GOP 60 where the ffmpeg command has the encoder); ``--videos`` takes files
instead. ``--resolutions``, ``--codecs`` and ``--gops`` make (and run) another set instead, every
combination of them (defaults 720, all four codecs, 60), e.g. the 1080p files at GOP 30 and 250:

    ... compare_decoders.py --make /tmp/compare-media --resolutions 1080 --gops 30,250 \\
        --kinds random --clips 8 --threads 1,2

``--threads 1,2`` runs each workload at each thread count; ``--kinds random`` leaves out the
first-frames workloads. ``--export`` adds a realistic export to the set: 20 s of 1080p in five
scenes of other content (testsrc2, mandelbrot, life, smptehdbars panning, cellauto, each with
film-grain noise), encoded the way an editor's H.264 export is (libx264 defaults: CRF 23,
preset medium, keyframes at most every 250 frames and at every scene cut), not a fixed GOP:

    ... compare_decoders.py --make /tmp/compare-media --export --codecs h264 --gops 250 \
        --resolutions 1080 --kinds random --clips 8

Not part of CI.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

DECODERS = ("vbucket", "pyav", "decord", "torchcodec")


# --- media ---------------------------------------------------------------------------------------


CODECS = ("h264", "hevc", "vp9", "av1")
HEIGHTS = {720: "1280x720", 1080: "1920x1080"}
DEFAULT_MEDIA = [(720, "h264", 60), (720, "h264", 250), (720, "hevc", 60), (720, "vp9", 60),
                 (720, "av1", 60)]


def media_name(height: int, codec: str, gop: int) -> str:
    """The file name of one recipe (720p keeps the names of the first table: h264_g60.mp4)."""
    ext = {"h264": "mp4", "hevc": "mp4", "vp9": "webm", "av1": "mkv"}[codec]
    res = "" if height == 720 else f"_{height}p"
    return f"{codec}{res}_g{gop}.{ext}"


def recipe(codec: str, gop: int) -> tuple[str, list[str]]:
    """(encoder, ffmpeg arguments): a fixed GOP of `gop` frames, no scene-cut keyframes."""
    if codec == "h264":
        return "libx264", ["-c:v", "libx264", "-preset", "fast", "-crf", "23", "-sc_threshold", "0",
                           "-pix_fmt", "yuv420p", "-g", str(gop), "-keyint_min", str(gop)]
    if codec == "hevc":
        return "libx265", ["-c:v", "libx265", "-preset", "ultrafast", "-x265-params",
                           f"log-level=error:keyint={gop}:min-keyint={gop}:scenecut=0",
                           "-pix_fmt", "yuv420p"]
    if codec == "vp9":
        return "libvpx-vp9", ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8",
                              "-b:v", "3M", "-g", str(gop)]
    if codec == "av1":
        return "libsvtav1", ["-c:v", "libsvtav1", "-preset", "12", "-g", str(gop)]
    raise ValueError(f"unknown codec {codec!r} (one of {', '.join(CODECS)})")


def make_media(folder: str, seconds: float = 10, media=None) -> list[str]:
    """The benchmark clips (made once; a clip appears whole or not at all).

    `media`: (height, codec, GOP) triples, by default the first table's five 720p files."""
    os.makedirs(folder, exist_ok=True)
    encoders = subprocess.run(["ffmpeg", "-hide_banner", "-encoders"], capture_output=True,
                              text=True).stdout
    paths = []
    for height, codec, gop in media or DEFAULT_MEDIA:
        name = media_name(height, codec, gop)
        encoder, args = recipe(codec, gop)
        if f" {encoder} " not in encoders:
            print(f"no {encoder}: {name} left out", file=sys.stderr)
            continue
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            print(f"making {path}", file=sys.stderr)
            src = (f"testsrc2=size={HEIGHTS[height]}:rate=30:duration={seconds:g},"
                   "noise=alls=2:allf=t")
            part = path + ".part" + os.path.splitext(name)[1]
            subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", src]
                           + args + [part], check=True)
            os.replace(part, path)
        paths.append(path)
    return paths


# Five 4 s scenes of unlike content: the encoder puts a keyframe at each cut.
EXPORT_SCENES = ("testsrc2=size={size}:rate=30", "mandelbrot=size={size}:rate=30",
                 "life=size={size}:rate=30:mold=10:ratio=0.1:death_color=#C83232",
                 "smptehdbars=size={size}:rate=30,scroll=h=0.002",
                 "cellauto=size={size}:rate=30:rule=110")


def make_export(folder: str, height: int = 1080, scene_seconds: float = 4) -> str:
    """A realistic H.264 export (made once): EXPORT_SCENES cut together, light film grain,
    libx264 with its defaults (CRF 23, preset medium, keyint 250, scene-cut keyframes)."""
    size = HEIGHTS[height]
    name = f"h264_{height}p_export.mp4"
    path = os.path.join(folder, name)
    if os.path.exists(path):
        return path
    os.makedirs(folder, exist_ok=True)
    print(f"making {path}", file=sys.stderr)
    inputs, labels = [], []
    for i, scene in enumerate(EXPORT_SCENES):
        inputs += ["-f", "lavfi", "-t", f"{scene_seconds:g}", "-i", scene.format(size=size)]
        labels.append(f"[{i}:v]format=yuv420p,noise=alls=4:allf=t,setsar=1[v{i}]")
    graph = ";".join(labels) + ";" + "".join(f"[v{i}]" for i in range(len(EXPORT_SCENES))) + \
        f"concat=n={len(EXPORT_SCENES)}:v=1:a=0[out]"
    part = path + ".part.mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *inputs, "-filter_complex", graph,
                    "-map", "[out]", "-c:v", "libx264", "-crf", "23", "-pix_fmt", "yuv420p",
                    part], check=True)
    os.replace(part, path)
    return path


def stream_layout(path: str) -> tuple[int, list[int]]:
    """(frames, presentation indices of the keyframes), by demuxing with PyAV."""
    import av

    with av.open(path) as c:
        s = c.streams.video[0]
        packets = [(p.pts, p.is_keyframe) for p in c.demux(s) if p.pts is not None and p.size]
    order = sorted(pts for pts, _ in packets)
    rank = {pts: i for i, pts in enumerate(order)}
    keys = sorted(rank[pts] for pts, key in packets if key)
    return len(order), keys


def cover(h0: int, w0: int, h: int, w: int) -> tuple[int, int, int, int]:
    """Open-Sora's resize-crop: the covering size (sh, sw) and the crop's (top, left)."""
    rh, rw = h / h0, w / w0
    if rh > rw:
        sh, sw = h, max(w, round(w0 * rh))
        return sh, sw, 0, (sw - w) // 2
    sh, sw = max(h, round(h0 * rw)), w
    return sh, sw, (sh - h) // 2, 0


# --- the decoders (each in its worker process) ---------------------------------------------------


def run_vbucket(clips, h, w, threads):
    import vbucket

    out = []
    for path, start, frames, interval in clips:
        out.append(vbucket.decode_clip(path, start, frames, interval, size=(h, w),
                                       threads=threads))
    return out


def count_vbucket(clips, h, w, threads):
    from vbucket import _vbucket

    return sum(_vbucket.decode_clip_info(path, start, frames, interval, h, w, threads,
                                         True)["frames_decoded"]
               for path, start, frames, interval in clips)


def run_pyav(clips, h, w, threads, counted=None):
    import av

    out = []
    decoded = 0
    for path, start, frames, interval in clips:
        wanted = {start + j * interval: j for j in range(frames)}
        last = start + (frames - 1) * interval
        clip = None
        with av.open(path) as c:
            s = c.streams.video[0]
            s.thread_type = "AUTO" if threads != 1 else "SLICE"
            s.codec_context.thread_count = threads
            tb, rate = s.time_base, s.average_rate
            first = s.start_time or 0
            per_frame = 1 / (rate * tb)  # pts units per frame (constant frame rate)
            target = int(first + start * per_frame)
            c.seek(target, stream=s, backward=True, any_frame=False)
            for f in c.decode(s):
                decoded += 1
                i = round((f.pts - first) / per_frame)
                if i > last:
                    break
                if i not in wanted:
                    continue
                if clip is None:
                    sh, sw, top, left = cover(f.height, f.width, h, w)
                    clip = np.empty((frames, h, w, 3), np.uint8)
                rgb = f.reformat(width=sw, height=sh, format="rgb24",
                                 interpolation="BILINEAR").to_ndarray()
                clip[wanted[i]] = rgb[top:top + h, left:left + w]
                if i == last:
                    break
        out.append(clip)
    if counted is not None:
        counted.append(decoded)
    return out


def run_decord(clips, h, w, threads):
    import decord

    out = []
    for path, start, frames, interval in clips:
        probe = decord.VideoReader(path, num_threads=threads)
        h0, w0 = probe[0].shape[:2]
        del probe
        sh, sw, top, left = cover(h0, w0, h, w)
        vr = decord.VideoReader(path, width=sw, height=sh, num_threads=threads)
        batch = vr.get_batch([start + j * interval for j in range(frames)]).asnumpy()
        out.append(np.ascontiguousarray(batch[:, top:top + h, left:left + w]))
    return out


def run_torchcodec(clips, h, w, threads):
    import torch
    from torchcodec.decoders import VideoDecoder

    torch.set_num_threads(max(1, threads))
    try:
        from torchcodec.transforms import Resize  # torchcodec's own resize (FFmpeg's scale)
    except ImportError:
        Resize = None
    out = []
    for path, start, frames, interval in clips:
        meta = VideoDecoder(path, seek_mode="approximate").metadata
        sh, sw, top, left = cover(meta.height, meta.width, h, w)
        indices = [start + j * interval for j in range(frames)]
        if Resize is not None:
            dec = VideoDecoder(path, seek_mode="approximate", num_ffmpeg_threads=threads,
                               dimension_order="NHWC", transforms=[Resize(size=(sh, sw))])
            data = dec.get_frames_at(indices=indices).data
        else:
            dec = VideoDecoder(path, seek_mode="approximate", num_ffmpeg_threads=threads)
            data = dec.get_frames_at(indices=indices).data.float()
            data = torch.nn.functional.interpolate(data, size=(sh, sw), mode="bilinear",
                                                   align_corners=False)
            data = data.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1)
        out.append(data[:, top:top + h, left:left + w].contiguous().numpy())
    return out


RUNNERS = {"vbucket": run_vbucket, "pyav": run_pyav, "decord": run_decord,
           "torchcodec": run_torchcodec}
IMPORTS = {"vbucket": "vbucket", "pyav": "av", "decord": "decord", "torchcodec": "torchcodec"}


def worker(name: str, plan_path: str) -> None:
    """Decodes the plan's clips with one decoder; prints one JSON line."""
    with open(plan_path) as f:
        plan = json.load(f)
    h, w, threads = plan["height"], plan["width"], plan["threads"]
    clips = [tuple(c) for c in plan["clips"]]
    try:
        __import__(IMPORTS[name])
    except Exception as e:  # not installed, or it does not load
        print(json.dumps({"missing": f"{type(e).__name__}: {e}"}))
        return
    RUNNERS[name](clips[:1], h, w, threads)  # warm up: libraries loaded, first file opened
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    out = RUNNERS[name](clips, h, w, threads)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    for clip, (_, _, frames, _) in zip(out, clips):
        assert clip.shape == (frames, h, w, 3) and clip.dtype == np.uint8, (name, clip.shape)
    result = {"wall": wall, "cpu": cpu, "first": out[0].tobytes().hex()}
    if name == "vbucket":
        result["decoded"] = count_vbucket(clips, h, w, threads)
    elif name == "pyav":
        counted = []
        run_pyav(clips, h, w, threads, counted)
        result["decoded"] = counted[0]
    print(json.dumps(result))


# --- the parent ----------------------------------------------------------------------------------


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    se = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 99.0 if se == 0 else 10 * np.log10(255 ** 2 / se)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--make", metavar="DIR", help="generate the benchmark clips into DIR")
    ap.add_argument("--videos", nargs="*", default=[], help="video files (instead of --make)")
    ap.add_argument("--clips", type=int, default=12, help="clips per workload")
    ap.add_argument("--frames", type=int, default=33)
    ap.add_argument("--intervals", default="1,2")
    ap.add_argument("--size", default="192x336", help="H x W of the bucket")
    ap.add_argument("--threads", default="1",
                    help="decoder threads, for every decoder; a list (1,2) runs each workload "
                         "at each")
    ap.add_argument("--resolutions", help="with --make: heights to make, of 720,1080")
    ap.add_argument("--codecs", help=f"with --make: codecs to make, of {','.join(CODECS)}")
    ap.add_argument("--gops", help="with --make: GOP lengths to make (e.g. 30,250)")
    ap.add_argument("--export", action="store_true",
                    help="with --make: also a realistic H.264 export (scene cuts, x264 defaults)")
    ap.add_argument("--kinds", default="random,first",
                    help="workloads per file: random (random clips at each interval), first "
                         "(the first frames)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--decoders", default=",".join(DECODERS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--plan", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.worker, a.plan)
        return

    videos = list(a.videos)
    if a.make:
        media = None  # the first table's five files, unless a subset is named
        if a.resolutions or a.codecs or a.gops:
            heights = [int(x.rstrip("p")) for x in (a.resolutions or "720").split(",")]
            codecs = (a.codecs or ",".join(CODECS)).split(",")
            gops = [int(x) for x in (a.gops or "60").split(",")]
            for x in heights:
                if x not in HEIGHTS:
                    ap.error(f"--resolutions: {x} is not one of {', '.join(map(str, HEIGHTS))}")
            for c in codecs:
                if c not in CODECS:
                    ap.error(f"--codecs: {c!r} is not one of {', '.join(CODECS)}")
            media = [(x, c, g) for x in heights for c in codecs for g in gops]
        videos += make_media(a.make, media=media)
        if a.export:
            heights = [int(x.rstrip("p")) for x in (a.resolutions or "1080").split(",")]
            videos += [make_export(a.make, x) for x in heights if x in HEIGHTS]
    videos = sorted(set(v for p in videos for v in glob.glob(p)))
    if not videos:
        ap.error("no videos: --make DIR or --videos FILE...")
    h, w = (int(x) for x in a.size.lower().split("x"))
    thread_list = [int(x) for x in a.threads.split(",") if x]
    kinds = set(a.kinds.split(","))
    if not thread_list or not kinds <= {"random", "first"}:
        ap.error("--threads: a list of counts; --kinds: random, first or both")
    rng = np.random.default_rng(a.seed)
    layouts = {v: stream_layout(v) for v in videos}

    workloads = []  # (name, clips, estimated frames decoded from the keyframe)
    for v in videos:
        total, keys = layouts[v]
        tag = os.path.basename(v)
        for interval in (int(x) for x in a.intervals.split(",") if "random" in kinds):
            span = (a.frames - 1) * interval + 1
            starts = [int(s) for s in rng.integers(0, total - span + 1, a.clips)]
            workloads.append((f"{tag} random i={interval}",
                              [(v, s, a.frames, interval) for s in starts]))
        if "first" in kinds:
            workloads.append((f"{tag} first frames i=1",
                              [(v, 0, a.frames, 1)] * max(1, a.clips // 2)))

    def estimate(clips) -> int:  # every frame from the keyframe before the clip to its end
        n = 0
        for v, start, frames, interval in clips:
            keys = layouts[v][1]
            key = max([k for k in keys if k <= start], default=0)
            n += start + (frames - 1) * interval - key + 1
        return n

    names = [d for d in a.decoders.split(",") if d]
    # torch's OpenMP threads (torchcodec's crop copy) spin while idle: at 2 threads that doubled
    # torchcodec's CPU time without decoding anything. Passive waiting, unless the caller says.
    worker_env = dict(os.environ)
    worker_env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    print(f"{len(videos)} videos, {a.clips} clips a workload, {a.frames} frames, size {h}x{w}, "
          f"threads {a.threads}, median of {a.repeats} alternating runs")
    header = (f"{'workload':38} {'decoder':11} {'samples/s':>9} {'cpu s/sample':>12} "
              f"{'decoded/delivered':>18} {'PSNR vs vbucket':>15}")
    print(header)
    print("-" * len(header))
    for (title0, clips), threads in ((wl, t) for wl in workloads for t in thread_list):
        title = title0 if len(thread_list) == 1 else f"{title0} t={threads}"
        plan = {"height": h, "width": w, "threads": threads, "clips": clips}
        plan_path = f"/tmp/compare_decoders_{os.getpid()}.json"
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        runs = {n: [] for n in names}
        for _ in range(a.repeats):
            for n in names:
                p = subprocess.run([sys.executable, __file__, "--worker", n, "--plan", plan_path],
                                   capture_output=True, text=True, env=worker_env)
                line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
                runs[n].append(json.loads(line) if p.returncode == 0 and line else
                               {"missing": (p.stderr.strip().splitlines() or ["failed"])[-1]})
        delivered = sum(c[2] for c in clips)
        ref = runs.get("vbucket", [{}])[0].get("first")
        ref = np.frombuffer(bytes.fromhex(ref), np.uint8) if ref else None
        for n in names:
            rs = runs[n]
            if any("missing" in r for r in rs):
                print(f"{title:38} {n:11} not run: {rs[0].get('missing', '?')[:60]}")
                continue
            sps = statistics.median(len(clips) / r["wall"] for r in rs)
            cpu = statistics.median(r["cpu"] / len(clips) for r in rs)
            if "decoded" in rs[0]:
                ratio = f"{rs[0]['decoded'] / delivered:.2f}"
            else:
                ratio = f"{estimate(clips) / delivered:.2f} est."
            first = np.frombuffer(bytes.fromhex(rs[0]["first"]), np.uint8)
            quality = "-" if n == "vbucket" or ref is None else f"{psnr(first, ref):.1f} dB"
            print(f"{title:38} {n:11} {sps:9.2f} {cpu:12.4f} {ratio:>18} {quality:>15}")
        os.unlink(plan_path)


if __name__ == "__main__":
    main()
