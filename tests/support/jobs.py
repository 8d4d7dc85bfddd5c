"""A launcher driven synchronously on a private event loop, and the checks of its results."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import msgspec

from kernelscope.engine.launcher import Launcher
from kernelscope.engine.runner import JobFailed, JobResult
from kernelscope.engine.targets import Schedule, build_request, load_target
from kernelscope.protocol import JobProgress, ProfileFailed


class LauncherDriver:
    """Runs launcher jobs synchronously on a private event loop."""

    def __init__(self, tmp: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.launcher = Launcher(python=sys.executable)
        self.tmp = tmp
        self.progress: list[JobProgress] = []

    def run(self, spec: str, timeout: float = 60.0, **options: Any) -> JobResult | ProfileFailed:
        source = options.pop("source", None)
        fields = options.pop("fields", {})  # set on the request as built (timing_reps=...)
        options.setdefault("device", "cpu")  # the same results on a GPU host
        schedule = Schedule(
            options.pop("wait", 1), options.pop("warmup", 1), options.pop("active", 2)
        )
        target = load_target(spec, source=source)
        request = build_request(target, self.tmp / "traces", schedule, source=source, **options)
        request = msgspec.structs.replace(request, **fields)
        self.progress = []
        try:
            return self.loop.run_until_complete(
                self.launcher.profile(request, self.progress.append, timeout)
            )
        except JobFailed as e:
            return e.failure

    def close(self) -> None:
        self.loop.run_until_complete(self.launcher.close())
        self.loop.close()


def ok(result: JobResult | ProfileFailed | None) -> JobResult:
    assert isinstance(result, JobResult), f"job failed: {result}"
    return result


def failed(result: JobResult | ProfileFailed | None) -> ProfileFailed:
    assert isinstance(result, ProfileFailed), f"expected a failure, got {result}"
    return result
