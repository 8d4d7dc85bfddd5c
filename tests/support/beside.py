"""Fresh processes timing a call *beside* a job, for the truth of its unprofiled figure.

On the lent H200 host a host-bound call's speed swings ~1.5x for seconds at a time on every
CPU at once (docs/h200-run/timing/cores_2026-12-03.txt: the same CPU read 746 and 1237 µs
in two rounds). Fresh processes run one after another meet other spells than the worker did,
so they are no yardstick for it. These run at the same time as the job, each timing the call
back to back as the worker does (tests/support/fresh_timing.py --stream), and only their
calls inside the worker's timing window (``window_s``) count: the same host, the same spell.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from support import REPO_ROOT

FRESH = REPO_ROOT / "tests" / "support" / "fresh_timing.py"


@dataclass
class Beside:
    """The fresh processes' calls; `within` picks those of a window."""

    samples: list[list[list[float]]] = field(default_factory=lambda: [])
    """Per process, every call's [monotonic start, µs]."""

    def within(self, window: list[float]) -> list[list[float]]:
        """Per process, the µs of its calls that started inside `window` (start, end)."""
        start, end = window
        return [[us for t, us in calls if start <= t <= end] for calls in self.samples]

    def median(self, window: list[float]) -> float:
        """The median over all the processes' calls inside `window`."""
        return statistics.median(us for calls in self.within(window) for us in calls)


@contextmanager
def fresh_beside(spec: str, device: str, processes: int) -> Iterator[Beside]:
    """Start `processes` fresh processes streaming `spec`'s calls, wait until each is warm,
    yield; on exit stop them and fill the Beside with their calls."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "server")}
    beside = Beside()
    with tempfile.TemporaryDirectory() as tmp:
        stop = Path(tmp) / "stop"
        outs = [Path(tmp) / f"calls_{i}.json" for i in range(processes)]
        argv = [sys.executable, str(FRESH), spec, device, "--stream", str(stop)]
        errs = [out.with_suffix(".err") for out in outs]
        # stderr to files: a pipe nobody reads could fill and stall the child
        handles = [err.open("w") for err in errs]
        procs = [
            subprocess.Popen(
                [*argv, str(out)], stdout=subprocess.PIPE, stderr=h, text=True, env=env
            )
            for out, h in zip(outs, handles, strict=True)
        ]
        try:
            for proc, err in zip(procs, errs, strict=True):
                assert proc.stdout is not None
                if proc.stdout.readline().strip() != "ready":
                    proc.wait(timeout=60)
                    raise RuntimeError(f"a fresh process did not start: {err.read_text()[-2000:]}")
            yield beside
        finally:
            stop.touch()
            for proc in procs:
                proc.wait(timeout=120)
                if proc.stdout is not None:
                    proc.stdout.close()
            for h in handles:
                h.close()
        for out in outs:
            beside.samples.append(json.loads(out.read_text())["samples"])
