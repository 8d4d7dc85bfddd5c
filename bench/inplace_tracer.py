"""In place before Python 3.12: a step's time with the tracer kept, through the trampoline,
and with nothing watching, side by side in one run.

An in-place run finds the steps with ``sys.settrace`` there, under which the interpreter
runs its slow path for every instruction. After the first call the function's code is now
swapped for a trampoline and the tracer dropped (worker/program/trampoline.py). This bench
drives the real watch (inplace.CallSteps) on the tracer's path (forced, so it runs on any
Python) three ways, in interleaved rounds, for each step of bench/workloads/inplace_steps.py:

- ``tracer``: the tracer kept for every call (the way before the trampoline);
- ``trampoline``: the tracer for the first call, then the trampoline;
- ``bare``: no watch (what the program's own loop sees).

It prints each way's median µs per call and its ratio to ``bare``.

    python bench/inplace_tracer.py [--rounds N] [--calls N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "server"), str(REPO / "bench" / "workloads")]

import inplace_steps  # noqa: E402

from kernelscope.worker.program import watch  # noqa: E402
from kernelscope.worker.program.inplace import CallSteps  # noqa: E402

WAYS = ("tracer", "trampoline", "bare")


def torch_args() -> tuple[Any, ...]:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    return model, optimizer, torch.randn(32, 64), torch.randn(32, 64)


def timed(way: str, name: str, args: tuple[Any, ...], calls: int) -> float:
    """Median µs per call of `calls` calls (after the first, the one the tracer finds)."""
    fn: Callable[..., Any] = getattr(inplace_steps, name)
    w = None
    if way != "bare":
        w = CallSteps(inplace_steps.__file__, name, 0, lambda path: False)
        w.on_begin = w.on_end = lambda: None
        w.swap_tried = way == "tracer"  # the tracer kept: no swap is tried
        w.arm()
    try:
        getattr(inplace_steps, name)(*args)
        assert w is None or w.swapped == (way == "trampoline")
        times: list[float] = []
        for _ in range(calls):
            t = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - t)
    finally:
        if w is not None:
            w.disarm()
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    watch.claim_tool = lambda monitoring: None  # the tracer's path on any Python
    steps = {"python_step": (), "torch_step": torch_args()}
    for name, step_args in steps.items():
        for _ in range(3):  # warm-up
            getattr(inplace_steps, name)(*step_args)
        got: dict[str, list[float]] = {way: [] for way in WAYS}
        for _ in range(args.rounds):
            for way in WAYS:
                got[way].append(timed(way, name, step_args, args.calls))
        bare = statistics.median(got["bare"])
        print(f"{name} (Python {sys.version.split()[0]}, {args.rounds} rounds of "
              f"{args.calls} calls)")  # fmt: skip
        for way in WAYS:
            median = statistics.median(got[way])
            print(f"  {way:<11} {median:9.1f} µs per call  {median / bare:5.2f}x bare")


if __name__ == "__main__":
    main()
