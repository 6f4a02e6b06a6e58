"""Writes (or with --check, compares) the package's type stubs from the built module:

* ``vbucket/_vbucket.pyi``: nanobind's stubgen of the extension (``python -m nanobind.stubgen
  -m vbucket._vbucket --exclude-values``), so the stub is the module's own signatures;
* ``vbucket/__init__.pyi``: hand-written, except the blocks between ``# BEGIN run fields: NAME``
  and ``# END run fields``, which list the keyword arguments a run takes (the library's field
  table, ``vbucket.FIELDS``) with their types and defaults (``vbucket.DEFAULTS``), as the
  functions' generated signatures carry them.

    PYTHONPATH=<package tree> python python/gen_stubs.py [--check]

--check exits 1 naming each stub that differs from what would be written (a new run field, a
changed default or a binding change not regenerated). The extension must be built with the
FFmpeg, Eigen and {fmt} adapters (the checked-in stub lists their functions).
"""

from __future__ import annotations

import argparse
import inspect
import pathlib
import re
import subprocess
import sys
import tempfile
import typing

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = HERE / "vbucket"
# The built package from PYTHONPATH, not the sources beside this script (no extension there).
sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != HERE]

BLOCK = re.compile(r"(?P<indent>[ ]*)# BEGIN run fields: (?P<name>[\w.]+)\n(?P<body>.*?)"
                   r"(?P=indent)# END run fields\n", re.S)


def _annotation(a) -> str:
    """A typing annotation as stub text."""
    origin = typing.get_origin(a)
    if origin is typing.Literal:
        return "Literal[" + ", ".join(f'"{v}"' for v in typing.get_args(a)) + "]"
    if origin is typing.Union:
        return "Union[" + ", ".join(_annotation(x) for x in typing.get_args(a)) + "]"
    if origin is tuple:
        return "Tuple[" + ", ".join(_annotation(x) for x in typing.get_args(a)) + "]"
    return a.__name__


def _run_field_lines(fn, indent: str) -> str:
    """The keyword-only run fields of `fn`'s signature as stub parameters."""
    lines = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind != p.KEYWORD_ONLY or p.name not in getattr(fn, "run_fields", ()):
            continue
        ann = _annotation(p.annotation)
        if p.default is None:
            lines.append(f"{indent}{p.name}: Optional[{ann}] = None,")
        else:
            default = f'"{p.default}"' if isinstance(p.default, str) else repr(p.default)
            lines.append(f"{indent}{p.name}: {ann} = {default},")
    return "".join(line + "\n" for line in lines)


def init_stub(text: str) -> str:
    import vbucket

    def fill(m: re.Match) -> str:
        obj = vbucket
        for part in m["name"].split("."):
            obj = getattr(obj, part)
        indent = m["indent"]
        return (f"{indent}# BEGIN run fields: {m['name']}\n" + _run_field_lines(obj, indent)
                + f"{indent}# END run fields\n")

    return BLOCK.sub(fill, text)


def extension_stub() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "_vbucket.pyi"
        subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-m", "vbucket._vbucket",
                        "--exclude-values", "-q", "-o", str(out)], check=True)
        return out.read_text()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="compare instead of writing")
    a = p.parse_args(argv)
    init = PACKAGE / "__init__.pyi"
    wanted = {PACKAGE / "_vbucket.pyi": extension_stub(), init: init_stub(init.read_text())}
    stale = []
    for path, text in wanted.items():
        if path.read_text() == text:
            continue
        if a.check:
            stale.append(path.name)
        else:
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print(f"stale stubs: {', '.join(stale)} (run python python/gen_stubs.py with the built "
              "package on PYTHONPATH)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
