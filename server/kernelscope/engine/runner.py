"""What runs a job: the `JobRunner` protocol the warm launcher and Ray both implement, its
result and its failure (dispatch.py picks a runner for a remote)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kernelscope.protocol import (
    CalibrationFinished,
    JobProgress,
    ProfileFailed,
    ProfileFinished,
    RunCalibration,
    RunProfile,
    RunTry,
    TryFinished,
    WorkerReady,
)

if TYPE_CHECKING:
    from kernelscope.engine.remotes import Remote

ProgressCallback = Callable[[JobProgress], None]


class JobFailed(Exception):
    """A job that did not produce a profile; ``failure`` says why and where."""

    def __init__(self, failure: ProfileFailed) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass
class JobResult:
    """A finished job, the worker it ran on, and the runner's stages (seconds: a worker
    started for the job, the clean timing, traces brought back)."""

    finished: ProfileFinished
    ready: WorkerReady
    stages_s: dict[str, float] = field(default_factory=dict[str, float])


class JobRunner(Protocol):
    """Runs profile and calibration jobs on one device: here, over SSH or a prefix, or on Ray."""

    @property
    def remote(self) -> Remote | None:
        """Where it runs: None for this machine."""
        ...

    @property
    def warm(self) -> bool:
        """Whether a worker stays up between jobs (so `start` is worth calling early)."""
        ...

    def start(self) -> Any:
        """Start a worker in the background, where one stays warm."""
        ...

    async def profile(
        self,
        request: RunProfile,
        on_progress: ProgressCallback | None = None,
        timeout: float = 120.0,
    ) -> JobResult:
        """Run one profile job; JobFailed says why it produced no profile."""
        ...

    async def calibrate(
        self, request: RunCalibration, timeout: float = 300.0
    ) -> tuple[CalibrationFinished, WorkerReady]:
        """Measure the device's ceilings; JobFailed says why not."""
        ...

    async def try_variants(
        self,
        request: RunTry,
        on_progress: ProgressCallback | None = None,
        timeout: float = 300.0,
    ) -> tuple[TryFinished, WorkerReady]:
        """Time the function and variants of it in turns; JobFailed says why not."""
        ...

    async def close(self) -> None:
        """Stop whatever runs."""
        ...
