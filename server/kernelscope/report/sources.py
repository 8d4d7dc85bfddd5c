"""The functions a trace's Python frames name, found in the local project: a path recorded on
another machine (or shortened by Kineto to its module path) names the file under the root
that shares the longest tail with it, and the function in that file is found by its name
and first line (by its name alone when it moved)."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from kernelscope.analysis.functions import MODULE_CODE, FunctionTime
from kernelscope.pyfunctions import FunctionDef, functions
from kernelscope.report.schema import FunctionRow

#: Folders never searched for a recorded file (hidden ones neither): caches, installed
#: packages, build output.
SKIPPED = frozenset({"__pycache__", "node_modules", "site-packages", "dist-packages", "build"})
#: Files looked at, at most, when searching the project for recorded paths.
MAX_FILES = 50_000


def local_files(recorded: list[str], root: Path) -> dict[str, tuple[Path, int] | None]:
    """For each recorded path, the local file it names and how many files tie for it: the
    file under ``root`` whose path shares the longest tail with it (a path recorded on this
    machine under ``root`` is itself); None when no file under ``root`` has its name."""
    wanted = {PurePosixPath(r.replace("\\", "/")).name for r in recorded}
    found: dict[str, list[Path]] = {}
    for path in _project_files(root):
        if path.name in wanted:
            found.setdefault(path.name, []).append(path)
    out: dict[str, tuple[Path, int] | None] = {}
    for r in recorded:
        parts = PurePosixPath(r.replace("\\", "/")).parts
        scored = [
            (_shared_tail(parts, c.relative_to(root).parts), c) for c in found.get(parts[-1], [])
        ]
        if not scored:
            out[r] = None
            continue
        best = max(score for score, _ in scored)
        ties = sorted((c for score, c in scored if score == best), key=lambda c: (len(c.parts), c))
        out[r] = (ties[0], len(ties))
    return out


def _shared_tail(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def _project_files(root: Path) -> list[Path]:
    """The files under ``root``, less hidden folders, environments and caches."""
    out: list[Path] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and d not in SKIPPED
            and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg"))
        )
        out += (Path(folder, n) for n in names)
        if len(out) >= MAX_FILES:
            break
    return out


def locate(times: list[FunctionTime], root: Path) -> list[FunctionRow]:
    """Each function with its local file, qualified name and def line where they are found."""
    files = local_files(sorted({t.path for t in times}), root)
    sources: dict[Path, tuple[FunctionDef, ...]] = {}
    rows: list[FunctionRow] = []
    for t in times:
        row = FunctionRow(**{f: getattr(t, f) for f in t.__struct_fields__})
        match = files[t.path]
        if match is not None:
            found, row.ties = match
            if found not in sources:
                try:
                    sources[found] = functions(found.read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError):
                    sources[found] = ()
            row.local_path = str(found)
            if t.name == MODULE_CODE:
                rows.append(row)
                continue
            fn = _function(sources[found], t.name, t.line)
            if fn is not None:
                row.qualname, row.local_line = fn.qualname, fn.def_line
                row.moved = fn.first_line != t.line
        rows.append(row)
    return rows


def _function(defs: tuple[FunctionDef, ...], name: str, first_line: int) -> FunctionDef | None:
    """The def named ``name`` that starts at ``first_line``, else the nearest one so named."""
    named = [d for d in defs if d.name == name]
    exact = next((d for d in named if d.first_line == first_line), None)
    if exact is not None or not named:
        return exact
    return min(named, key=lambda d: abs(d.first_line - first_line))
