"""A profile's trace read once for ``--counters``: read to choose the kernels Nsight Compute
measures (app/counters.py), then held for the report built after it in the same process
(app/profile.py ``job_report``). One is held at a time and taken once: the next read
replaces it, the report drops it, and a file changed since it was read is read again."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from kernelscope.analysis.trace_load import load_trace
from kernelscope.analysis.trace_model import Trace

_Key = tuple[str, int, int]


class HeldTrace:
    """The last trace read for a job, until its report takes it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: tuple[_Key, Trace] | None = None

    def read(self, path: str | Path) -> Trace:
        """Read the trace (TraceError where it cannot be) and hold it in place of any other."""
        key = _key(path)  # before the read: a file rewritten meanwhile is not this one
        trace = load_trace(path)
        with self._lock:
            self._held = (key, trace) if key is not None else None
        return trace

    def take(self, path: str | Path) -> Trace | None:
        """The trace held for `path`, let go; None where another (or none) is held, or the
        file changed since."""
        key = _key(path)
        with self._lock:
            held = self._held
            if held is None or key is None or held[0] != key:
                return None
            self._held = None
            return held[1]

    def drop(self) -> None:
        """Let go of the trace held, whichever it is."""
        with self._lock:
            self._held = None


def _key(path: str | Path) -> _Key | None:
    """The file as it is now: its resolved path, mtime and size; None where it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return str(Path(path).resolve()), st.st_mtime_ns, st.st_size


#: The process's one held trace (the CLI's, or the editor's analysis process's).
HELD = HeldTrace()


def drop_held() -> None:
    """In the analysis process: let go of its held trace (a job that will not take it)."""
    HELD.drop()
