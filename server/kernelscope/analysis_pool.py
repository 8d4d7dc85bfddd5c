"""Trace analysis in a process of its own, so the server's event loop never waits on it.

Decoding a 150 MB trace holds the GIL for most of a second; in a thread that stalls hovers
and lenses. A one-process pool (spawned: no fork of the server's state, no torch) runs the
analysis instead. The child stays warm between jobs; after a big trace it is let go, which
returns that trace's memory to the system.
"""

from __future__ import annotations

import asyncio
import multiprocessing
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


class AnalysisPool:
    """Runs picklable module-level functions in a spawned child process."""

    def __init__(self) -> None:
        self._executor: ProcessPoolExecutor | None = None

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn")
            )
        return self._executor

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
