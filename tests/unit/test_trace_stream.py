"""Traces read in pieces: the cuts between events, files of any size, and the memory guard.

The pieces of a real recording, cut at every chunk size from a few bytes up, must give back
exactly the events a whole-file decode gives; cuts that fall inside strings or nested values
must be found out and moved; a trace too big for the machine is refused with its sizes.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kernelscope.analysis.memory_budget import available_bytes, rss_bytes
from kernelscope.analysis.trace_build import Builder
from kernelscope.analysis.trace_load import (  # pyright: ignore[reportPrivateUsage]
    _decode_whole,
    decode_trace,
    load_trace,
)
from kernelscope.analysis.trace_model import TraceError
from kernelscope.analysis.trace_stream import Chunk, EventPieces, NotStreamable, file_chunks
from kernelscope.cli.progress import ReadingBar

from support import REPO_ROOT

FIXTURE = REPO_ROOT / "fixtures" / "syncs" / "trace.json.gz"
RAW_EVENTS = msgspec.json.Decoder(list[msgspec.Raw])


def pieces_of(data: bytes, size: int) -> tuple[list[bytes], dict[str, Any]]:
    """The events (their bytes) and the other top-level fields, read ``size`` bytes a time."""
    chunks = (Chunk.of(data[i : i + size]) for i in range(0, len(data), size))
    pieces = EventPieces(chunks, lambda piece: [bytes(e) for e in RAW_EVENTS.decode(piece)])
    events = [e for piece in pieces for e in piece]
    top = {k: msgspec.json.decode(v) for k, v in pieces.top_level.items()}
    return events, top


def whole(data: bytes) -> tuple[list[bytes], dict[str, Any]]:
    doc = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    events = [bytes(e) for e in RAW_EVENTS.decode(doc.pop("traceEvents"))]
    return events, {k: msgspec.json.decode(v) for k, v in doc.items()} | {"traceEvents": []}


@pytest.mark.parametrize("size", [7, 100, 4096, 65536, 1 << 20])
def test_pieces_of_a_real_recording_are_its_events(size: int) -> None:
    data = gzip.decompress(FIXTURE.read_bytes())
    assert pieces_of(data, size) == whole(data)


def test_cuts_inside_strings_and_nested_values_are_moved() -> None:
    # names and args that hold "}, {" (a cut's look-alike) in strings and in nested arrays
    tricky = [
        {"ph": "X", "cat": "cpu_op", "name": "a}, {b", "ts": i, "dur": 1,
         "args": {"list": [{"x": 1}, {"y": "}, {"}], "s": '"}, {"'}}
        for i in range(300)
    ]  # fmt: skip
    doc = {
        "schemaVersion": 1,
        "traceEvents": tricky,
        "traceName": "a]b}, {c",
        "baseTimeNanoseconds": 7,
    }
    data = json.dumps(doc).encode()
    for size in (5, 13, 64, 333, 4096):
        events, top = pieces_of(data, size)
        assert [json.loads(e) for e in events] == tricky
        assert top == {"schemaVersion": 1, "traceEvents": [], "traceName": "a]b}, {c",
                       "baseTimeNanoseconds": 7}  # fmt: skip


def test_an_event_longer_than_the_room_before_a_chunk() -> None:
    big = {"ph": "X", "cat": "cpu_op", "name": "x" * (3 << 20), "ts": 1, "dur": 1}
    small = {"ph": "X", "cat": "cpu_op", "name": "y", "ts": 2, "dur": 1}
    data = json.dumps({"traceEvents": [small, big, small, big, small]}).encode()
    events, _ = pieces_of(data, 1 << 20)
    assert [json.loads(e)["name"][:1] for e in events] == list("yxyxy")


@pytest.mark.parametrize(
    "data",
    [
        b"[1, 2]",
        b'{"traceEvents": 3}',
        b'{"a": 1}',
        b"\x00" * 100,
        b'{"traceEvents": [{"a": NaN}]}',
    ],
)
def test_what_cannot_be_cut_says_so(data: bytes) -> None:
    with pytest.raises(NotStreamable):
        pieces_of(data, 64)


@pytest.mark.parametrize("size", [333, 4096, 65536])
def test_a_file_read_in_pieces_gives_the_trace_of_the_whole(tmp_path: Path, size: int) -> None:
    plain = tmp_path / "t.json"
    plain.write_bytes(gzip.decompress(FIXTURE.read_bytes()))
    streamed = Builder().stream(file_chunks(plain, chunk_bytes=size))
    whole_trace = _decode_whole(plain.read_bytes())  # one decode of the whole document
    assert len(streamed.ops) == len(whole_trace.ops) > 0
    assert [(o.name, o.ts, o.parent, o.args) for o in streamed.ops] == [
        (o.name, o.ts, o.parent, o.args) for o in whole_trace.ops
    ]
    assert [(g.name, g.launch, g.op) for g in streamed.gpu_events] == [
        (g.name, g.launch, g.op) for g in whole_trace.gpu_events
    ]
    assert list(streamed.python_functions) == list(whole_trace.python_functions)
    assert streamed.device_properties == whole_trace.device_properties != []
    chunked = list(file_chunks(FIXTURE, chunk_bytes=1000))
    assert b"".join(c.bytes() for c in chunked) == plain.read_bytes()


def test_progress_is_told_and_the_bar_drawn() -> None:
    seen: list[tuple[int, int]] = []
    load_trace(FIXTURE, lambda done, total: seen.append((done, total)))
    assert seen and seen[-1] == (FIXTURE.stat().st_size,) * 2

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    bar = ReadingBar(screen, "reading trace.json.gz")
    bar.MIN_BYTES = 0
    load_trace(FIXTURE, bar)
    assert "reading trace.json.gz [" in screen.getvalue() and "%" in screen.getvalue()
    assert screen.getvalue().endswith(" · analyzing")  # the last: the whole file read
    bar.clear()
    assert screen.getvalue().endswith("\r\x1b[2K")


def test_a_trace_bigger_than_memory_is_refused_before_it_is_read(tmp_path: Path) -> None:
    room = available_bytes()
    assert room is not None and rss_bytes() is not None  # Linux: both are known
    huge = tmp_path / "huge.pt.trace.json"
    with huge.open("wb") as f:  # sparse: no disk, and never read
        f.truncate(max(room, 1 << 30) * 4)
    with pytest.raises(TraceError, match=r"needs about .* of memory and only .* is available"):
        load_trace(huge)
    done = subprocess.run(
        [sys.executable, "-m", "kernelscope", "analyze", str(huge)],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "huge.pt.trace.json" in done.stderr and "of memory" in done.stderr


_UNDER_LIMIT = """
import resource, sys
from pathlib import Path
from kernelscope.analysis.trace_model import TraceError
from kernelscope.analysis.trace_load import load_trace
vm = next(int(l.split()[1]) * 1024 for l in Path("/proc/self/status").read_text().splitlines()
          if l.startswith("VmSize:"))
