"""What a call timed again in a process that never profiles is asked (engine/clean_timing)."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from kernelscope.engine.clean_timing import timed_again, timing_request, with_clean_timing
from kernelscope.engine.runner import JobFailed
from kernelscope.protocol import (
    CallSite,
    ColdCall,
    Entry,
    ProfileFinished,
    RunProfile,
    Sidecar,
    TimingFinished,
    UnprofiledTiming,
    failure,
)


def _finished(saved: str | None) -> ProfileFinished:
    side = Sidecar(
        function_line=1,
        device_type="cuda",
        device_name="gpu",
        device_index=0,
        device_properties={},
        wait=0,
        warmup=1,
        active=1,
        cold=ColdCall(first_call_us=1.0, trace_path="/t/f.cold.json.gz"),
        timing=UnprofiledTiming(us_per_call=900.0, method="cuda_events", reps=20),
        wall_us_per_step=1.0,
        call_site=CallSite(via="train.py", call=2, saved=saved),
    )
    return ProfileFinished(job_id="j", trace_path="/t/f.json.gz", sidecar=side)


REQUEST = RunProfile(
    job_id="j",
    path="/p/model.py",
    qualname="Block.forward",
    module_name="model",
    project_root="/p",
    trace_dir="/t",
    device="cuda",
    entry=Entry(kind="script", target="train.py", call=2),
)


def test_a_saved_capture_is_replayed_unless_the_timing_may_run_elsewhere() -> None:
    saved = "/p/.kernelscope/captures/Block_forward-call2.pt"
    here = timing_request(REQUEST, _finished(saved), 41.5)
    assert here.job_id == "j-t" and here.host_reference_us == 41.5
    assert here.entry is not None and here.entry.capture == saved
    elsewhere = timing_request(REQUEST, _finished(saved), None, replay_saved=False)
    assert elsewhere.entry is not None and elsewhere.entry.capture is None
    assert elsewhere.entry.target == "train.py"  # the program runs again to its call
    unsaved = timing_request(REQUEST, _finished(None), None)
    assert unsaved.entry is not None and unsaved.entry.capture is None


def test_the_clean_timing_replaces_the_profiling_one_and_keeps_it_beside() -> None:
    finished = _finished(None)
    clean = UnprofiledTiming(us_per_call=600.0, method="cuda_events", reps=40)
    clean.process = "clean worker"
    out = with_clean_timing(finished, TimingFinished(job_id="j-t", timing=clean))
    timing = out.sidecar.timing
    assert (timing.us_per_call, timing.process) == (600.0, "clean worker")
    assert timing.profiling_worker_us_per_call == 900.0
    assert msgspec.json.decode(msgspec.json.encode(out), type=ProfileFinished) == out


def test_a_failed_clean_timing_keeps_the_profiling_one_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fails() -> object:
        raise JobFailed(failure("crash", "the clean worker died"))

    async def times() -> object:
        return TimingFinished(job_id="j-t", timing=UnprofiledTiming(700.0, "cuda_events", 20))

    kept = asyncio.run(timed_again(_finished(None), fails, "profiling worker's"))
    assert kept.sidecar.timing.us_per_call == 900.0
    assert "keeping the profiling worker's: " in caplog.text and "died" in caplog.text
    timed = asyncio.run(timed_again(_finished(None), times, "profiling job's"))
    assert timed.sidecar.timing.us_per_call == 700.0
    assert timed.sidecar.timing.profiling_worker_us_per_call == 900.0
