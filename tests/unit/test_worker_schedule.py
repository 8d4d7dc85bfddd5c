"""The warmed schedule fitted to the call's length (the worker program run as a module)."""

from __future__ import annotations

from typing import Any

import pytest

from support.worker import worker_namespace


@pytest.fixture(scope="module")
def worker() -> dict[str, Any]:
    return worker_namespace()


@pytest.mark.parametrize(
    ("per_call_us", "fitted"),
    [
        (0.0, (1, 3, 5)),  # not timed: as asked
        (1_000.0, (1, 3, 5)),  # 8 profiled calls of 1 ms
        (1_250_000.0, (1, 3, 5)),  # exactly the budget
        (3_000_000.0, (0, 1, 2)),  # three fit: one warm-up, two active
        (6_000_000.0, (0, 0, 1)),  # one fits
        (21_000_000.0, (0, 0, 1)),  # minGPT's Trainer.run on the CPU: still one
    ],
)
def test_long_calls_are_profiled_fewer_times(worker, per_call_us, fitted) -> None:
    assert worker["fitted_schedule"]((1, 3, 5), per_call_us, 10.0)[0] == fitted


def test_a_schedule_without_warmup_keeps_none(worker) -> None:
    assert worker["fitted_schedule"]((2, 0, 10), 3_000_000.0, 10.0)[0] == (0, 0, 3)


def test_the_schedule_says_why_it_is_fewer(worker) -> None:
    """The sentence the report's schedule line shows after what was asked."""
    fitted = worker["fitted_schedule"]
    assert fitted((1, 3, 5), 1_000.0, 10.0) == ((1, 3, 5), "")
    assert fitted((1, 3, 5), 3_000_000.0, 10.0)[1] == (
        "each call takes 3.00 s, and the profiled calls (warm-up and active) are kept within "
        "10 s (KERNELSCOPE_PROFILED_SECONDS)"
    )
    assert fitted((1, 3, 5), 100_300.0, 0.25)[1].startswith("each call takes 100.30 ms, and ")
    assert fitted((1, 3, 5), 21_000_000.0, 10.0)[1] == (
        "each call takes 21.00 s, over the 10 s (KERNELSCOPE_PROFILED_SECONDS) the profiled "
        "calls are kept within: one active step alone"
    )
    assert fitted((0, 0, 1), 21_000_000.0, 10.0) == ((0, 0, 1), "")  # as asked already


def test_the_budget_is_the_users_where_set(worker, monkeypatch: pytest.MonkeyPatch) -> None:
    budget = worker["profiled_budget_s"]
    monkeypatch.setenv("KERNELSCOPE_PROFILED_SECONDS", "60")
    assert budget() == 60.0
    for bad in ("", "ten", "-1", "0"):
        monkeypatch.setenv("KERNELSCOPE_PROFILED_SECONDS", bad)
        assert budget() == worker["PROFILED_BUDGET_S"]


def test_fitted_schedule_names_iterations_in_place(worker: dict[str, Any]) -> None:
    """In place the steps are a loop's iterations, and the sentence says so."""
    steps, why = worker["fitted_schedule"]((1, 3, 5), 4_000_000.0, 10.0, "iteration")
    assert steps == (0, 1, 1)
    assert why == (
        "each iteration takes 4.00 s, and the profiled iterations (warm-up and active) are "
        "kept within 10 s (KERNELSCOPE_PROFILED_SECONDS)"
    )


def test_in_place_the_fit_keeps_one_wait_step_asked_for(worker: dict[str, Any]) -> None:
    """In place the wait step counts a step's events: the fit keeps one where asked, and a
    schedule the fit leaves as asked says no reason."""
    fit = worker["fitted_schedule"]
    assert fit((2, 3, 5), 4_000_000.0, 10.0, "iteration", keep_wait=True)[0] == (1, 1, 1)
    assert fit((0, 3, 5), 4_000_000.0, 10.0, "iteration", keep_wait=True)[0] == (0, 1, 1)
    assert fit((1, 0, 1), 40_000_000.0, 10.0, "iteration", keep_wait=True) == ((1, 0, 1), "")
