"""The manual (README.md and docs/**/*.md) is tested as Markdown: every fenced code block is run
or compiled, its relative links resolve, the generated reference pages are what
scripts/gen_docs.py writes, and the site builds with `mkdocs build --strict` (when MkDocs is
installed). docs/writing_docs.md describes the block kinds and the markers.

Block kinds, by the fence's language:
- ``python``: run in a fresh interpreter (this one), in a temporary directory;
- ``cpp``: a whole program (it has ``int main(``) is compiled, linked and run; a fragment is
  compiled (syntax only) inside the named prelude (``fragment=NAME`` below);
- ``sh``/``bash``: run with ``bash -euo pipefail`` in a temporary directory that looks like the
  repository root (``tests/``, ``examples/``, ``build/vbucket`` and ``.venv/bin/python`` are
  there; ``vbucket`` and ``python`` are on PATH);
- ``json``: parsed; ``text``, ``diff``, ``cmake``, ``jsonl``, ``csv``, ``console`` and
  ``toml``: shown only.

A marker, an HTML comment on the line before the fence, changes that:
``<!-- doc-test: not-run: REASON -->`` shows a python/cpp/sh block without running it (the
reason is required); ``<!-- doc-test: fragment=NAME needs=A,B id=ID -->`` names the prelude a
fragment is completed with, what the block needs (skipped with a message without it) and an
id other tests find it by.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

from conftest import ROOT, find_cli

DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
EXECUTABLE = {"python", "cpp", "sh", "bash"}
SHOWN = {"text", "diff", "cmake", "jsonl", "csv", "console", "toml", "json"}
KNOWN_NEEDS = {"torch", "ffmpeg", "mpi", "nvcc", "accelerate", "cli", "eigen", "fmt"}
MARKER = re.compile(r"^<!-- doc-test: (.*?) -->$")
FENCE = re.compile(r"^(```+)([\w+-]*)\s*$")


@dataclasses.dataclass
class Block:
    path: pathlib.Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    marker: str  # the marker's text, "" when there is none

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def not_run(self) -> str | None:
        return self.marker[len("not-run:"):].strip() if self.marker.startswith("not-run:") else None

    @property
    def options(self) -> dict[str, str]:
        if self.not_run is not None:
            return {}
        return dict(tok.split("=", 1) for tok in self.marker.split())

    @property
    def needs(self) -> list[str]:
        n = self.options.get("needs", "")
        return [x for x in n.split(",") if x]


def parse_blocks(path: pathlib.Path) -> list[Block]:
    lines = path.read_text().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2), i
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != fence:
            j += 1
        if j == len(lines):
            raise AssertionError(f"{path.relative_to(ROOT)}:{start + 1}: unclosed code fence")
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mm = MARKER.match(lines[k].strip()) if k >= 0 else None
        blocks.append(Block(path, start + 1, lang, "\n".join(lines[start + 1:j]) + "\n",
                            mm.group(1).strip() if mm else ""))
        i = j + 1
    return blocks


ALL = [b for p in PAGES for b in parse_blocks(p)]


def blocks_of(*langs: str) -> list:
    return [pytest.param(b, id=b.name) for b in ALL
            if b.lang in langs and b.not_run is None]


def by_id(ident: str) -> Block:
    found = [b for b in ALL if b.options.get("id") == ident]
    assert len(found) == 1, f"{len(found)} blocks with id={ident}"
    return found[0]


# ---- what a block needs --------------------------------------------------------------------


@functools.cache
def pkg_config(*mods: str) -> list[str] | None:
    if shutil.which("pkg-config") is None:
        return None
    r = subprocess.run(["pkg-config", "--cflags", *mods], capture_output=True, text=True)
    return r.stdout.split() if r.returncode == 0 else None


@functools.cache
def mpi_flags() -> list[str] | None:
    for cmd in (["mpicxx", "--showme:compile"], ["pkg-config", "--cflags", "ompi-cxx"],
                ["pkg-config", "--cflags", "ompi-c"]):
        if shutil.which(cmd[0]):
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode == 0:
                return r.stdout.split()
    return None


def has_ffmpeg_python() -> bool:
    from vbucket import _vbucket

    return bool(getattr(_vbucket, "HAS_FFMPEG", False))


FFMPEG_MODS = ("libavformat", "libavcodec", "libswscale", "libavutil")


def missing(block: Block) -> str | None:
    """Why the block cannot run here (None: it can)."""
    for need in block.needs:
        if need in ("torch", "accelerate") and importlib.util.find_spec(need) is None:
            return f"{need} is not installed"
        if need == "ffmpeg":
            if block.lang == "python" and not has_ffmpeg_python():
                return "vbucket built without the FFmpeg adapter"
            if block.lang == "cpp" and pkg_config(*FFMPEG_MODS) is None:
                return "FFmpeg's development packages are not installed"
            if block.lang in ("sh", "bash") and shutil.which("ffmpeg") is None:
                return "the ffmpeg command is not installed"
        if need == "mpi" and mpi_flags() is None:
            return "MPI's development package is not installed"
        if need == "nvcc" and nvcc() is None:
            return "no nvcc (the CUDA toolkit)"
        if need == "cli" and not find_cli():
            return "no vbucket CLI: set VBUCKET_CLI or build build/vbucket"
        if need == "eigen" and not pathlib.Path("/usr/include/eigen3").is_dir():
            return "Eigen is not installed"
    return None


def nvcc() -> str | None:
    found = shutil.which("nvcc")
    if not found and os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
        found = "/usr/local/cuda/bin/nvcc"
    return found


# ---- the shape of every block --------------------------------------------------------------


def test_every_block_has_a_known_kind():
    problems = []
    for b in ALL:
        if b.lang not in EXECUTABLE | SHOWN:
            problems.append(f"{b.name}: fence language {b.lang!r} (name one of "
                            f"{sorted(EXECUTABLE | SHOWN)}; ```text for output)")
        if b.not_run is not None:
            if b.lang not in EXECUTABLE:
                problems.append(f"{b.name}: not-run on a {b.lang!r} block (it is never run)")
            elif len(b.not_run) < 10:
                problems.append(f"{b.name}: not-run needs a reason")
            continue
        if b.marker:
            try:
                opts = b.options
            except ValueError:
                problems.append(f"{b.name}: malformed marker {b.marker!r}")
                continue
            for k in opts:
                if k not in ("fragment", "needs", "id"):
                    problems.append(f"{b.name}: unknown marker key {k!r}")
            for n in b.needs:
                if n not in KNOWN_NEEDS:
                    problems.append(f"{b.name}: unknown need {n!r}")
            frag = opts.get("fragment")
            if frag is not None and frag not in PRELUDES.get(b.lang, {}):
                problems.append(f"{b.name}: no {b.lang} prelude named {frag!r}")
        if b.lang == "cpp" and "int main(" not in b.code and "fragment" not in b.options:
            problems.append(f"{b.name}: a C++ fragment needs fragment=NAME (or a main)")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("block", [pytest.param(b, id=b.name) for b in ALL if b.lang == "json"])
def test_json_block_parses(block):
    json.loads(block.code)


# ---- the README's promises -----------------------------------------------------------------


def test_readme_is_short_and_starts_in_a_few_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300
    py = by_id("python-start")
    cpp = by_id("cpp-start")
    assert py.path.name == cpp.path.name == "README.md"
    assert len(py.code.strip().splitlines()) <= 10
    assert len(cpp.code.strip().splitlines()) <= 15


# ---- links ---------------------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading (GitHub's differs where a
    heading has punctuation between words: it keeps one hyphen per space)."""
    import unicodedata

    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"[`*]", "", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: pathlib.Path) -> set[str]:
    out, fence = set(), False
    for line in path.read_text().split("\n"):
        if FENCE.match(line):
            fence = not fence
        elif not fence and (m := re.match(r"#{1,6} (.*)", line)):
            out.add(slug(m.group(1)))
    return out


