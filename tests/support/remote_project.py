"""The remote tests' project (a package whose module imports a sibling) and a driver of any
job runner on it: a launcher, local or remote, or Ray Jobs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelscope.engine.runner import JobFailed, JobResult, JobRunner
from kernelscope.engine.targets import Schedule, build_request, load_target
from kernelscope.protocol import JobProgress, ProfileFailed
from kernelscope.report.build import report_for_job
from kernelscope.report.schema import Report

MODEL = """import ctypes
import os
import time

import torch

from . import helpers
from .helpers import square


def forward(n: int = 512):
    x = torch.randn(n, n)
    y = square(x)
    z = helpers.cube(y)
    return z.sum()


def forward_gpu(n: int = 2048):
    x = torch.randn(n, n, device="cuda")
    y = square(x)
    z = helpers.cube(y)
    return z.sum()


def where():
    print("FILE", __file__)
    print("CWD", os.getcwd())
    print("HELPERS", helpers.__file__)
    print("MARK", os.environ.get("KS_REMOTE_MARK", "-"))
    return torch.ones(2).sum()


def spin():
    n = 0
    while True:  # no torch ops: the profiler has nothing to unwind on cancel
        n += 1


def sleeps(seconds: float = 120.0):
    time.sleep(seconds)


def boom():
    raise ValueError("bad remote value")


def segfault():
    ctypes.string_at(0)
"""
HELPERS = """import torch


def square(x):
    return x @ x


def cube(x):
    return x @ x @ x @ x
"""


def line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def write_project(root: Path) -> Path:
    """The user's project at `root`: pkg/model.py (MODEL) imports pkg/helpers.py (HELPERS)."""
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "model.py").write_text(MODEL)
    (root / "pkg" / "helpers.py").write_text(HELPERS)
    (root / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    return root


class Driver:
    """A launcher (remote or local) driven synchronously on a private event loop."""

    def __init__(self, launcher: JobRunner, proj: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.launcher = launcher
        self.proj = proj
        self.progress: list[JobProgress] = []

    def request(self, qualname: str, **options: Any) -> Any:
        options.setdefault("device", "cpu")
        target = load_target(f"{self.proj}/pkg/model.py::{qualname}")
        trace_dir = self.proj / ".kernelscope" / "traces"
        return build_request(target, trace_dir, Schedule(0, 1, 2), **options)

    async def _profile(self, qualname: str, timeout: float, **options: Any) -> JobResult:
        self.progress = []
        request = self.request(qualname, **options)
        return await self.launcher.profile(request, self.progress.append, timeout)

    def run(
        self, qualname: str, timeout: float = 120.0, **options: Any
    ) -> JobResult | ProfileFailed:
        try:
            return self.loop.run_until_complete(self._profile(qualname, timeout, **options))
        except JobFailed as e:
            return e.failure

    def run_while(
        self, qualname: str, action: Callable[[asyncio.Task[JobResult]], None], **options: Any
    ) -> JobResult | ProfileFailed | None:
        """Start a job, call `action(task)` once the function runs; None if it was cancelled."""

        async def go() -> JobResult | ProfileFailed | None:
            task = asyncio.ensure_future(self._profile(qualname, 120.0, **options))
            while not any(p.stage == "cold" for p in self.progress):
                assert not task.done(), task.result()
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
            action(task)
            try:
                return await task
            except asyncio.CancelledError:
                return None
            except JobFailed as e:
                return e.failure

        return self.loop.run_until_complete(go())

    def report(self, result: JobResult, qualname: str) -> Report:
        path = str(self.proj / "pkg" / "model.py")
        name = self.launcher.remote.name if self.launcher.remote else None
        return report_for_job(result.finished, path, qualname, result.ready, remote=name)

    def close(self) -> None:
        self.loop.run_until_complete(self.launcher.close())
        self.loop.close()
