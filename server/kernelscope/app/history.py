"""Every run against the last: the CLI records its runs in the project's store as the editor
does, and `diff` compares two runs, two traces, or a function's last two runs."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from kernelscope.app.store import RunRecord, Store, now
from kernelscope.app.traces import analyze_path
from kernelscope.engine.project import ProjectError, load_project
from kernelscope.engine.targets import Target, TargetError, parse_target
from kernelscope.pyfunctions import find
from kernelscope.render.compare import change_text, render_comparison
from kernelscope.report.compare import Comparison, Side, compare
from kernelscope.report.schema import Report
from kernelscope.units import fmt_us


@dataclass(frozen=True)
class Delta:
    """A run against the one before it, as the editor shows it."""

    comparison: Comparison
    short: str
    """``−12 % vs 10:02:11`` (the lens)."""
    text: str
    """The hover's sentence: the change, the times, the noise, the verdict."""
    top: str
    """The op that moved most: ``aten::mm +3.60 ms per step``, or ""."""

    @property
    def table(self) -> str:
        """The whole comparison as `kernelscope diff` prints it."""
        return render_comparison(self.comparison)


def delta(store: Store, record: RunRecord) -> Delta | None:
    """`record` against the function's run before it, when one is kept."""
    prev = store.previous(record)
    if prev is None:
        return None
    c = compare(prev.report, record.report, label(prev), label(record))
    when = label(prev).split("(")[-1].rstrip(")")
    top = ""
    if c.ops:
        d = c.ops[0]
        sign = "+" if d.delta_us >= 0 else "−"
        top = f"{d.name} {sign}{fmt_us(abs(d.delta_us))} per step ({d.status})"
    return Delta(c, f"{c.change:+.0%} vs {when}", change_text(c), top)


class DiffError(Exception):
    """What to compare cannot be found; the message says what was looked for."""


def record_run(target: Target, job_id: str, report: Report) -> RunRecord | None:
    """Keep a CLI run in the project's store (its function's text hash from the file as it
    is now); None when the file cannot be read."""
    try:
        source = target.path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    fn = find(source, target.qualname)
    record = RunRecord(
        job_id, str(target.path), target.qualname, now(), fn.text_hash if fn else "", report
    )
    Store(target.project.root).add(record, source)
    return record


def label(record: RunRecord) -> str:
    """``run 3f2a1b (10:02:11)``."""
    when = datetime.datetime.fromisoformat(record.created).astimezone().strftime("%H:%M:%S")
    return f"run {record.run_id[:8]} ({when})"


def resolve(spec: str, store: Store) -> tuple[str, Side]:
    """A run id kept in `store`, or a trace file (its sidecar used when found beside it)."""
    record = store.get(spec) or next(
        (r for r in store.runs() if r.run_id.startswith(spec) and len(spec) >= 6), None
    )
    if record is not None:
        return label(record), record.report
    path = Path(spec)
    if path.is_file():
        return path.name, analyze_path(path)  # TraceError / SidecarError: the caller says so
    raise DiffError(f"{spec!r} is neither a run kept in {store.root} nor a trace file")


def last_two(spec: str) -> tuple[str, Side, str, Side]:
    """The function's previous and last runs (PATH::QUALNAME)."""
    try:
        path, qualname = parse_target(spec)
        project = load_project(path)
    except (TargetError, ProjectError) as e:
        raise DiffError(str(e)) from None
    runs = Store(project.root).history(str(path.resolve()), qualname)
    if len(runs) < 2:
        have = "one run" if runs else "no runs"
        raise DiffError(
            f"{qualname} has {have} in {project.root / '.kernelscope'}: profile it twice"
        )
    a, b = runs[-2], runs[-1]
    return label(a), a.report, label(b), b.report


def diff(a: str, b: str | None, root: Path) -> Comparison:
    """`kernelscope diff`: A and B (run ids or traces), or A = PATH::QUALNAME's last two."""
    if b is None:
        if "::" not in a:
            raise DiffError("give two runs or traces, or PATH::QUALNAME for its last two runs")
        la, sa, lb, sb = last_two(a)
    else:
        try:
            store_root = load_project(root / "pyproject.toml").root
        except ProjectError:
            store_root = root
        store = Store(store_root)
        (la, sa), (lb, sb) = resolve(a, store), resolve(b, store)
    return compare(sa, sb, la, lb)
