"""What user code prints, as the worker keeps it (worker/program/output.py): written to the
capture's file by this process, a forked child or a subprocess, the last 64 KiB of each job
read back from a whole line on."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from kernelscope.worker.program import output
from kernelscope.worker.program.output import OUTPUT_KEEP, OutputCapture


@pytest.fixture
def capture() -> Iterator[OutputCapture]:
    c = OutputCapture()
    c.begin()
    yield c
    c.close()


def test_what_is_written_comes_back_and_the_file_is_unlinked(capture: OutputCapture) -> None:
    os.write(capture.fd, b"first line\n")
    os.write(capture.fd, "second: \u00b5s\n".encode())
    assert capture.collect() == ("first line\nsecond: \u00b5s\n", False)
    assert os.fstat(capture.fd).st_nlink == 0  # nothing left behind in the temporary folder


def test_collect_keeps_it_and_take_separates_the_jobs(capture: OutputCapture) -> None:
    os.write(capture.fd, b"import and provider\n")
    assert capture.collect() == ("import and provider\n", False)
    assert capture.take() == ("import and provider\n", False)  # collect() left it there
    os.write(capture.fd, b"the function\n")
    assert capture.collect() == ("the function\n", False)
    capture.begin()
    assert capture.collect() == ("", False)
    os.write(capture.fd, b"the next job\n")
    assert capture.take() == ("the next job\n", False)


def test_more_than_kept_is_the_tail_from_a_whole_line(capture: OutputCapture) -> None:
    for i in range(100):
        os.write(capture.fd, b"%04d " % i + b"y" * 994 + b"\n")  # 1000 bytes a line
    text, truncated = capture.collect()
    assert truncated
    lines = text.splitlines()
    assert len(text.encode()) <= OUTPUT_KEEP
    assert all(len(line) == 999 for line in lines)  # whole lines only
    assert lines[0].startswith("0035 ") and lines[-1].startswith("0099 ")  # 0034 was cut
    os.write(capture.fd, b"tail")
    assert capture.collect()[0].endswith("0099 " + "y" * 994 + "\ntail")


def test_a_kept_window_that_begins_a_line_keeps_that_line(capture: OutputCapture) -> None:
    os.write(capture.fd, b"before\n" + b"x" * (OUTPUT_KEEP - 1) + b"\n")
    text, truncated = capture.collect()
    assert truncated and text == "x" * (OUTPUT_KEEP - 1) + "\n"
    capture.begin()
    os.write(capture.fd, b"x" * (OUTPUT_KEEP + 10))  # one line, no newline: its end
    text, truncated = capture.collect()
    assert truncated and text == "x" * OUTPUT_KEEP
    capture.begin()
    os.write(capture.fd, b"x" * OUTPUT_KEEP)  # just what is kept
    assert capture.collect() == ("x" * OUTPUT_KEEP, False)


def test_python_streams_are_flushed_first(capture: OutputCapture) -> None:
    stream = os.fdopen(os.dup(capture.fd), "w", buffering=1 << 16)
    saved = sys.stdout
    sys.stdout = stream
    try:
        print("buffered in Python", end="")
        assert capture.collect() == ("buffered in Python", False)
        print(" then left behind by begin()")
        capture.begin()
        assert capture.collect() == ("", False)
    finally:
        sys.stdout = saved
        stream.close()


def test_a_forked_child_writes_into_the_job_even_after_the_file_was_emptied(
    capture: OutputCapture,
) -> None:
    """A DataLoader worker forked in one job shares the file: emptied under it, its next
    write goes to the new end (O_APPEND), not after a hole where the old end was."""
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one line now, one once told to
        try:
            os.write(capture.fd, b"child before\n")
            os.read(go_r, 1)
            os.write(capture.fd, b"child after\n")
        finally:
            os._exit(0)
    os.close(go_r)
    os.write(capture.fd, b"x" * 5000 + b"\n")
    while "child before\n" not in capture.collect()[0]:
        os.sched_yield()
    capture.take()
    os.write(capture.fd, b"parent\n")
    os.write(go_w, b"!")
    os.close(go_w)
    assert os.waitpid(pid, 0)[1] == 0
    assert capture.collect() == ("parent\nchild after\n", False)


def test_a_subprocess_on_fd_1_is_captured(capture: OutputCapture) -> None:
    code = "import sys; print('from python'); sys.stderr.write('to stderr\\n')"
    subprocess.run([sys.executable, "-c", code], stdout=capture.fd, stderr=capture.fd, check=True)
    subprocess.run(["sh", "-c", "echo from sh"], stdout=capture.fd, check=True)
    assert capture.collect() == ("from python\nto stderr\nfrom sh\n", False)


def test_dropped_lines_are_left_out(capture: OutputCapture) -> None:
    capture.drop_lines(b"[bench] ")
    capture.drop_lines_with(b"profiler stack")
    os.write(capture.fd, b"kept 1\n[bench] dropped\n12:00:01 a profiler stack warning\nkept 2\n")
    os.write(capture.fd, b"not [bench] at the start\n")
    assert capture.collect() == ("kept 1\nkept 2\nnot [bench] at the start\n", False)


def test_without_a_temporary_folder_the_worker_runs_keeping_no_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("tempfile.tempdir", "/nonexistent/kernelscope")
    capture = OutputCapture()
    try:
        capture.begin()
        os.write(capture.fd, b"printed\n")
        assert capture.take() == ("", False)
    finally:
        capture.close()


def test_past_the_cap_all_but_the_tail_is_freed_on_disk(
    capture: OutputCapture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program run to its end (--no-stop-after) that prints each step for hours: past
    OUTPUT_CAP on disk, the thread that looks now and then frees all but the last 64 KiB
    (a hole: the file keeps its size, so nothing is lost or reordered); what comes back is
    the tail, and the next job starts empty."""
    monkeypatch.setattr(output, "OUTPUT_CAP", 256 * 1024)
    monkeypatch.setattr(output, "CAP_POLL_S", 0.02)
    fresh = OutputCapture()  # its thread polls at the patched rate
    try:
        line = b"y" * 999 + b"\n"
        for _ in range(400):  # 400 KB: past the cap
            os.write(fresh.fd, line)
        deadline = time.monotonic() + 10
        on_disk = os.fstat(fresh.fd).st_blocks * 512
        while on_disk > output.OUTPUT_CAP and time.monotonic() < deadline:
            time.sleep(0.01)
            on_disk = os.fstat(fresh.fd).st_blocks * 512
        assert on_disk <= OUTPUT_KEEP + 3 * 4096  # the tail and the page it begins in
        assert os.fstat(fresh.fd).st_size == 400_000  # every byte still where it was written
        os.write(fresh.fd, b"last\n")
        text, truncated = fresh.collect()
        assert truncated and text.endswith(line.decode() + "last\n")
        assert all(x in ("y" * 999, "last") for x in text.splitlines())  # whole lines
        fresh.begin()
        os.write(fresh.fd, b"next job\n")
        assert fresh.collect() == ("next job\n", False)
    finally:
        fresh.close()
    os.write(capture.fd, b"under the cap\n")
    assert capture.cap()
    assert capture.collect() == ("under the cap\n", False)
