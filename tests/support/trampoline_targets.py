"""Functions an in-place run finds by their code (tests/unit/test_trampoline.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

TRACERS: list[object] = []  # sys.gettrace() inside each call


def step(x: int, scale: int = 2, *, shift: int = 0) -> int:
    TRACERS.append(sys.gettrace())
    return x * scale + shift


def pure(x: Any) -> Any:
    """Nothing torch.compile cannot trace."""
    return x * 2 + 1


def countdown(n: int) -> int:
    """Calls itself: one step per outermost call."""
    TRACERS.append(sys.gettrace())
    return 0 if n == 0 else 1 + countdown(n - 1)


def fails(x: int) -> int:
    TRACERS.append(sys.gettrace())
    if x < 0:
        raise ValueError("negative")
    return x


class Model:
    def forward(self, x: int) -> int:
        TRACERS.append(sys.gettrace())
        return x + 1


def closing_over(k: int) -> Callable[[int], int]:
    def inner(x: int) -> int:  # a closure: its code has a free variable
        TRACERS.append(sys.gettrace())
        return x + k

    return inner


def epoch(n: int) -> int:
    """Defines its step anew each time it runs (no free variables: not a closure)."""

    def nested(x: int) -> int:
        TRACERS.append(sys.gettrace())
        return x

    return sum(nested(i) for i in range(n))


def numbers(n: int) -> Iterator[int]:
    TRACERS.append(sys.gettrace())
    yield from range(n)


def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)
