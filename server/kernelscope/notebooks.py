"""A notebook's code cells as one Python module, and its lines mapped back to the cells.

The worker imports a module; a notebook is cells. ``build_module`` joins the code cells in
order (up to a cell, when one is given) into one source text. In a cell that is not Python
as it is, each IPython-only line (line magics ``%matplotlib``, shell escapes ``!ls``,
``x = !ls``, help ``obj?``) is replaced by a ``pass`` of the same indentation, so every
other line keeps its number (``%time stmt`` keeps its statement); a cell magic that is not
Python (``%%bash``) leaves its whole cell out, with a note. The first line puts the
notebook's folder on ``sys.path`` (Jupyter runs there); cells follow from line 2.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: Cell magics whose body is Python: the magic line goes, the body stays.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
#: Where each notebook's module is written, under the project's `.kernelscope/`.
MODULES_DIR = "notebooks"

_LINE_MAGIC = re.compile(r"^(\s*)(%|!)")
_TIMED = re.compile(r"^(\s*)%(?:time|timeit|prun)\s+(\S.*)$")
_ASSIGNED_MAGIC = re.compile(r"^(\s*[\w.,\s\[\]]+?=\s*)(%|!)(.*)$")
_HELP = re.compile(r"^(\s*)(\?\??[\w.]+|[\w.]+\?\??)\s*$")


@dataclass(frozen=True)
class Cell:
    """One cell as the editor has it: its document URI, text and whether it is Python code."""

    uri: str
    text: str
    code: bool = True


@dataclass(frozen=True)
class Span:
    """Where a cell sits in the module: module lines ``first`` to ``first + count - 1``."""

    uri: str
    first: int
    count: int

    def contains(self, line: int) -> bool:
        """Whether module line ``line`` (1-based) is in this cell."""
        return self.first <= line < self.first + self.count


@dataclass(frozen=True)
class Note:
    """Something of the notebook the module left out: a magic, a cell not in Python."""

    uri: str
    line: int
    """1-based line in the cell."""
    message: str


@dataclass
class NotebookModule:
    """The module's text, each code cell's span in it, and what was left out."""

    source: str
    spans: list[Span] = field(default_factory=list[Span])
    notes: list[Note] = field(default_factory=list[Note])

    def span_of(self, uri: str) -> Span | None:
        """The span of the cell with document ``uri``."""
        return next((s for s in self.spans if s.uri == uri), None)


def build_module(
    cells: Sequence[Cell], folder: Path | None = None, upto: str | None = None
) -> NotebookModule:
    """The code cells (up to and including the cell ``upto``, when given) as one module."""
    prologue = (
        f"import sys as _ks_sys; _ks_sys.path.insert(0, {str(folder)!r}); del _ks_sys"
        if folder is not None
        else "pass"
    )
    lines = [prologue + "  # kernelscope: the notebook's folder, as Jupyter has it"]
    module = NotebookModule("")
    for cell in cells:
        if not cell.code:
            continue
        body, notes = _python_lines(cell)
        module.spans.append(Span(cell.uri, len(lines) + 1, len(body)))
        module.notes += notes
        lines += body
        if cell.uri == upto:
            break
    module.source = "\n".join(lines) + "\n"
    return module


def _python_lines(cell: Cell) -> tuple[list[str], list[Note]]:
    """The cell's lines with IPython syntax replaced (as many lines as the cell has)."""
    lines = cell.text.split("\n") if cell.text else [""]
    notes: list[Note] = []
    first = lines[0].strip()
    if first.startswith("%%"):
        name = first[2:].split(maxsplit=1)[0] if first[2:].strip() else ""
        if name not in PYTHON_CELL_MAGICS:
            notes.append(Note(cell.uri, 1, f"a %%{name} cell is not Python: left out"))
            return ["pass  # kernelscope: left out"] + ["#"] * (len(lines) - 1), notes
        notes.append(Note(cell.uri, 1, f"%%{name} stripped: the cell's body runs as it is"))
        return ["pass  # kernelscope: %%" + name + " stripped", *lines[1:]], notes
    if _parses(cell.text):  # Python as it is: `(a\n % b)` or a `!` in a string stay
        return lines, notes
    out: list[str] = []
    for number, line in enumerate(lines, 1):
        replaced = _replace(line)
        if replaced is not None:
            notes.append(Note(cell.uri, number, f"IPython syntax stripped: {line.strip()}"))
            out.append(replaced)
        else:
            out.append(line)
    return out, notes


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _replace(line: str) -> str | None:
    """The Python that stands in for an IPython-only line, or None for a Python line."""
    if m := _TIMED.match(line):  # `%time y = f()`: the statement runs, untimed
        return f"{m.group(1)}{m.group(2)}"
    if m := _LINE_MAGIC.match(line):
        return f"{m.group(1)}pass  # kernelscope: stripped"
    if (m := _ASSIGNED_MAGIC.match(line)) and "==" not in m.group(1):
        return f"{m.group(1)}None  # kernelscope: stripped"
    if m := _HELP.match(line):
        return f"{m.group(1)}pass  # kernelscope: stripped"
    return None


def module_path(notebook: Path, root: Path) -> Path:
    """Where the module of ``notebook`` is written: ``.kernelscope/notebooks/`` of its
    project, named after it (and its folder's hash, so two folders' ``main.ipynb`` differ)."""
    tag = hashlib.sha1(str(notebook.parent).encode()).hexdigest()[:6]
    stem = re.sub(r"\W", "_", notebook.stem)
    return root / ".kernelscope" / MODULES_DIR / f"{stem}_ipynb_{tag}.py"
