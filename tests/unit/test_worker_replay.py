"""A captured call replayed in its state: the state is set around each call where it is not
the thread's already, and put back after; in effect already, nothing is done (a timing
loop's replays cost ~1 us, not ~9 us, on a CPU: pytorch/examples' get_batch read +72 %)."""

from __future__ import annotations

from typing import Any

import torch

from kernelscope.worker.program.capture import CallState, replay


def seen() -> dict[str, Any]:
    return {
        "grad": torch.is_grad_enabled(),
        "inference": torch.is_inference_mode_enabled(),
        "math_sdp": torch.backends.cuda.math_sdp_enabled(),
        "dtype": torch.get_default_dtype(),
    }


def replayed(state: CallState) -> dict[str, Any]:
    def fn() -> dict[str, Any]:
        return seen()

    return replay(torch, fn, fn.__code__, (), {}, state)()


def test_a_no_grad_call_replays_without_grad_and_grad_is_back_after() -> None:
    with torch.no_grad():
        state = CallState(torch, ())
    assert state.differs() == "grad"
    assert replayed(state)["grad"] is False
    assert torch.is_grad_enabled()


def test_a_call_in_the_current_state_changes_nothing() -> None:
    state = CallState(torch, ())
    assert state.differs() is None
    assert replayed(state) == seen()


def test_inference_mode_sdpa_and_the_default_dtype_are_set_and_put_back() -> None:
    torch.backends.cuda.enable_math_sdp(False)
    torch.set_default_dtype(torch.float64)
    try:
        with torch.inference_mode():
            state = CallState(torch, ())
    finally:
        torch.backends.cuda.enable_math_sdp(True)
        torch.set_default_dtype(torch.float32)
    assert state.differs() == "more"
    inside = replayed(state)
    assert inside == {"grad": False, "inference": True, "math_sdp": False, "dtype": torch.float64}
    assert seen() == {"grad": True, "inference": False, "math_sdp": True, "dtype": torch.float32}
