"""Trace analysis in a process of its own, so the server's event loop never waits on it.

Decoding a 150 MB trace holds the GIL for most of a second; in a thread that stalls hovers
and lenses. A one-process pool (spawned: no fork of the server's state, no torch; niced, so
the server wins the CPU) runs the analysis instead. The child stays warm between jobs; after
a big trace it is let go, which returns that trace's memory to the system.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")


class AnalysisFailed(Exception):
    """The analysis process died (out of memory, killed); the pool was replaced."""


def _ready() -> bool:
    return True


#: The analysis process runs this much below the server, which answers the editor.
ANALYSIS_NICENESS = 5

#: In the child: the share of the current trace read so far, shared with the server.
_read_share: list[Any] = []


def _install(share: Any) -> None:
    _read_share[:] = [share]
    with contextlib.suppress(OSError):  # the editor's requests come first
        os.nice(ANALYSIS_NICENESS)


def report_read(done: int, total: int) -> None:
    """In the child, a ``trace_stream.Progress``: how much of the trace file is read."""
    if _read_share and total > 0:
        _read_share[0].value = done / total


class AnalysisPool:
    """Runs picklable module-level functions in a spawned child process."""

    def __init__(self) -> None:
        self._executor: ProcessPoolExecutor | None = None
        self._share: Any = None

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            context = multiprocessing.get_context("spawn")
            self._share = context.Value("d", 0.0, lock=False)
            self._executor = ProcessPoolExecutor(
                max_workers=1, mp_context=context, initializer=_install, initargs=(self._share,)
            )
        return self._executor

    @property
    def read_share(self) -> float:
        """How much of its trace file the running analysis has read (0 to 1; a job that reads
        one sets it to 0 as it starts, with ``report_read``)."""
        return float(self._share.value) if self._share is not None else 0.0

    def warm(self) -> None:
        """Start the child now (if none runs), so an analysis does not wait for it."""
        if self._executor is None:
            self._pool().submit(_ready)

    async def run(self, fn: Callable[..., T], *args: Any, recycle: bool = False) -> T:
        """`fn(*args)` in the child; AnalysisFailed when the child dies. With `recycle`, the
        child is let go afterwards (it held a big trace)."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool(), partial(fn, *args))
        except BrokenProcessPool:
            self.close()
            raise AnalysisFailed(
                "the analysis process died (out of memory?); it was replaced"
            ) from None
        finally:
            if recycle:
                self.close()

    def close(self) -> None:
        """Stop the child."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
