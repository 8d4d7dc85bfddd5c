"""Shared fixtures: one event loop and one warm launcher per test module."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernelscope.launcher import JobFailed, JobResult, Launcher
from kernelscope.protocol import JobProgress, ProfileFailed
from kernelscope.targets import Schedule, build_request, load_target

WORKLOADS = Path(__file__).parent / "workloads"
FIXTURES = Path(__file__).parent.parent / "fixtures"


class LauncherDriver:
    """Runs launcher jobs synchronously on a private event loop."""

    def __init__(self, tmp: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.launcher = Launcher(python=sys.executable)
        self.tmp = tmp
        self.progress: list[JobProgress] = []

    def run(self, spec: str, timeout: float = 60.0, **options: Any) -> JobResult | ProfileFailed:
        source = options.pop("source", None)
        schedule = Schedule(
            options.pop("wait", 1), options.pop("warmup", 1), options.pop("active", 2)
        )
        target = load_target(spec, source=source)
        request = build_request(target, self.tmp / "traces", schedule, source=source, **options)
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


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LauncherDriver]:
    d = LauncherDriver(tmp_path_factory.mktemp("ks"))
    yield d
    d.close()


def ok(result: JobResult | ProfileFailed) -> JobResult:
    assert isinstance(result, JobResult), f"job failed: {result}"
    return result


def failed(result: JobResult | ProfileFailed) -> ProfileFailed:
    assert isinstance(result, ProfileFailed), "expected the job to fail"
    return result
