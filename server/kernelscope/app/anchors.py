"""Where a run's lines are now: a run records the functions and the code of the lines it
names; after edits, each line is found again, by its function (qualified name and text hash:
an unchanged function moved as a whole) and else by its code, nearest where it was.

Imports no report module (the language server uses it before any job ran): the report's
fields are only read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from kernelscope.pyfunctions import FunctionDef, functions

if TYPE_CHECKING:
    from kernelscope.app.store import RunRecord
    from kernelscope.findings import Finding
    from kernelscope.report.schema import LineRow, Report


class Place(msgspec.Struct, array_like=True):
    """A function as it was when the run was made: its lines (1-based) and text hash."""

    path: str
    qualname: str
    first_line: int
    def_line: int
    end_line: int
    text_hash: str


class Spot(msgspec.Struct, array_like=True):
    """A line the run names, with its code then (stripped) and the function around it ("":
    none)."""

    path: str
    line: int
    code: str
    function: str = ""


class Anchors(msgspec.Struct):
    """What a run needs to find its lines again after edits."""

    functions: list[Place] = msgspec.field(default_factory=list[Place])
    spots: list[Spot] = msgspec.field(default_factory=list[Spot])


def named_lines(report: Report) -> set[tuple[str, int]]:
    """Every (path, line) the report puts something on."""
    out = {(report.function.path, report.function.line)}
    out |= {(r.path, r.line) for r in report.lines}
    out |= {(f.path or report.function.path, f.line) for f in report.findings if f.line}
    return out


def anchors_of(report: Report, path: str, source: str | None) -> Anchors:
    """The anchors of a run of a function of `path`, whose text then was `source` (the
    buffer the job ran; None: read from disk, as other files are)."""
    named = named_lines(report)
    anchors = Anchors()
    for file in sorted({p for p, _ in named}):
        text = source if file == path and source is not None else _read(file)
        if text is None:
            continue
        lines = text.splitlines()
        fns = functions(text)
        used: dict[str, FunctionDef] = {}
        for _, line in sorted(x for x in named if x[0] == file):
            fn = _around(fns, line)
            if fn is not None:
                used[fn.qualname] = fn
            code = lines[line - 1].strip() if 0 < line <= len(lines) else ""
            anchors.spots.append(Spot(file, line, code, fn.qualname if fn else ""))
        anchors.functions += [
            Place(file, f.qualname, f.first_line or f.def_line, f.def_line, f.end_line, f.text_hash)
            for f in used.values()
        ]
    return anchors


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _around(fns: Sequence[FunctionDef], line: int) -> FunctionDef | None:
    """The innermost function whose lines, decorators included, hold `line`."""
    best: FunctionDef | None = None
    for fn in fns:
        if (fn.first_line or fn.def_line) <= line <= fn.end_line and (
            best is None or fn.def_line >= best.def_line
        ):
            best = fn
    return best


@dataclass(frozen=True)
class Moved:
    """Where the lines of one file named by a run are in its text now: ``lines`` maps a line
    then to its line now (absent: not found again)."""

    lines: dict[int, int]

    def now(self, line: int) -> int | None:
        """The line `line` of the run is now, or None."""
        return self.lines.get(line)


def relocate(anchors: Anchors, path: str, source: str, then_lines: Iterable[int] = ()) -> Moved:
    """Find the lines the run named in `path` in its text now, `source`: a line of a function
    whose text is unchanged moves with it; any other (an edited function's, a decorator's, a
    module-level line) is the line with the same code nearest where it was expected, inside
    the function of the same name, if it still exists; none is not found. `then_lines`:
    lines with no spot (runs stored before anchors), found only in an unchanged function."""
    now_fns = functions(source)
    lines = source.splitlines()
    shifts: dict[str, tuple[int, FunctionDef | None]] = {}
    exact: dict[str, Place] = {}
    for place in anchors.functions:
        if place.path != path:
            continue
        same = [f for f in now_fns if f.qualname == place.qualname]
        kept = [f for f in same if f.text_hash == place.text_hash]
        if kept:
            fn = min(kept, key=lambda f: abs(f.def_line - place.def_line))
            exact[place.qualname] = place
        elif same:
            fn = min(same, key=lambda f: abs(f.def_line - place.def_line))
        else:
            fn = None
        shifts[place.qualname] = ((fn.def_line - place.def_line) if fn else 0, fn)
    out: dict[int, int] = {}
    for spot in anchors.spots:
        if spot.path != path:
            continue
        found = _find(spot, shifts, exact, lines)
        if found is not None:
            out[spot.line] = found
    for line in then_lines:
        if line in out:
            continue
        for qualname, place in exact.items():
            if place.def_line <= line <= place.end_line:
                out[line] = line + shifts[qualname][0]
    return Moved(out)


def _find(
    spot: Spot,
    shifts: dict[str, tuple[int, FunctionDef | None]],
    exact: dict[str, Place],
    lines: list[str],
) -> int | None:
    shift, fn = shifts.get(spot.function, (0, None))
    if spot.function and fn is None:
        return None  # its function is gone
    place = exact.get(spot.function)
    if place is not None and place.def_line <= spot.line <= place.end_line:
        return spot.line + shift  # the function's text is the same: the line moved with it
    if not spot.code:
        return None
    lo, hi = (fn.first_line or fn.def_line, fn.end_line) if fn else (1, len(lines))
    expected = spot.line + shift
    hi = min(hi, len(lines))
    candidates = [n for n in range(lo, hi + 1) if lines[n - 1].strip() == spot.code]
    return min(candidates, key=lambda n: abs(n - expected)) if candidates else None


def relocated(record: RunRecord, path: str, source: str) -> RunRecord:
    """The run with what it names in `path` moved to where it is in `source` now, what cannot
    be found again left out."""
    report = record.report
    anchors = record.anchors or _anchors_then(record, source)
    own = report.function.path
    then_lines = {line for p, line in named_lines(report) if p == path}
    moved = relocate(anchors, path, source, then_lines)
    function = report.function
    if own == path:
        fn = _unchanged(record, source)
        line = moved.now(function.line)
        if fn is not None:  # where the run's line was: its first decorator's, or the def line
            then = [
                p
                for p in anchors.functions
                if p.qualname == record.qualname and p.text_hash == record.text_hash
            ]
            decorated = any(function.line == p.first_line != p.def_line for p in then)
            line = fn.first_line if decorated and fn.first_line else fn.def_line
        function = msgspec.structs.replace(function, line=line or function.line)
    rows: list[LineRow] = []
    for r in report.lines:
        at = moved.now(r.line) if r.path == path else r.line
        if at is not None:
            rows.append(msgspec.structs.replace(r, line=at))
    findings: list[Finding] = []
    for f in report.findings:
        at = moved.now(f.line) if f.line and (f.path or own) == path else f.line
        if at is not None or not f.line:
            findings.append(msgspec.structs.replace(f, line=at))
    report = msgspec.structs.replace(report, function=function, lines=rows, findings=findings)
    return msgspec.structs.replace(record, report=report)


def _unchanged(record: RunRecord, source: str) -> FunctionDef | None:
    """The run's function in `source`, if its text is the same; nearest its line then."""
    same = [
        f
        for f in functions(source)
        if f.qualname == record.qualname and f.text_hash == record.text_hash
    ]
    line = record.report.function.line
    return min(same, key=lambda f: abs(f.def_line - line)) if same else None