limit = vm + (512 << 20)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    load_trace(sys.argv[1])
except TraceError as exc:
    print("refused:", exc)
else:
    print("loaded")
"""


def test_a_gzip_that_inflates_past_memory_is_stopped_in_time(tmp_path: Path) -> None:
    # A real recording's events repeated into ~1.5 GB of JSON, as many gzip members (each
    # compressed once): the trailer's size is the last member's, so only inflating shows it.
    data = gzip.decompress(FIXTURE.read_bytes())
    doc = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    events = b",".join(bytes(e) for e in RAW_EVENTS.decode(doc.pop("traceEvents")))
    block = b",".join([events] * max(1, (16 << 20) // len(events)))
    head = b'{"traceEvents": [' + block
    middle = gzip.compress(b"," + block, compresslevel=1)
    path = tmp_path / "big.json.gz"
    with path.open("wb") as f:
        f.write(gzip.compress(head, compresslevel=1))
        for _ in range((1536 << 20) // len(block)):
            f.write(middle)
        f.write(gzip.compress(b"]}"))
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT / "server")}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_UNDER_LIMIT), str(path)],
        check=False, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused: this "), done.stdout
    assert "gzip trace needs about" in done.stdout and "stopped before running out" in done.stdout


def test_zeros_after_the_last_member_across_reads_are_padding(tmp_path: Path) -> None:
    data = gzip.decompress(FIXTURE.read_bytes())
    padded = tmp_path / "padded.json.gz"
    padded.write_bytes(gzip.compress(data) + b"\0" * (3 << 20))  # zeros over several reads
    assert len(load_trace(padded).ops) == len(decode_trace(data).ops) > 0


def test_a_trace_of_metadata_only_loads_empty_and_a_bad_base_time_is_dropped() -> None:
    meta = {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "x"}}
    doc = b'{"traceEvents": [%s], "baseTimeNanoseconds": 1e999}' % json.dumps(meta).encode()
    trace = decode_trace(doc)
    assert trace.ops == [] and trace.gpu_events == [] and trace.base_time_ns is None
    with pytest.raises(TraceError, match="no readable events"):
        decode_trace(b'{"traceEvents": []}')
