"""Where sys.settrace's cost lies on Python before 3.12, for the in-place steps' tracer: a
loop body of a small Linear and 50 Python calls, timed untraced, with a Python global tracer
that returns None, and with the builtin getattr as the global tracer (getattr(frame, "call",
None) is None: a C call per call event); the loop's own frame keeps a local tracer in both,
as LoopWatch sets. 300 rounds of 20 bodies each, in turns: min, p10 and median per body.
"""

import statistics
import sys
import time
from types import FrameType
from typing import Any

import torch

x = torch.randn(64, 64)
lin = torch.nn.Linear(64, 64)


def small(a: int) -> int:
    return a + 1


def body() -> torch.Tensor:
    y = lin(x)
    s = 0
    for _ in range(50):
        s = small(s)
    return y.relu().sum() + s


def python_tracer(frame: FrameType, event: str, arg: Any) -> None:
    return None


def local(frame: FrameType, event: str, arg: Any) -> Any:
    return local


tracers: dict[str, Any] = {"none": None, "python": python_tracer, "getattr": getattr}
times: dict[str, list[float]] = {name: [] for name in tracers}
for _ in range(300):
    for name, tracer in tracers.items():
        if tracer is not None:
            sys.settrace(tracer)
            sys._getframe().f_trace = local
        t = time.perf_counter()
        for _ in range(20):
            body()
        times[name].append((time.perf_counter() - t) / 20 * 1e6)
        sys.settrace(None)
for name, us in times.items():
    us.sort()
    p10, median = us[len(us) // 10], statistics.median(us)
    print(f"{name:8} min {us[0]:.1f} p10 {p10:.1f} median {median:.1f} µs")
