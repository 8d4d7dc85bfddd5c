"""The allocator history's entries on the user's lines (the worker's memory_sources, as
shipped): Python frames for the calling thread; for autograd's engine thread, which has no
frames, the forward line of the backward node running at the entry's time — here with a real
CPU profiler trace of a training step, and entries placed in it as the GPU's history has them."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

from support import WORKLOADS
from support.worker import worker_modules

TRAIN = str(WORKLOADS / "memory_train.py")


class UserFiles:
    """What memory_sources reads of a job: where its traces go, and which files are the user's."""

    def __init__(self, tmp: Path) -> None:
        self.trace_dir = str(tmp)
        self.id = "history-test"

    def is_user_file(self, filename: str) -> bool:
        return filename == TRAIN


def traced_train_step(tmp: Path) -> tuple[Any, UserFiles, tuple[Any, Any, float, float]]:
    """memory_sources as shipped, a job, and a real CPU profiler trace of one training step
    under the line tracer: (trace, line keys, t0, t1)."""
    sources = worker_modules()["memory_sources"]
    sys.path.insert(0, str(WORKLOADS))
    try:
        import memory_train  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(WORKLOADS))
    model, opt, x = memory_train.train_step_inputs(8)
    job = UserFiles(tmp)
    traced = sources.traced_call(
        job, lambda: memory_train.train_step(model, opt, x), lambda: None,
        contextlib.nullcontext(), False,
    )  # fmt: skip
    return sources, job, traced


def test_entries_without_frames_land_on_the_forward_line_of_their_backward(tmp_path: Path) -> None:
    sources, job, (trace, keys, t0, t1) = traced_train_step(tmp_path)
    index = sources.AutogradIndex(trace, keys)
    base = index.base
    nodes = {
        e["name"].rsplit(" ", 1)[-1]: base + e["ts"] + e["dur"] / 2
        for e in trace["traceEvents"]
        if e.get("name", "").startswith(sources.BACKWARD_NODE)
    }
    bw = nodes["GeluBackward0"]
    entries: list[dict[str, Any]] = [
        {"action": "alloc", "addr": 1, "size": 512, "time_us": t0 - 5e6, "frames": []},  # before
        {"action": "alloc", "addr": 2, "size": 512, "time_us": t0 + 1, "frames": [
            {"filename": "/torch/nn/functional.py", "line": 9, "name": "gelu"},
            {"filename": TRAIN, "line": 16, "name": "forward"},
        ]},
        {"action": "alloc", "addr": 3, "size": 1024, "time_us": bw, "frames": []},
        {"action": "free_requested", "addr": 2, "size": 512, "time_us": bw + 0.5, "frames": []},
        {"action": "free_completed", "addr": 2, "size": 512, "time_us": bw + 1, "frames": []},
    ]  # fmt: skip
    events, timed = sources.history_events(job, entries, t0, t1, index)
    assert timed
    assert [(e[1], e[2]) for e in events] == [("alloc", 2), ("alloc", 3), ("free", 2)]
    assert events[0][4] == (TRAIN, 16, "")
    assert events[1][4] == (TRAIN, 16, "backward")  # gelu's backward, on the gelu line
    # times on another clock: the entries keep their order, no backward lines by time
    shifted = [{**e, "time_us": e["time_us"] * 1000} for e in entries]
    events, timed = sources.history_events(job, shifted, t0, t1, index)
    assert not timed
    assert [(e[1], e[2]) for e in events] == [("alloc", 1), ("alloc", 2), ("alloc", 3), ("free", 2)]
    assert events[2][4] == sources.ENGINE


def test_a_history_without_stacks_puts_each_entry_on_the_line_running_then(
    tmp_path: Path,
) -> None:
    """The fallback where the history's Python stacks break a checkpointed backward: no
    entry has frames; forward ones go to the line open at their time, backward ones to
    their forward op's line."""
    sources, job, (trace, keys, t0, t1) = traced_train_step(tmp_path)
    index = sources.AutogradIndex(trace, keys)
    gelu = next((s + e) / 2 for s, e, i in index.lines if keys[i] == (TRAIN, 16))
    bw = next(
        index.base + e["ts"] + e["dur"] / 2
        for e in trace["traceEvents"]
        if e.get("name", "").startswith(sources.BACKWARD_NODE)
        and e["name"].endswith("GeluBackward0")
    )
    entries: list[dict[str, Any]] = [
        {"action": "alloc", "addr": 2, "size": 512, "time_us": index.base + gelu},
        {"action": "alloc", "addr": 3, "size": 1024, "time_us": bw},
    ]
    events, timed = sources.history_events(job, entries, t0, t1, index, False)
    assert timed
    assert [e[4] for e in events] == [(TRAIN, 16, ""), (TRAIN, 16, "backward")]
    # with stacks, an entry without frames outside a backward node is the engine's
    events, _ = sources.history_events(job, entries, t0, t1, index)
    assert events[0][4] == sources.ENGINE


def test_the_cold_call_tells_a_non_reentrant_checkpoint() -> None:
    """watch_recompute (worn by the cold call) sees torch.utils.checkpoint's non-reentrant
    path, whose recompute the history's Python stacks break on CUDA, and puts it back."""
    import torch
    from torch.utils import checkpoint

    sources = worker_modules()["memory_sources"]
    layer = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8, requires_grad=True)
    original = getattr(checkpoint, sources.GENERATOR)
    seen = {}
    for reentrant in (True, False):
        job = type("Job", (), {"recomputes": False})()
        with sources.watch_recompute(job):
            checkpoint.checkpoint(layer, x, use_reentrant=reentrant).sum().backward()
        seen[reentrant] = job.recomputes
    assert seen == {True: False, False: True}
    assert getattr(checkpoint, sources.GENERATOR) is original
