"""A big JSON trace cut into byte ranges of its ``traceEvents`` array, each decoded in a
process of its own: decoding holds the GIL, so threads would take turns. (A gzip'd trace is
inflated here and its pieces, cut as ``trace_stream`` cuts them, sent to the processes.)

The parent reads only the file's head and tail (where the array starts and ends, and the
fields around it); each child reads its own range. A range's edges are cut by one rule,
the first ``}`` after the nominal offset that a ``,`` and a ``{`` follow, so two neighbours
agree on their shared edge without talking. A cut inside a string or a nested value leaves
the range on its left with an event that never closes, which cannot decode: the caller then
reads the file in one stream instead (``trace_stream``).
"""

from __future__ import annotations

import ctypes
import math
import multiprocessing
import os
import re
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import pairwise
from pathlib import Path
from typing import BinaryIO, TypeVar

import msgspec

from kernelscope.analysis.trace_stream import NotStreamable, array_start, skip_space, top_level

__all__ = [
    "CHILD_BYTES",
    "Layout",
    "ProcessesUnavailable",
    "Segment",
    "layout",
    "piece",
    "processes",
    "run",
    "segments",
]

A = TypeVar("A")
T = TypeVar("T")
#: Below this a plain file is read in one stream: starting processes would cost more than
#: they save.
MIN_BYTES = 64 << 20
#: The same for a gzip'd file's JSON: its inflating, in the parent, competes with the merge,
#: and at 150 MB on two CPUs the processes were slower than one stream.
MIN_GZIP_BYTES = 256 << 20
#: A process more per this many bytes, up to MAX_PROCESSES and the CPUs there are.
BYTES_PER_PROCESS = 32 << 20
MAX_PROCESSES = 8
#: Bytes of events per range (about 3x that in objects while a child decodes it).
SEGMENT_BYTES = 4 << 20
#: A child's memory beyond what it shares with the parent: its segment, the segment decoded,
#: what it sends, its own interpreter's.
CHILD_BYTES = 5 * SEGMENT_BYTES + (32 << 20)
_HEAD_LIMIT = 64 << 20
_TAIL_BYTES = 1 << 20
_WINDOW = 1 << 20
_OVERLAP = 4096
_BETWEEN_EVENTS = re.compile(rb"\}\s*,\s*\{")
_SPACE = b" \t\r\n"
_OPEN, _CLOSE = b"[]"
_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
_PR_SET_PDEATHSIG = 1


class Layout(msgspec.Struct, frozen=True):
    """Where the events array lies in the file, and the document without it."""

    start: int
    """The offset after the array's ``[``."""
    end: int
    """The offset of its ``]``."""
    top_level: dict[str, msgspec.Raw]
    """The document's other fields, undecoded."""


class Segment(msgspec.Struct, frozen=True):
    """One range of the array: from ``lo`` to ``hi`` before its edges are cut."""

    path: str
    lo: int
    hi: int
    layout_start: int
    layout_end: int


