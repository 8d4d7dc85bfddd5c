"""What replaying a captured call adds to each call, side by side in one run: a trivial
function called bare, and replayed in its captured state (worker/program/capture.py
``replay``): a state already in effect (a timing loop's calls) and a ``no_grad`` call
replayed outside ``no_grad``. The replay's cost is in every unprofiled figure of a captured
call (pytorch/examples' 16 us ``get_batch`` read +72 % when it was ~9 us).

    python bench/replay_overhead.py [--calls N]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))

import torch

from kernelscope.worker.program.capture import CallState, replay


def per_call_us(fn: Callable[[], Any], n: int) -> float:
    """Best of three runs of `n` calls, in µs a call."""
    for _ in range(1000):
        fn()
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t) / n * 1e6)
    return min(runs)


def main() -> None:
    """Print the three figures and what the replay adds."""
    parser = argparse.ArgumentParser(description="What a captured call's replay adds.")
    parser.add_argument("--calls", type=int, default=100_000)
    n = parser.parse_args().calls
    lin, x = torch.nn.Linear(4, 4), torch.randn(2, 4)

    def f(m: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return x

    bare = per_call_us(lambda: f(lin, x), n)
    same = per_call_us(replay(torch, f, f.__code__, (lin, x), {}, CallState(torch, (lin, x))), n)
    with torch.no_grad():
        state = CallState(torch, (lin, x))
    no_grad = per_call_us(replay(torch, f, f.__code__, (lin, x), {}, state), n)
    print(f"bare call                        {bare:6.2f} us")
    print(f"replayed, state in effect        {same:6.2f} us  (+{same - bare:.2f})")
    print(f"replayed no_grad, outside it     {no_grad:6.2f} us  (+{no_grad - bare:.2f})")


if __name__ == "__main__":
    main()
