"""child_call.ChildCall: the first taker claims the call, saves it and signals the main
process, whose handler gets the record; what cannot be saved is named down to the
attribute."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch

from kernelscope.worker.program.capture import load_capture, save_capture
from kernelscope.worker.program.child_call import ChildCall, handoff_signal


class Holder:
    def __init__(self, handle: Any) -> None:
        self.x = torch.ones(3)
        self.inner = {"ok": 1, "bad": handle}


def taker(handoff: ChildCall) -> Any:
    """A function whose call hands itself over (its arguments: a tensor and a float)."""

    def call(a: torch.Tensor, scale: float = 2.0) -> None:
        handoff.take(sys._getframe(), ("/x/train.py", 7), 3)  # pyright: ignore[reportPrivateUsage]

    return call


def test_the_taker_saves_the_call_and_signals_the_main_process(tmp_path: Path) -> None:
    records: list[dict[str, Any]] = []
    handoff = ChildCall(torch, str(tmp_path), 16)
    before = signal.getsignal(handoff.signum)
    assert handoff.install(records.append)
    try:
        taker(handoff)(torch.arange(4.0), scale=3.0)
        deadline = time.monotonic() + 5
        while not records and time.monotonic() < deadline:
            time.sleep(0.01)
        taker(handoff)(torch.zeros(1))  # claimed already: nothing
    finally:
        handoff.remove()
        ignored = signal.getsignal(handoff.signum)
        signal.signal(handoff.signum, before)
    (record,) = records
    assert record["error"] is None and record["call"] == 3
    assert record["caller"] == ["/x/train.py", 7] and record["pid"] == os.getpid()
    assert record["made_in"] == f"a child process (pid {os.getpid()})"
    args, kwargs, state, meta = load_capture(torch, handoff.path)
    assert torch.equal(args[0], torch.arange(4.0)) and args[1] == 3.0 and not kwargs
    assert state.threads == torch.get_num_threads() and meta["worker_info"] is None
    # a late child's signal must not end the process: a real-time signal's default would
    assert before == signal.SIG_DFL and ignored == signal.SIG_IGN
    assert not handoff.claim()  # the main process's own call finds it taken
    assert handoff.taken(wait_s=0) == record  # as read after a program that ended first
    assert handoff_signal() == handoff.signum


def test_after_the_program_a_claim_without_its_record_is_said(tmp_path: Path) -> None:
    handoff = ChildCall(torch, str(tmp_path), 16)
    handoff.active = True
    assert handoff.taken(wait_s=0) is None  # no child made the call
    assert handoff.claim({"pid": 4321, "call": 2, "made_in": "DataLoader worker 1 of 2"})
    record = handoff.taken(wait_s=0.05)
    assert record is not None and record["made_in"] == "DataLoader worker 1 of 2"
    assert record["error"].startswith("the process (pid 4321) ended before it had saved it")


def test_a_call_that_cannot_be_saved_releases_its_claim(tmp_path: Path) -> None:
    handoff = ChildCall(torch, str(tmp_path), 16)
    handoff.active = True
    with open(__file__) as handle:
        taker(handoff)(handle)  # type: ignore[arg-type]
    failed = handoff.taken(wait_s=0)  # as read after a program that ended without a call
    assert handoff.claim()  # released: the main process's own call may be taken
    assert failed is not None and "TextIOWrapper" in failed["error"]
    assert not list(tmp_path.glob("*.pt*"))


def test_a_handoff_not_set_up_claims_nothing(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    handoff = ChildCall(torch, "", None)  # no temporary folder: never installed
    assert handoff.claim() and handoff.claim()
    assert handoff.taken(wait_s=0) is None
    assert not list(tmp_path.iterdir())


def test_what_cannot_be_saved_is_named_to_its_attribute(tmp_path: Path) -> None:
    with open(__file__) as handle:
        why = save_capture(torch, str(tmp_path / "c.pt"), [Holder(handle)], {}, _State(), {})
    assert why is not None
    assert why.startswith("argument 0 (Holder): its .inner['bad'] (TextIOWrapper) cannot be saved")
    assert not (tmp_path / "c.pt").exists()


class _State:
    def saved(self) -> dict[str, Any]:
        return {}