def prose(path: pathlib.Path) -> str:
    """The page without its code blocks and code spans."""
    text = re.sub(r"^(```+)[\w+-]*\s*\n.*?^\1\s*$", "", path.read_text(), flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def test_relative_links_resolve():
    dead = []
    for page in PAGES:
        for target in LINK.findall(prose(page)):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not dest.exists():
                dead.append(f"{where}: no such file")
                continue
            if page.is_relative_to(DOCS) and not dest.is_relative_to(DOCS):
                dead.append(f"{where}: outside docs/ (the site has only docs/; name the "
                            "repository file in `code` instead)")
                continue
            if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                dead.append(f"{where}: no heading with the anchor #{anchor}")
    assert not dead, "\n".join(dead)


def test_every_page_is_in_the_site_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    listed = set(re.findall(r"([\w/.-]+\.md)", nav))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages == listed, f"not in mkdocs.yml's nav: {sorted(pages - listed)}; " \
                            f"in the nav but missing: {sorted(listed - pages)}"


# ---- generated pages and the site ----------------------------------------------------------


def gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_cli_reference_is_current(cli):
    gen = gen_docs()
    if not {"scan", "decode"} <= set(gen.cli_commands(cli)):
        pytest.skip("the CLI was built without the FFmpeg adapter; the reference is of a full build")
    want = gen.cli_reference(cli)
    have = (ROOT / gen.CLI_PAGE).read_text()
    assert have == want, f"{gen.CLI_PAGE} is stale: run `{gen.COMMAND}`"


def test_generated_python_reference_is_current():
    gen = gen_docs()
    if not has_ffmpeg_python():
        pytest.skip("vbucket built without the FFmpeg adapter; the reference is of a full build")
    want = gen.python_reference()
    have = (ROOT / gen.PY_PAGE).read_text()
    assert have == want, f"{gen.PY_PAGE} is stale: run `{gen.COMMAND}`"


def test_generated_cpp_reference_is_current():
    gen = gen_docs()
    assert (ROOT / gen.CPP_PAGE).read_text() == gen.cpp_reference(), \
        f"{gen.CPP_PAGE} is stale: run `{gen.COMMAND}`"


def test_site_builds_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("MkDocs is not installed (pip install mkdocs; .ci/run installs it): the site "
                    "build is not checked")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f",
                        str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "site" / "index.html").is_file()


