"""Work-done progress for one job: stages as percentages, cancellable from the client."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from lsprotocol import types as lsp

from kernelscope.lsp.server import KernelscopeServer
from kernelscope.protocol import PERCENT, STAGE_LABELS, JobProgress

log = logging.getLogger(__name__)


def cancel_if(done: Any, task: asyncio.Future[Any]) -> None:
    """A done-callback: cancel `task` when `done` (a request or progress future) was cancelled."""
    if done.cancelled():
        task.cancel()


class ProgressReporter:
    """Work-done progress for one job, cancellable from the client."""

    def __init__(self, ls: KernelscopeServer, qualname: str, title: str = "") -> None:
        self.ls = ls
        self.qualname = qualname
        self.title = title or f"Profiling {qualname}"
        self.token: str | None = None

    async def begin(self, message: str = "starting the worker", cancellable: bool = True) -> None:
        """Create the token and send `begin`; no-op for clients without progress."""
        if not self.ls.supports_progress():
            return
        token = f"kernelscope-{uuid.uuid4().hex[:8]}"
        try:
            await self.ls.work_done_progress.create_async(token)  # pyright: ignore[reportUnknownMemberType]
        except Exception as e:
            log.warning("progress create failed: %s", e)
            return
        self.token = token
        self.ls.work_done_progress.begin(
            token,
            lsp.WorkDoneProgressBegin(
                title=self.title,
                message=message,
                percentage=0,
                cancellable=cancellable,
            ),
        )

    def link(self, task: asyncio.Future[Any]) -> None:
        """Cancel `task` when the client cancels the progress."""
        if self.token is None:
            return
        tokens: dict[Any, Any] = self.ls.work_done_progress.tokens  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        future = tokens.get(self.token)
        if future is not None:
            future.add_done_callback(lambda f: cancel_if(f, task))  # pyright: ignore[reportUnknownLambdaType]

    def on_progress(self, msg: JobProgress) -> None:
        """Launcher callback: a stage as a percentage and a message."""
        if self.token is None:
            return
        base, label = PERCENT.get(msg.stage, 50), STAGE_LABELS.get(msg.stage, msg.stage)
        if msg.total:
            label = f"{label} {msg.step}/{msg.total}"
        self.ls.work_done_progress.report(
            self.token, lsp.WorkDoneProgressReport(message=label, percentage=base, cancellable=True)
        )

    def read(self, share: float, size: str) -> None:
        """A trace being read: the share of its file, as a percentage."""
        if self.token is None:
            return
        percent = round(share * 100)
        self.ls.work_done_progress.report(
            self.token,
            lsp.WorkDoneProgressReport(
                message=f"reading the trace: {percent}% of {size}" if share < 1 else "analyzing",
                percentage=percent,
            ),
        )

    def end(self, message: str) -> None:
        """Send `end`."""
        if self.token is not None:
            self.ls.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd(message=message))
            self.token = None
