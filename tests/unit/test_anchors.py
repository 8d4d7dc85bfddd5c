"""A run's lines found again after edits (app/anchors.py): a function whose text is unchanged
carries its lines along, other lines are found by their code, what is gone is left out; runs
stored before anchors existed are placed too; runs saved by another process are read."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec

from kernelscope.analysis.diagnose import load_sidecar
from kernelscope.app.anchors import relocated
from kernelscope.app.store import RunRecord, Store
from kernelscope.findings import Finding, Severity
from kernelscope.pyfunctions import find
from kernelscope.report.build import replay_report
from kernelscope.report.schema import LineRow

from support import FIXTURES

BEFORE = """\
import torch


class Block:
    def __init__(self):
        self.w = torch.randn(4, 4)

    def forward(self, x):
        y = x @ self.w
        return helper(y).relu()


def helper(x):
    return x + 1
"""
#: What the "Create inputs" quick fix did in the issue's scenario: 7 lines above the method.
STUB = """\
    def unrelated(self):
        a = 1
        b = 2
        c = 3
        d = 4
        return a + b + c + d

"""
SHIFTED = BEFORE.replace("    def forward", STUB + "    def forward")


def record_of(tmp_path: Path, source: str, decorated: bool = False) -> tuple[Path, RunRecord]:
    """A real report (a recorded fixture's) placed on `Block.forward` of model.py as `source`."""
    path = tmp_path / "model.py"
    path.write_text(source)
    trace = tmp_path / "trace.json.gz"
    shutil.copy(FIXTURES / "matmul_add_64" / "trace.json.gz", trace)
    sidecar = load_sidecar(FIXTURES / "matmul_add_64" / "sidecar.json")
    report = replay_report(trace, sidecar, "Block.forward", str(path))
    fn = find(source, "Block.forward")
    assert fn is not None
    text = source.splitlines()
    row = report.lines[0] if report.lines else LineRow(str(path), 1, 0, 0, 0, 0, [])  # type: ignore[call-arg]

    def at(line: int) -> LineRow:
        return msgspec.structs.replace(row, path=str(path), line=line, code=text[line - 1].strip())

    lines = [at(fn.def_line + 1), at(fn.def_line + 2), at(len(text))]  # forward's 2, helper's 1
    finding = Finding("KS201", Severity.WARNING, "sync here", str(path), fn.def_line + 1)
    report = msgspec.structs.replace(
        report,
        function=msgspec.structs.replace(
            report.function, line=fn.first_line if decorated else fn.def_line
        ),
        lines=lines,
        findings=[finding],
    )
    return path, RunRecord(
        "r1", str(path), "Block.forward", "2026-12-02T10:00:00+00:00", fn.text_hash, report
    )


def placed(record: RunRecord, path: Path, source: str) -> tuple[int, list[int], list[int | None]]:
    moved = relocated(record, str(path), source).report
    return moved.function.line, [r.line for r in moved.lines], [f.line for f in moved.findings]


def test_lines_added_above_a_method_move_its_lines_with_it(tmp_path: Path) -> None:
    path, record = record_of(tmp_path, BEFORE)
    Store(tmp_path).add(record, BEFORE)
    assert record.anchors is not None and record.anchors.spots
    assert placed(record, path, BEFORE) == (8, [9, 10, 14], [9])
    assert placed(record, path, SHIFTED) == (15, [16, 17, 21], [16])


def test_an_edited_callee_keeps_the_lines_found_by_their_code(tmp_path: Path) -> None:
    path, record = record_of(tmp_path, BEFORE)
    Store(tmp_path).add(record, BEFORE)
    edited = BEFORE.replace("    return x + 1", "    x = x * 2\n    return x + 1")
    assert placed(record, path, edited) == (8, [9, 10, 15], [9])
    gone = BEFORE.replace("    return x + 1", "    return x - 1")
    assert placed(record, path, gone) == (8, [9, 10], [9])  # its code is gone: left out


def test_an_edited_function_keeps_only_the_lines_whose_code_is_still_there(tmp_path: Path) -> None:
    path, record = record_of(tmp_path, BEFORE)
    Store(tmp_path).add(record, BEFORE)
    edited = BEFORE.replace(
        "        y = x @ self.w\n", "        x = x.float()\n        y = x @ self.w\n"
    )
    edited = edited.replace("helper(y).relu()", "helper(y).tanh()")
    moved = relocated(record, str(path), edited).report
    assert [r.line for r in moved.lines] == [10, 15]  # `y = x @ self.w` one down; `return` edited
    assert [f.line for f in moved.findings] == [10]


def test_runs_stored_before_anchors_are_placed_from_their_lines_code(tmp_path: Path) -> None:
    source = BEFORE.replace("    def forward", "    @staticmethod\n    def forward")
    for decorated in (False, True):
        path, record = record_of(tmp_path, source, decorated)
        assert record.anchors is None  # as a run stored before anchors were kept
        shifted = source.replace("    @staticmethod", STUB + "    @staticmethod")
        first = 15 if decorated else 16  # the run's line: the decorator's, or the def line
        assert placed(record, path, shifted) == (first, [17, 18, 22], [17]), decorated


def test_a_store_reads_the_runs_another_process_saved(tmp_path: Path) -> None:
    path, record = record_of(tmp_path, BEFORE)
    mine = Store(tmp_path)
    assert mine.reload() == []
    Store(tmp_path).add(record)  # another process: the CLI, the MCP server
    (new,) = mine.reload()
    assert new.run_id == "r1" and new.anchors is not None  # anchors from the file on disk
    assert mine.reload() == []
    (tmp_path / ".kernelscope" / "runs" / "r1.json").unlink()  # pruned by the other process
    mine.reload()
    assert mine.get("r1") is None
    del path