# ---- running the blocks --------------------------------------------------------------------


@pytest.fixture
def workdir(tmp_path):
    """A temporary directory shaped like the repository root for the examples' relative paths."""
    for name in ("tests", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / "build").mkdir()
    cli = find_cli()
    cli = os.path.abspath(cli) if cli else cli  # a relative VBUCKET_CLI, from another cwd
    if cli:
        (tmp_path / "build" / "vbucket").symlink_to(cli)
    # The interpreter under test by a wrapper, not a symlink: a venv's python is a venv only when
    # started by its own path (it looks for pyvenv.cfg beside the path it was started as).
    wrapper = f'#!/bin/sh\nexec "{sys.executable}" "$@"\n'
    bindir = tmp_path / ".doc-bin"
    bindir.mkdir()
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    for path in (tmp_path / ".venv" / "bin" / "python", bindir / "python", bindir / "python3"):
        path.write_text(wrapper)
        path.chmod(0o755)
    if cli:
        (bindir / "vbucket").symlink_to(cli)
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
               MPLBACKEND="Agg")
    return tmp_path, env


def run(cmd, cwd, env, timeout=300, what=""):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{what} failed ({r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r


@pytest.mark.parametrize("block", blocks_of("sh", "bash"))
def test_shell_block_runs(block, workdir):
    if why := missing(block):
        pytest.skip(why)
    tmp, env = workdir
    prelude = PRELUDES["sh"].get(block.options.get("fragment", ""), "")
    script = tmp / "block.sh"
    script.write_text(prelude + block.code)
    run(["bash", "-euo", "pipefail", str(script)], tmp, env, what=block.name)


@pytest.mark.parametrize("block", blocks_of("python"))
def test_python_block_runs(block, workdir, request):
    if why := missing(block):
        pytest.skip(why)
    tmp, env = workdir
    frag = block.options.get("fragment", "")
    before, after = PRELUDES["python"].get(frag, ("", ""))
    if frag in ("videos", "media"):
        (tmp / "videos").symlink_to(request.getfixturevalue("media"))  # conftest: e2e media
    code = before + "\n# ---- the block ----\n" + block.code + "\n# ---- checks ----\n" + after
    (tmp / "block.py").write_text(code)
    run([sys.executable, str(tmp / "block.py")], tmp, env, what=block.name)


INCLUDES = ["include", "adapters/json/include", "adapters/fmt/include", "adapters/eigen/include",
            "adapters/ffmpeg/include", "adapters/mpi/include", "adapters/cuda/include"]


def cxx_flags(block: Block) -> list[str]:
    flags = ["-std=c++20", "-pthread", *[f"-I{ROOT / d}" for d in INCLUDES]]
    if "ffmpeg" in block.needs:
        flags += pkg_config(*FFMPEG_MODS) or []
    if "mpi" in block.needs:
        flags += mpi_flags() or []
    if "eigen" in block.needs:
        flags += ["-I/usr/include/eigen3"]
    return flags


RUN_LIBRARY_SOURCES = sorted((ROOT / "src" / "run").glob("*.cpp"))


@functools.lru_cache(maxsize=None)
def run_library(cxx: str) -> list[str]:
    """vbucket::run's objects (src/run/*.cpp), compiled once per session for the blocks that
    include a header of vbucket/run/ or the JSON adapter's run readers (as linking
    vbucket::run does)."""
    outdir = tempfile.mkdtemp(prefix="vbucket_run_objects_")
    objects = []
    for src in RUN_LIBRARY_SOURCES:
        obj = pathlib.Path(outdir) / (src.stem + ".o")
        subprocess.run([cxx, "-std=c++20", "-pthread", "-O1", *[f"-I{ROOT / d}" for d in INCLUDES],
                        "-c", str(src), "-o", str(obj)], check=True)
        objects.append(str(obj))
    return objects


def uses_run_library(code: str) -> bool:
    return re.search(r'#include\s*[<"]vbucket/(run/|run\.hpp|json/run_)', code) is not None


def hoist_includes(code: str) -> tuple[str, str]:
    head = [l for l in code.split("\n") if l.startswith("#include")]
    body = [l for l in code.split("\n") if not l.startswith("#include")]
    return "\n".join(head) + "\n", "\n".join(body)


@pytest.mark.parametrize("block", blocks_of("cpp"))
def test_cpp_block_compiles(block, workdir):
    if why := missing(block):
        pytest.skip(why)
    tmp, env = workdir
    cxx = os.environ.get("CXX", "g++")
    frag = block.options.get("fragment")
    if frag is None:  # a whole program: build and run it
        src = tmp / "block.cpp"
        src.write_text(block.code)
        libs = []
        if uses_run_library(block.code):
            libs = run_library(cxx)
        run([cxx, *cxx_flags(block), "-O1", str(src), *libs, "-o", str(tmp / "block")], tmp, env,
            what=f"{block.name}: compile")
        run([str(tmp / "block")], tmp, env, what=f"{block.name}: run")
        return
    includes, body = hoist_includes(block.code)
    before, after = PRELUDES["cpp"][frag]
    if "nvcc" in block.needs:
        src = tmp / "block.cu"
        src.write_text(includes + before + body + after)
        run([nvcc(), "-std=c++20", *[f"-I{ROOT / d}" for d in INCLUDES], "-c", str(src), "-o",
             str(tmp / "block.o")], tmp, env, what=f"{block.name}: nvcc")
        return
    src = tmp / "block.cpp"
    src.write_text(includes + before + body + after)
    run([cxx, *cxx_flags(block), "-fsyntax-only", str(src)], tmp, env, what=f"{block.name}: compile")


# ---- preludes: what a fragment is completed with -------------------------------------------
# python: (code before, code after); cpp: (file scope + the opening of a function, its end; the
# fragment's #include lines are moved to the top); sh: code before.

PY_SAMPLER_DATASET = '''
import pandas as pd
import torch

class OpenSoraLikeDataset(torch.utils.data.Dataset):
    """An Open-Sora dataset's data path: .data is the metadata; items are 'index-T-H-W'."""
    def __init__(self, path):
        self.data = pd.read_csv(path)
    def __len__(self):
        return len(self.data)
    def __getitem__(self, item):
        index, t, h, w = (int(x) for x in str(item).split("-"))
        # Open-Sora's items: a video tensor, its caption (default_collate makes a list of str)
        return {"video": torch.full((1, t, 2, 2), float(index)), "text": f"caption {index}",
                "index": index}

dataset = OpenSoraLikeDataset("examples/data/sample_meta.csv")
epochs = 2
ckpt = {}
trained = []
def train_step(batch):
    assert isinstance(batch["text"], list) and isinstance(batch["text"][0], str)
    trained.append((sampler.epoch, tuple(batch["index"].tolist())))
'''

PRELUDES: dict[str, dict] = {
    "python": {
        "media": ("", ""),  # the e2e media as videos/, nothing else
        "videos": ('''
import torch
seen = []
def train_step(tensor, thw):
    assert tensor.dtype == torch.bfloat16 and tuple(tensor.shape[1:]) == (3, *thw)
    assert float(tensor.min()) >= -1 and float(tensor.max()) <= 1
    seen.append(tensor.shape[0])
''', '''
assert len(seen) > 10 and sum(seen) > 40, seen
'''),
        "opensora-dataset": (PY_SAMPLER_DATASET, '''
# the checkpoint resumes exactly: a new sampler (a new process would make one) loaded from it
# yields the batches trained after it, with workers prefetching ahead of training
assert ckpt["sampler"]["epoch"] == 1 and saved_after == 4
resumed = vbucket.VariableVideoBatchSampler(dataset, cfg, seed=42, output="indices")
resumed.load_state_dict(ckpt["sampler"])
resumed.set_step(saved_after)
resumed.set_epoch(1)
rest = [tuple(b) for b in resumed]
after = [b for e, b in trained if e == 1][saved_after:]
assert rest == after, (len(rest), len(after))
'''),
        "accelerate": (PY_SAMPLER_DATASET + '''
import vbucket
from accelerate import Accelerator
accelerator = Accelerator(cpu=True)
model = torch.nn.Linear(1, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
cfg = "tests/data/config_360p_example.json"
''', '''
assert batch["video"].device == accelerator.device and isinstance(batch["text"], list)
assert steps == steps_per_epoch == len(list(sampler)) > 0
'''),
    },
    "cpp": {
        "rule-member": ('''
#include <cstdint>
#include <vbucket/vbucket.hpp>
struct my_rule {
''', '''
};
'''),
        "loader": ('''
#include <cstdint>
#include <string>
#include <vector>
#include <vbucket/vbucket.hpp>
#include <vbucket/ffmpeg/file_decoder.hpp>
struct my_clip { std::string path; int num_frames, height, width; double fps; };
std::vector<my_clip> read_my_metadata();
template <class Tensor, class Info> void train_step(const Tensor&, const Info&);
void doc_fragment(const vbucket::bucket_config& config, std::uint32_t world, std::uint32_t rank,
                  std::uint64_t start_epoch, std::uint64_t epochs, bool resuming,
                  const std::string& saved) {
  struct { std::string data_state; } checkpoint;
''', '''
}
'''),
        "ffmpeg": ('''
#include <cstdint>
#include <vector>
void doc_fragment(std::uint64_t seed) {
''', '''
}
'''),
        "mpi": ('''
#include <cstdint>
#include <vbucket/vbucket.hpp>
void doc_fragment(int argc, char** argv, const vbucket::meta_table& meta,
                  const vbucket::bucket_config& config, const vbucket::opensora_v2_rule& rule,
                  std::uint64_t epoch) {
''', '''
}
'''),
        "staging": ('''
#include <cstdint>
#include <cuda_bf16.h>
#include <vbucket/vbucket.hpp>
#include <vbucket/cuda/normalize.cuh>
#include <vbucket/cuda/pinned_backend.hpp>
void decode_batch_into(std::span<std::byte>);
void doc_fragment(const vbucket::bucket_config& config, vbucket::bucket_id bucket,
                  std::uint8_t* device_u8, __nv_bfloat16* device_bf16,
                  const vbucket::batch_shape& shape) {
''', '''
}
'''),
    },
    "sh": {},
}