def _anchors_then(record: RunRecord, source: str) -> Anchors:
    """Anchors for a run stored before runs kept them: its lines' code from the report, its
    function's lines then inferred from the function now (the same text) and the line the
    run recorded (its first decorator's, or its def line)."""
    report = record.report
    spots = [Spot(r.path, r.line, r.code) for r in report.lines if r.code]
    fn = _unchanged(record, source)
    if fn is None:
        return Anchors(spots=spots)
    lines = source.splitlines()
    decorators = fn.def_line - (fn.first_line or fn.def_line)
    recorded = report.function.line

    def matches(def_then: int) -> int:
        shift = fn.def_line - def_then
        return sum(
            1
            for r in report.lines
            if r.path == record.path
            and r.code
            and 0 < r.line + shift <= len(lines)
            and lines[r.line + shift - 1].strip() == r.code
        )

    def_then = max((recorded + decorators, recorded), key=matches)
    place = Place(
        record.path,
        record.qualname,
        def_then - decorators,
        def_then,
        def_then + fn.end_line - fn.def_line,
        record.text_hash,
    )
    spots = [
        msgspec.structs.replace(s, function=record.qualname)
        if s.path == record.path and place.first_line <= s.line <= place.end_line
        else s
        for s in spots
    ]
    return Anchors([place], spots)
