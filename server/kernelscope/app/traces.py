"""Traces recorded anywhere: analyzed where they lie (``kernelscope analyze``), or imported
into a project's store as a function's last run (the editor's importTrace)."""

from __future__ import annotations

import gzip
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

from kernelscope.analysis.diagnose import load_sidecar
from kernelscope.analysis.trace_load import load_trace
from kernelscope.analysis.trace_model import TraceError
from kernelscope.analysis.trace_stream import Progress, is_gzip
from kernelscope.app.analysis_pool import report_read
from kernelscope.app.store import RunRecord, now
from kernelscope.protocol import ProfileFinished, Sidecar
from kernelscope.report.build import (
    analyze_trace,
    replay_report,
    report_for_job,
    trace_only_report,
)
from kernelscope.report.files import companions, save_sidecar, sidecar_path
from kernelscope.report.schema import Report, TraceAnalysis


def analyze_path(
    path: Path,
    sidecar: Path | None = None,
    trace_only: bool = False,
    progress: Progress | None = None,
    root: Path | None = None,
) -> Report | TraceAnalysis:
    """A trace's report: with its sidecar (given, or found beside it) the whole report, else
    what the trace alone supports, its Python frames' paths looked for under ``root`` (the
    current directory by default). Raises TraceError or SidecarError."""
    found = sidecar or companions(path)[0]
    if found is not None and not trace_only:
        side = load_sidecar(found)
        return replay_report(path, side, side.qualname, side.path, progress=progress)
    return analyze_trace(path, load_trace(path, progress), root=root)


def import_job(
    path: Path,
    qualname: str,
    def_line: int,
    text_hash: str,
    trace: Path,
    sidecar: Path | None,
    traces_dir: Path,
) -> RunRecord:
    """In the analysis process: copy a recorded trace into the store and build its record.
    The copy (gzip'd on the way when plain) runs in a thread beside the analysis of the
    original: zlib releases the GIL, so a big trace costs about its analysis alone."""
    report_read(0, 1)
    run_id = uuid.uuid4().hex[:12]
    traces_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{qualname.replace('.', '_')}-{run_id}"
    kept = traces_dir / f"{stem}.pt.trace.json.gz"
    stop = threading.Event()
    with ThreadPoolExecutor(1, thread_name_prefix="ks-copy") as pool:
        copying = pool.submit(_copy_gzipped, trace, kept, stop)
        try:
            report = _imported_report(path, qualname, def_line, trace, sidecar, kept, run_id)
        except BaseException:
            stop.set()  # a trace that cannot be analyzed is not kept
            wait([copying])
            _forget(kept)
            raise
    try:
        copying.result()
    except OSError as e:
        _forget(kept)
        raise TraceError(f"cannot copy it into {traces_dir}: {e.strerror or e}") from None
    return RunRecord(run_id, str(path), qualname, now(), text_hash, report)


def _forget(kept: Path) -> None:
    """Remove an import's files from the store: the trace, its sidecar, its cold trace."""
    for file in (kept, sidecar_path(kept), _cold_beside(kept)):
        file.unlink(missing_ok=True)


def _cold_beside(kept: Path) -> Path:
    return kept.with_name(kept.name.replace(".pt.trace.json.gz", ".cold.json.gz"))


def _imported_report(
    path: Path,
    qualname: str,
    def_line: int,
    trace: Path,
    sidecar: Path | None,
    kept: Path,
    run_id: str,
) -> Report:
    """The report of the original trace, pointing at its copy ``kept``."""
    if sidecar is None:
        return trace_only_report(
            kept, load_trace(trace, report_read), str(path), qualname, def_line
        )
    side = _retarget(load_sidecar(sidecar), str(path))
    cold = companions(trace)[1]
    side.cold.trace_path = None
    if cold is not None:
        kept_cold = _cold_beside(kept)
        _copy_gzipped(cold, kept_cold)
        side.cold.trace_path = str(kept_cold)
    save_sidecar(ProfileFinished(job_id=run_id, trace_path=str(kept), sidecar=side))
    original = ProfileFinished(job_id=run_id, trace_path=str(trace), sidecar=side)
    report = report_for_job(original, str(path), qualname, progress=report_read)
    report.trace.path = str(kept)
    return report


def _copy_gzipped(src: Path, dst: Path, stop: threading.Event | None = None) -> None:
    """Copy a trace, gzip'ing it on the way when it is plain JSON; ``stop`` ends it early."""
    gzipped = is_gzip(src)
    with src.open("rb") as f, dst.open("wb") if gzipped else gzip.open(dst, "wb", 1) as out:
        while (stop is None or not stop.is_set()) and (chunk := f.read(4 << 20)):
            out.write(chunk)


def _retarget(side: Sidecar, path: str) -> Sidecar:
    """Point a recorded sidecar's own-file lines at the file they are imported into."""
    recorded = side.path or next((s.path for s in side.lines), "")
    if recorded:
        for line in side.lines:
            if line.path == recorded or Path(line.path).name == Path(recorded).name:
                line.path = path
    side.path = path
    return side
