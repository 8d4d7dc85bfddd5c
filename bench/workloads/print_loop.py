"""Loop bodies that print a line each call, flushed (bench/print_loop.py): a little
pure-Python work over the list they are given, then the line; and print_step's work silent."""

from __future__ import annotations


def _work(xs: list[int]) -> int:
    total = 0
    for x in xs:
        total += (x * 3) % 7
    return total


def print_step(xs: list[int]) -> int:
    """~150 µs of work and a line."""
    out = _work(xs)
    print(f"step total {out}", flush=True)
    return out


def print_step_inputs(batch_size: int = 1, device: str = "cpu") -> tuple[list[int]]:
    return (list(range(5000)),)


def print_small(xs: list[int]) -> int:
    """~15 µs of work and a line, as a tight loop that logs every step."""
    return print_step(xs)


def print_small_inputs(batch_size: int = 1, device: str = "cpu") -> tuple[list[int]]:
    return (list(range(500)),)


def quiet_step(xs: list[int]) -> int:
    """print_step's work, printing nothing."""
    return _work(xs)


def quiet_step_inputs(batch_size: int = 1, device: str = "cpu") -> tuple[list[int]]:
    return (list(range(5000)),)