def processes(size: int, gzipped: bool = False) -> int:
    """How many processes to read ``size`` bytes of JSON with: 1 (this one) below MIN_BYTES
    (MIN_GZIP_BYTES) or on one CPU."""
    if size < (MIN_GZIP_BYTES if gzipped else MIN_BYTES):
        return 1
    return max(min(_cpus(), MAX_PROCESSES, size // BYTES_PER_PROCESS), 1)


def _cpus() -> int:
    """The CPUs this process may use: its affinity, and its cgroup's quota (``cpu.max``)."""
    if sys.platform != "linux":
        return os.cpu_count() or 1
    cpus = len(os.sched_getaffinity(0))
    try:
        quota, period = _CPU_MAX.read_text().split()[:2]
    except (OSError, ValueError):
        return cpus
    if quota == "max":
        return cpus
    return max(min(cpus, math.ceil(int(quota) / int(period))), 1)


def layout(path: Path, size: int) -> Layout | None:
    """The array's place: after ``"traceEvents": [`` near the start, up to the last ``]``
    that only the document's other fields follow; None when the file is not laid out so."""
    with path.open("rb") as f:
        head = b""
        start = -1
        while start < 0 and len(head) < min(size, _HEAD_LIMIT):
            more = f.read(_WINDOW)
            if not more:  # the file is shorter than it was
                return None
            head += more
            if head.lstrip(_SPACE)[:1] not in (b"{", b""):
                return None
            try:
                start = array_start(head, 0, len(head))
            except NotStreamable:
                return None
        if start < 0:
            return None
        tail_at = max(start, size - _TAIL_BYTES)
        f.seek(tail_at)
        tail = f.read()
    close = len(tail)
    for _ in range(8):
        close = tail.rfind(b"]", 0, close)
        if close < 0:
            return None
        after = tail[close + 1 :]
        try:
            return Layout(start, tail_at + close, top_level(head[: start - 1], after))
        except NotStreamable:
            continue
    return None


def segments(path: Path, where: Layout, count: int) -> list[Segment]:
    """``count`` or more ranges of about equal size over the array."""
    span = where.end - where.start
    step = max(min(SEGMENT_BYTES, span // count + 1), 1)
    edges = [*range(where.start, where.end, step), where.end]
    return [Segment(str(path), lo, hi, where.start, where.end) for lo, hi in pairwise(edges)]


def piece(segment: Segment) -> bytearray:
    """In a child: the segment's whole events as a JSON array (empty when an event longer
    than the segment covers it)."""
    with Path(segment.path).open("rb") as f:
        first, last = segment.lo == segment.layout_start, segment.hi == segment.layout_end
        start = segment.lo if first else _cut(f, segment.lo, segment.layout_end)
        stop = segment.layout_end if last else _cut(f, segment.hi, segment.layout_end)
        if start >= stop:
            return bytearray(b"[]")
        f.seek(start)
        buffer = bytearray(stop - start + 2)  # room for the brackets: no copy
        n = f.readinto(memoryview(buffer)[1:-1])
    if n != stop - start:
        raise OSError(f"{segment.path} changed while it was read")
    if not first:  # the range starts at the comma after the cut: make it the bracket
        comma = skip_space(buffer, 1, len(buffer) - 1)
        buffer[1 : comma + 1] = b" " * comma
    buffer[0], buffer[-1] = _OPEN, _CLOSE
    return buffer


def _cut(f: BinaryIO, offset: int, stop: int) -> int:
    """The offset after the first ``}`` at or after ``offset`` that ``,`` ``{`` follow;
    ``stop`` when there is none before it. Windows start at ``offset``, so both segments
    that share an edge find the same cut."""
    pos = offset
    while pos < stop:
        f.seek(pos)
        window = f.read(min(_WINDOW, stop - pos))
        if not window:  # the file is shorter than it was: the read finds out
            break
        found = _BETWEEN_EVENTS.search(window)
        if found:
            return pos + found.start() + 1
        if pos + len(window) >= stop:
            break
        pos += max(len(window) - _OVERLAP, 1)
    return stop


class ProcessesUnavailable(Exception):
    """This system cannot start the processes (no semaphores, no fork, a process limit), or
    one died: read the file in one stream instead."""


def run(work: Callable[[A], T], items: Iterable[A], workers: int) -> Generator[T]:
    """``work`` over ``items`` in ``workers`` processes, results in order, at most two items
    per process taken ahead (``items`` may be pieces of a file inflated as they are asked
    for). Forked where that is safe (Linux, no other thread running; every process starts
    before the first item is taken), else spawned. The processes die with this one. Raises
    ProcessesUnavailable, or what ``work`` raised."""
    method = "fork" if sys.platform == "linux" and threading.active_count() == 1 else "spawn"
    try:
        pool = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context(method),
            initializer=_die_with,
            initargs=(os.getpid(),),
        )
        pool.submit(int).result()
    except (OSError, NotImplementedError, BrokenProcessPool) as e:
        raise ProcessesUnavailable(str(e)) from None
    try:
        ahead: deque[Future[T]] = deque()
        for item in items:
            ahead.append(pool.submit(work, item))
            if len(ahead) >= 2 * workers:
                yield ahead.popleft().result()
        while ahead:
            yield ahead.popleft().result()
    except BrokenProcessPool as e:  # one was killed: by the system short of memory, or worse
        raise ProcessesUnavailable(str(e)) from None
    finally:  # a caller that stops early does not wait for the items left
        pool.shutdown(wait=True, cancel_futures=True)


def _die_with(parent: int) -> None:
    """In a child: be killed when ``parent`` dies (a forked child would otherwise wait on
    the pool's queue forever)."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before that took effect
        os._exit(1)
