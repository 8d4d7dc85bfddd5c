"""A job's progress messages: each stage's first and last step always go, the steps between
at most every PROGRESS_EVERY_S (each message wakes the launcher: one an iteration made a
90 us loop read 190-360 us in place on a busy host)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kernelscope.worker.program import job as job_module
from kernelscope.worker.program.job import Job


def test_steps_within_a_stage_are_sent_at_most_every_so_often(monkeypatch: Any) -> None:
    sent: list[tuple[str, int, int]] = []
    channel = SimpleNamespace(send=lambda m: sent.append((m["stage"], m["step"], m["total"])))
    req = {"job_id": "j", "project_root": ".", "path": "f.py", "trace_dir": "."}
    job = Job(SimpleNamespace(channel=channel, torch=None), req)
    clock = iter([0.0, 0.01, 0.02, 0.03, 0.25, 0.26, 0.27, 0.28, 0.29])
    monkeypatch.setattr(job_module.time, "perf_counter", lambda: next(clock))
    for step in range(1, 6):
        job.progress("timing", step, 0)  # 0.00 0.01 0.02 0.03 0.25
    for step in range(1, 4):
        job.progress("active", step, 3)  # 0.26 0.27 0.28: a new stage, then its last
    job.progress("done")
    assert sent == [("timing", 1, 0), ("timing", 5, 0), ("active", 1, 3), ("active", 3, 3)]
    assert round(job.stages["timing"], 2) == 0.26 and round(job.stages["schedule"], 2) == 0.03
