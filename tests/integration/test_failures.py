"""Every bad input gets a clear error naming the user's file and line; the next job still works."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernelscope.engine.targets import TargetError, load_target

from support import WORKLOADS
from support.jobs import LauncherDriver, failed, ok

FAIL = WORKLOADS / "failures.py"
GOOD = f"{WORKLOADS}/three_lines.py::cpu_sync"


def _next_job_works(driver: LauncherDriver) -> None:
    ok(driver.run(GOOD))


@pytest.mark.parametrize(
    ("spec", "kind", "line", "words"),
    [
        (f"{FAIL}::raises", "user_exception", 10, "ValueError: bad shape (3,)"),
        (f"{FAIL}::interrupted", "keyboard_interrupt", 27, "KeyboardInterrupt"),
        (f"{FAIL}::sys_exit", "exit", 31, "SystemExit: 4"),
        (f"{FAIL}::oom", "cuda_oom", 36, "OutOfMemoryError"),
        (f"{FAIL}::reads_stdin", "user_exception", 49, "EOFError"),
        (f"{FAIL}::exits", "exit", 14, "os._exit(7)"),
        (f"{FAIL}::segfault", "crash", 18, "Segmentation fault"),
        (f"{WORKLOADS}/syntax_error.py::broken", "syntax_error", 1, "SyntaxError"),
        (
            f"{WORKLOADS}/three_lines.py::nope",
            "unknown_qualname",
            None,
            "three_lines.py has no 'nope'",
        ),
        (f"{WORKLOADS}/three_lines.py::NOT_A_FUNCTION", "not_callable", None, "is a int"),
        (f"{WORKLOADS}/three_lines.py::needs_inputs", "missing_inputs", 33, "needs_inputs_inputs"),
    ],
)
def test_bad_input(
    driver: LauncherDriver, spec: str, kind: str, line: int | None, words: str
) -> None:
    f = failed(driver.run(spec))
    assert f.kind == kind, f
    assert words in f.message, f.message
    if line is not None:
        assert f.line == line, f
        assert f.path and f.path.endswith(spec.split("::", maxsplit=1)[0].rsplit("/", 1)[1])
    assert not any("kernelscope" in t for t in f.traceback if kind != "crash"), f.traceback
    _next_job_works(driver)


def test_missing_inputs_names_the_provider_to_write(driver: LauncherDriver) -> None:
    f = failed(driver.run(f"{WORKLOADS}/three_lines.py::needs_inputs"))
    assert "define needs_inputs_inputs(batch_size=1, device=...)" in f.message
    assert f.line == 33


def test_missing_file_is_refused_before_any_worker(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="no such file"):
        load_target(f"{tmp_path / 'gone.py'}::f")


def test_unsaved_buffer_of_a_file_not_on_disk_runs(driver: LauncherDriver, tmp_path: Path) -> None:
    source = "import torch\n\ndef f():\n    return torch.ones(3).sum()\n"
    ok(driver.run(f"{tmp_path / 'new.py'}::f", source=source))


def test_endless_loop_times_out_at_its_line(driver: LauncherDriver) -> None:
    f = failed(driver.run(f"{FAIL}::endless", timeout=3.0))
    assert f.kind == "timeout"
    assert "timed out after 3 s" in f.message
    assert f.line in (22, 23)
    _next_job_works(driver)


def test_output_is_captured_and_frames_survive(driver: LauncherDriver) -> None:
    result = ok(driver.run(f"{FAIL}::noisy"))
    out = result.finished.output
    assert result.finished.output_truncated
    assert len(out.encode()) <= 64 * 1024 + 16
    assert "hello from a subprocess" in out
    assert "raw bytes on fd 1" in out
    assert "hello from C printf" in out
    _next_job_works(driver)


def test_cancel_stops_the_job_and_keeps_the_worker(driver: LauncherDriver) -> None:
    pid = ok(driver.run(GOOD)).ready.pid
    stopped_in = _cancel(driver, "endless")
    assert stopped_in < 2.0
    assert ok(driver.run(GOOD)).ready.pid == pid  # the Python loop was interrupted, not killed


def test_cancel_kills_a_worker_stuck_in_c_code(driver: LauncherDriver) -> None:
    pid = ok(driver.run(GOOD)).ready.pid
    assert _cancel(driver, "blocked_in_c") < 2.0
    assert ok(driver.run(GOOD)).ready.pid != pid


def _cancel(driver: LauncherDriver, qualname: str) -> float:
    import asyncio
    import time

    from kernelscope.engine.targets import Schedule, build_request

    target = load_target(f"{FAIL}::{qualname}")
    request = build_request(target, driver.tmp / "traces", Schedule(0, 0, 1))

    async def cancel_after(delay: float) -> float:
        task = asyncio.ensure_future(driver.launcher.profile(request, None, 60.0))
        await asyncio.sleep(delay)
        t0 = time.perf_counter()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.perf_counter() - t0

    return driver.loop.run_until_complete(cancel_after(2.0))


def test_a_worker_killed_holding_most_of_the_memory_is_said_to_be_out_of_memory(
    driver: LauncherDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The OOM killer's SIGKILL says nothing to the worker: the launcher samples a busy
    worker's resident memory, and one killed holding half the machine's or more is said to
    be out of memory, in the profiled stage where it died. The machine's size is the one
    thing set here (1 GB), so that the worker's real 0.7 GB counts as most of it."""
    monkeypatch.setattr("kernelscope.engine.launcher.memory_total", lambda: 1_000_000_000)
    f = failed(driver.run(f"{WORKLOADS}/killed.py::killed_while_profiled", timeout=120.0))
    assert f.kind == "crash"
    assert "killed (SIGKILL) during the active stage, holding 0." in f.message
    assert "of this machine's 1.0 GB: most likely by the kernel's out-of-memory killer" in f.message
    assert "profile a smaller function that it calls" in f.message
    _next_job_works(driver)


