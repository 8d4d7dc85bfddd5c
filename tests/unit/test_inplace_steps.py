"""The in-place step machine (worker/program/inplace.py Steps), driven step by step with
the real torch profiler on the CPU: the timed steps, the counting step that weighs one
step's events, the schedule fitted to long steps, and when it is done."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from kernelscope.worker.program.errors import JobError
from kernelscope.worker.program.inplace import LoopWatch, Steps


def job(tmp_path: Path) -> Any:
    sent: list[tuple[str, int, int]] = []
    return SimpleNamespace(
        torch=torch,
        req={"qualname": "loop", "record_shapes": True, "with_stack": False},
        id="t",
        trace_dir=str(tmp_path),
        schedule_note="",
        recording_note="",
        sent=sent,
        progress=lambda stage, step=0, total=0: sent.append((stage, step, total)),
    )


def run(steps: Steps, n: int) -> None:
    x = torch.ones(64)
    for _ in range(n):
        steps.begin()
        for _ in range(20):
            x = x * 1.0001
        steps.end()


def test_the_first_wait_step_counts_the_events_then_the_schedule_runs(tmp_path: Path) -> None:
    j = job(tmp_path)
    steps = Steps(j, 3, (1, 1, 2), "loop", 1, "iteration")
    run(steps, 3 + 1 + 1 + 2 - 1)
    assert not steps.done and steps.counted == 1
    run(steps, 1)
    assert steps.done and len(steps.samples) == 2  # steps 2-3: the first is the cold one
    assert (steps.first, steps.skip, steps.wait, steps.warmup, steps.active) == (4, 4, 0, 1, 2)
    assert j.recording_note == "" and j.schedule_note == ""
    profiled = [s for s in j.sent if s[0] in ("wait", "warmup", "active")]
    assert profiled == [("wait", 1, 4), ("warmup", 2, 4), ("active", 3, 4), ("active", 4, 4)]
    assert Path(steps.trace_tmp).is_file()


def test_long_steps_keep_the_counting_wait_step_and_profile_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recwarn: pytest.WarningsRecorder
) -> None:
    monkeypatch.setenv("KERNELSCOPE_PROFILED_SECONDS", "0.000001")
    j = job(tmp_path)
    steps = Steps(j, 3, (1, 3, 5), "loop", 1, "iteration")
    run(steps, 3 + 1 + 1)
    assert steps.done and (steps.wait + steps.counted, steps.warmup, steps.active) == (1, 0, 1)
    assert j.schedule_note.startswith("each iteration takes ")
    # no warm-up step: torch's warning of it would read as the program's own output
    assert not [w for w in recwarn if "warmup" in str(w.message)]


def test_without_a_wait_step_nothing_is_counted(tmp_path: Path) -> None:
    steps = Steps(job(tmp_path), 2, (0, 1, 1), "loop", 1, "iteration")
    run(steps, 2 + 2)
    assert steps.done and steps.counted == 0


def test_a_step_whose_events_do_not_fit_is_refused_before_the_schedule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELSCOPE_PROFILER_GB", "1e-9")
    steps = Steps(job(tmp_path), 2, (1, 1, 1), "loop", 1, "iteration")
    run(steps, 2)
    steps.begin()
    with pytest.raises(JobError, match=r"One iteration makes [\d,]+ profiler events \(a counting"):
        steps.end()
    assert steps.counting is None and steps.prof is None


LOOP = """\
def epoch(n, seen):
    total = 0
    for i in range(n):
        seen.append(i)
        total += i
    return total
"""


def test_a_loop_is_found_in_each_of_its_frames(tmp_path: Path) -> None:
    """Each run of the loop's body line is one boundary, in every call of the function that
    holds the loop (an epoch each), and the tracer is gone once the watch is disarmed."""
    path = tmp_path / "train_loop.py"
    path.write_text(LOOP)
    namespace: dict[str, Any] = {}
    exec(compile(LOOP, str(path), "exec"), namespace)
    watch = LoopWatch(str(path), 4, lambda _: True)  # seen.append(i)
    hits: list[int] = []
    watch.on_line = lambda: hits.append(1)
    seen: list[int] = []
    watch.arm()
    try:
        for _ in range(3):
            namespace["epoch"](4, seen)
    finally:
        watch.disarm()
    assert len(hits) == 12  # 4 iterations in each of 3 frames
    assert len(seen) == 12 and sys.gettrace() is None


def test_the_loops_file_is_resolved_once_per_file_name_not_per_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before 3.12 the tracer asks at every call the program makes whether its code holds
    the loop: a realpath per call took Lightning's run to its epoch loop from 3.5 s to 19 s."""
    path = tmp_path / "train_loop.py"
    path.write_text(LOOP + "\n\ndef helper(x):\n    return x + 1\n")
    namespace: dict[str, Any] = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    watch = LoopWatch(str(path), 4, lambda _: True)
    resolved: list[str] = []
    real = os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda p: resolved.append(p) or real(p))
    for _ in range(100):
        assert not watch.holds(namespace["helper"].__code__)  # of the file, not the loop
        assert not watch.holds(pytest.importorskip.__code__)  # of another file
    assert watch.holds(namespace["epoch"].__code__)
    assert sorted(resolved) == sorted([str(path), pytest.importorskip.__code__.co_filename])


def test_a_hand_off_off_the_main_thread_leaves_the_main_threads_tracer_named(
    tmp_path: Path,
) -> None:
    """The loop's module imported in another thread: the tracer counts nothing more, but
    the main thread keeps it (before 3.12 no thread drops another's), so the report still
    names its factor (`swapped` stays False) until the job's end disarms it."""
    path = tmp_path / "train_loop.py"
    path.write_text(LOOP)
    watch = LoopWatch(str(path), 4, lambda _: True)
    watch.arm()
    try:
        if watch.tool is not None:
            pytest.skip("sys.monitoring finds the loop: no tracer to hand off")
        worker = threading.Thread(target=watch.hand_off)
        worker.start()
        worker.join()
        assert watch.marked and not watch.swapped
        assert sys.gettrace() is not None  # the main thread's, still set
    finally:
        watch.disarm()
    assert sys.gettrace() is None
    watch.arm()
    watch.hand_off()  # on the main thread: gone at once, and said so
    assert watch.marked and watch.swapped and sys.gettrace() is None
