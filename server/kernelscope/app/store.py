"""Per-project results under `.kernelscope/`: one JSON record per run, traces beside, bounded.

`runs/<run_id>.json` holds a RunRecord (the report and what identifies the function's text);
traces live in `traces/`. After each run, a function keeps its last `keep_per_function` runs
and all traces together stay under `max_bytes`, oldest runs going first.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import time
from pathlib import Path

import msgspec

from kernelscope.app.anchors import Anchors, anchors_of
from kernelscope.app.memory_timeline import memory_files, write_memory_timeline
from kernelscope.report.files import sidecar_path
from kernelscope.report.schema import Report

log = logging.getLogger(__name__)


class RunRecord(msgspec.Struct):
    """One finished profile of one function."""

    run_id: str
    path: str
    qualname: str
    created: str
    text_hash: str
    report: Report
    anchors: Anchors | None = None
    """The functions and the code of the lines the report names, as they were (None in runs
    stored before: app/anchors.py infers them)."""


_record_decoder = msgspec.json.Decoder(RunRecord)


class Store:
    """The runs of one project, loaded once and kept in memory."""

    def __init__(self, root: Path, keep_per_function: int = 5, max_bytes: int = 1 << 30) -> None:
        self.root = root / ".kernelscope"
        self.runs_dir = self.root / "runs"
        self.traces_dir = self.root / "traces"
        self.keep_per_function = keep_per_function
        self.max_bytes = max_bytes
        self._runs: dict[str, RunRecord] = {}
        #: When each run was saved, in ns: orders runs recorded within one second of each
        #: other (`created` is to the second).
        self._saved: dict[str, int] = {}
        self._load()

    def _load(self) -> list[RunRecord]:
        """Read the records not in memory yet; forget those whose file is gone."""
        if not self.runs_dir.is_dir():
            return []
        found: list[RunRecord] = []
        files = {path.stem: path for path in self.runs_dir.glob("*.json")}
        for run_id in set(self._runs) - set(files):
            self._runs.pop(run_id)
            self._saved.pop(run_id, None)
        for run_id, path in files.items():
            if run_id in self._runs:
                continue
            try:
                record = _record_decoder.decode(path.read_bytes())
                saved = path.stat().st_mtime_ns
            except (OSError, msgspec.DecodeError, msgspec.ValidationError) as e:
                log.warning("skipping unreadable run record %s: %s", path, e)
                continue
            self._runs[record.run_id] = record
            self._saved[record.run_id] = saved
            found.append(record)
        return found

    def reload(self) -> list[RunRecord]:
        """The runs another process (the CLI, the MCP server) saved since this store was read,
        oldest first; runs it pruned are forgotten."""
        return sorted(self._load(), key=self._order)

    def add(self, record: RunRecord, source: str | None = None) -> None:
        """Save a run (with where its lines are in `source`, the text of its function's file
        it ran, else the file on disk) and its memory timeline beside its trace, then prune
        old runs and traces."""
        try:
            write_memory_timeline(record.report)
        except OSError as e:  # the run stands without its chart
            log.warning("the memory timeline of run %s was not written: %s", record.run_id, e)
        if record.anchors is None:
            record.anchors = anchors_of(record.report, record.path, source)
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.runs_dir / f"{record.run_id}.json.tmp"
        tmp.write_bytes(msgspec.json.encode(record))
        tmp.replace(self.runs_dir / f"{record.run_id}.json")
        self._runs[record.run_id] = record
        self._saved[record.run_id] = time.time_ns()
        self._prune(record.path, record.qualname)

    def get(self, run_id: str) -> RunRecord | None:
        """A run by id."""
        return self._runs.get(run_id)

    def latest(self, path: str, qualname: str) -> RunRecord | None:
        """The newest run of one function."""
        runs = self._of(path, qualname)
        return runs[-1] if runs else None

    def history(self, path: str, qualname: str) -> list[RunRecord]:
        """The kept runs of one function, oldest first."""
        return self._of(path, qualname)

    def previous(self, record: RunRecord) -> RunRecord | None:
        """The run of the same function just before `record`, if one is kept."""
        runs = [r.run_id for r in self._of(record.path, record.qualname)]
        at = runs.index(record.run_id) if record.run_id in runs else len(runs)
        return self._runs[runs[at - 1]] if at > 0 else None

    def latest_in_file(self, path: str) -> list[RunRecord]:
        """The newest run of each function of a file."""
        newest: dict[str, RunRecord] = {}
        for r in self.runs():
            if r.path == path:
                newest[r.qualname] = r
        return list(newest.values())

    def runs(self) -> list[RunRecord]:
        """Every kept run, oldest first."""
        return sorted(self._runs.values(), key=self._order)

    def _order(self, record: RunRecord) -> tuple[str, int]:
        return record.created, self._saved.get(record.run_id, 0)

    def _of(self, path: str, qualname: str) -> list[RunRecord]:
        return sorted(
            (r for r in self._runs.values() if r.path == path and r.qualname == qualname),
            key=self._order,
        )

    def _prune(self, path: str, qualname: str) -> None:
        for old in self._of(path, qualname)[: -self.keep_per_function]:
            self._drop(old)
        runs = self.runs()
        total = sum(_files_size(r) for r in runs)
        while total > self.max_bytes and len(runs) > 1:
            oldest = runs.pop(0)
            total -= _files_size(oldest)
            self._drop(oldest)

    def _drop(self, record: RunRecord) -> None:
        self._runs.pop(record.run_id, None)
        self._saved.pop(record.run_id, None)
        for file in (*_trace_files(record), self.runs_dir / f"{record.run_id}.json"):
            with contextlib.suppress(FileNotFoundError):
                file.unlink()


def _trace_files(record: RunRecord) -> list[Path]:
    trace = Path(record.report.trace.path)
    files = [trace]
    if record.report.trace.cold_path:
        files.append(Path(record.report.trace.cold_path))
    files.append(sidecar_path(trace))
    if trace.name:
        files += memory_files(trace)
    return files


def _files_size(record: RunRecord) -> int:
    size = 0
    for file in _trace_files(record):
        with contextlib.suppress(OSError):
            size += file.stat().st_size
    return size


def now() -> str:
    """The time a run is recorded at: UTC, ISO 8601, to the second."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