def test_crash_replaces_the_worker(driver: LauncherDriver) -> None:
    pid = ok(driver.run(GOOD)).ready.pid
    failed(driver.run(f"{FAIL}::segfault"))
    assert ok(driver.run(GOOD)).ready.pid != pid


BAD_FRAME_WORKER = r"""
import os, sys, time
from kernelscope import protocol
def read(n):
    b = b""
    while len(b) < n:
        c = os.read(0, n - len(b))
        if not c:
            sys.exit(3)
        b += c
    return b
read(int.from_bytes(read(4), "big"))  # the program the launcher sends
ready = protocol.WorkerReady(pid=os.getpid(), hostname="h", python="3", executable="x",
                             torch=None, cuda=None)
os.write(1, protocol.encode_frame(ready))
(size,) = protocol.FRAME_HEADER.unpack(read(protocol.FRAME_HEADER.size))
read(size)  # the job
body = b'{"type":"counters_finished","job_id":"j","warm_us_per_call":"soon"}'
os.write(1, protocol.FRAME_HEADER.pack(len(body)) + body)
time.sleep(120)
"""


def test_a_frame_the_server_cannot_read_fails_the_job_at_once() -> None:
    """A worker that answers with a frame that does not decode (a field of another type, as
    a worker out of step with its server sends): the job fails at once, naming it, and the
    worker is stopped; it does not wait for its timeout."""
    import asyncio
    import time

    from kernelscope.engine.launcher import WorkerProcess
    from kernelscope.engine.runner import JobFailed
    from kernelscope.protocol import RunCounters

    async def go() -> tuple[JobFailed, float]:
        worker = WorkerProcess([sys.executable, "-u", "-c", BAD_FRAME_WORKER])
        await worker.start(30)
        job = RunCounters(job_id="j", path="x.py", qualname="f", module_name="x",
                          project_root="/", trace_dir="/tmp")  # fmt: skip
        t = time.monotonic()
        try:
            await worker.run(job, None, 60, True)
        except JobFailed as e:
            return e, time.monotonic() - t
        finally:
            await worker.kill()
        raise AssertionError("the job did not fail")

    failed, seconds = asyncio.run(go())
    assert seconds < 10, seconds
    assert failed.failure.kind == "internal"
    assert "cannot read" in failed.failure.message and "warm_us_per_call" in failed.failure.message
