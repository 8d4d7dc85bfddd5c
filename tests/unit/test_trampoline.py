"""Before Python 3.12 an in-place run finds the steps with ``sys.settrace``, under which the
whole interpreter runs slower. After the first call the function's code is swapped for a
trampoline and the tracer dropped (worker/program/trampoline.py): the calls after the first
run with no tracer set, are still each one step, and the function is whole again after.
These drive the real watch (inplace.CallSteps) on the tracer's path, which Python 3.12 and
later also have (there the steps are found by sys.monitoring instead)."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kernelscope.worker.program import watch as watch_module
from kernelscope.worker.program.inplace import CallSteps

from support import trampoline_targets as targets

HERE = targets.__file__


@pytest.fixture(autouse=True)
def tracer_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The tracer's path on any Python: no sys.monitoring tool id to be had."""
    monkeypatch.setattr(watch_module, "claim_tool", lambda monitoring: None)
    before = sys.gettrace()
    targets.TRACERS.clear()
    yield
    sys.settrace(before)


def watched(qualname: str) -> tuple[CallSteps, list[str]]:
    steps: list[str] = []
    w = CallSteps(HERE, qualname, 0, lambda path: False)
    w.on_begin = lambda: steps.append("begin")
    w.on_end = lambda: steps.append("end")
    return w, steps


def test_the_calls_after_the_first_run_without_a_tracer_and_are_steps() -> None:
    w, steps = watched("step")
    code = targets.step.__code__
    signature = inspect.signature(targets.step)
    w.arm()
    try:
        assert targets.call(targets.step, 3) == 6  # found by the tracer
        assert w.swapped and sys.gettrace() is None
        # what a program inspects is the function's own (a trainer reading forward's)
        assert inspect.signature(targets.step) == signature
        assert targets.step(3, 3, shift=1) == 10  # defaults and keywords go through
        assert targets.call(targets.step, 4, scale=1) == 4
    finally:
        w.disarm()
    assert targets.TRACERS[0] is not None and targets.TRACERS[1:] == [None, None]
    assert steps == ["begin", "end"] * 3 and w.calls == 3
    assert targets.step.__code__ is code and targets.step.__defaults__ == (2,)
    assert targets.step.__kwdefaults__ == {"shift": 0}
    assert "__signature__" not in targets.step.__dict__
    assert targets.step(1) == 2 and steps == ["begin", "end"] * 3  # disarmed: not counted


def test_a_method_and_a_recursive_function_are_one_step_a_call() -> None:
    w, steps = watched("Model.forward")
    w.arm()
    model = targets.Model()
    try:
        assert [model.forward(i) for i in range(3)] == [1, 2, 3]
    finally:
        w.disarm()
    assert w.swapped and steps == ["begin", "end"] * 3
    assert targets.TRACERS[1:] == [None, None]

    w, steps = watched("countdown")
    w.arm()
    try:
        assert targets.countdown(3) == 3 and targets.countdown(2) == 2
    finally:
        w.disarm()
    assert w.swapped and steps == ["begin", "end"] * 2  # outermost calls only
    assert targets.TRACERS[-3:] == [None, None, None]


def test_a_call_that_raises_still_ends_its_step() -> None:
    w, steps = watched("fails")
    w.arm()
    try:
        assert targets.fails(1) == 1
        with pytest.raises(ValueError, match="negative"):
            targets.fails(-1)
        assert targets.fails(2) == 2
    finally:
        w.disarm()
    assert w.swapped and steps == ["begin", "end"] * 3 and w.depth == 0


@pytest.mark.parametrize(
    ("qualname", "make"),
    [
        ("closing_over.<locals>.inner", lambda: targets.closing_over(1)),
        ("numbers", lambda: lambda n: list(targets.numbers(n))),
    ],
)
def test_a_closure_or_a_generator_keeps_the_tracer(
    qualname: str, make: Callable[[], Callable[[int], Any]]
) -> None:
    fn = make()
    w, steps = watched(qualname)
    w.arm()
    try:
        fn(1)
        fn(2)
        assert not w.swapped and sys.gettrace() is not None
    finally:
        w.disarm()
    assert steps[:2] == ["begin", "end"]  # (a generator's every resume is a call)
    assert all(t is not None for t in targets.TRACERS)


def test_functions_that_share_their_code_keep_the_tracer() -> None:
    code = targets.step.__code__
    twin = type(targets.step)(code, targets.step.__globals__, "twin")
    w, steps = watched("step")
    w.arm()
    try:
        targets.step(1)
        targets.step(2)
        assert not w.swapped and sys.gettrace() is not None
    finally:
        w.disarm()
    assert twin.__code__ is code and steps == ["begin", "end"] * 2


def test_a_nested_function_keeps_the_tracer() -> None:
    """A `def` inside a function makes a new function object each time the outer one runs:
    a swap would reach only the first, so the tracer stays and sees every call."""
    w, steps = watched("epoch.<locals>.nested")
    w.arm()
    try:
        for _ in range(3):
            targets.epoch(2)
        assert not w.swapped and sys.gettrace() is not None
    finally:
        w.disarm()
    assert steps == ["begin", "end"] * 6


def test_a_signature_of_its_own_is_left_as_it_was() -> None:
    own = inspect.Signature([inspect.Parameter("batch", inspect.Parameter.POSITIONAL_OR_KEYWORD)])
    targets.fails.__signature__ = own  # type: ignore[attr-defined]
    w, _ = watched("fails")
    w.arm()
    try:
        targets.fails(1)
        assert w.swapped and inspect.signature(targets.fails) is own
    finally:
        w.disarm()
        assert targets.fails.__dict__.pop("__signature__") is own


def test_called_from_torch_compile_it_is_not_swapped_nor_breaks_a_later_graph() -> None:
    """Dynamo's frames on the first call's stack: no swap. Swapped, then called from a
    region torch.compile traces: the original is inlined (is_compiling), no graph break."""
    import torch
    from torch._dynamo.utils import counters

    w, _ = watched("step")
    w.arm()
    try:
        via_dynamo = {}
        exec(compile("def call(f, x):\n    return f(x)\n", "/x/torch/_dynamo/stand.py", "exec"),
             via_dynamo)  # fmt: skip
        via_dynamo["call"](targets.step, 1)
        assert w.swap_tried and not w.swapped
    finally:
        w.disarm()

    w, steps = watched("pure")
    w.arm()
    try:
        targets.pure(1)
        assert w.swapped
        torch._dynamo.reset()
        counters.clear()
        caller = torch.compile(lambda x: targets.pure(x) + 1, backend="eager")
        assert caller(torch.ones(2)).tolist() == [4.0, 4.0]
        assert not counters["graph_break"]
    finally:
        w.disarm()
    assert steps[:2] == ["begin", "end"]
