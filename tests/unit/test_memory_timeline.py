"""The memory pass's timeline on disk: the PNG chart and the Perfetto counter track, drawn
from a real H200 recording (fixtures/memory_gpt2/), and pruned with their run."""

from __future__ import annotations

import gzip
import json
import struct
import zlib
from pathlib import Path

import msgspec

from kernelscope.app.memory_timeline import memory_files, write_memory_timeline
from kernelscope.app.store import RunRecord, Store
from kernelscope.render.memory_plot import memory_trace, render_memory_png
from kernelscope.render.plot import KNEE
from kernelscope.report.schema import Report

from support import FIXTURES

MiB = 2**20


def recorded() -> Report:
    raw = gzip.decompress((FIXTURES / "memory_gpt2" / "report.memory.json.gz").read_bytes())
    return msgspec.json.decode(raw, type=Report)


def pixels(png: bytes) -> tuple[int, int, bytes]:
    """Width, height and the RGB rows (filter bytes dropped) of an 8-bit RGB PNG."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    at, data = 8, b""
    while at < len(png):
        (n,) = struct.unpack(">I", png[at : at + 4])
        if png[at + 4 : at + 8] == b"IDAT":
            data += png[at + 8 : at + 8 + n]
        at += 12 + n
    raw = zlib.decompress(data)
    stride = width * 3 + 1
    return width, height, b"".join(raw[y * stride + 1 : (y + 1) * stride] for y in range(height))


def test_the_chart_marks_the_peak_where_the_timeline_puts_it() -> None:
    m = recorded().memory_pass
    assert m is not None
    width, height, rgb = pixels(render_memory_png(m, "gpt2_step"))
    assert (width, height) == (720, 440)
    # the plot spans x 92..696 over the call; the peak's marker is drawn at its time
    x = round(92 + m.peak_at_us / max(m.call_us, m.timeline[-1][0]) * (696 - 92))
    marked = [
        (xx, y)
        for y in range(48, 384)
        for xx in range(x - 3, x + 4)
        if rgb[(y * width + xx) * 3 : (y * width + xx) * 3 + 3] == bytes(KNEE)
    ]
    assert marked  # the red disc at the peak
    assert min(y for _x, y in marked) < 48 + 0.2 * (384 - 48)  # near the top: it is the highest


def test_the_perfetto_trace_has_a_counter_per_timeline_point_and_the_peak() -> None:
    m = recorded().memory_pass
    assert m is not None
    events = memory_trace(m, "gpt2_step")["traceEvents"]
    counters = [e for e in events if e["ph"] == "C"]
    assert len(counters) == len(m.timeline)
    assert max(e["args"]["MiB"] for e in counters) == max(v for _t, v in m.timeline) / MiB
    (peak,) = [e for e in events if e["ph"] == "i"]
    assert peak["ts"] == m.peak_at_us
    assert "docs/h200-run/memory/library.py:20 (backward)" in peak["args"]["by line"][0]
    json.dumps(events)  # plain JSON


def test_the_files_sit_beside_the_trace_and_go_with_the_run(tmp_path: Path) -> None:
    report = recorded()
    store = Store(tmp_path, keep_per_function=1)
    store.traces_dir.mkdir(parents=True)
    trace = store.traces_dir / "gpt2_step-abc.pt.trace.json.gz"
    trace.write_bytes(b"x")
    report.trace.path, report.trace.cold_path = str(trace), None
    written = write_memory_timeline(report)
    assert written == memory_files(trace)
    assert [p.name for p in written] == ["gpt2_step-abc.memory.png", "gpt2_step-abc.memory.json"]
    assert all(p.stat().st_size > 0 for p in written)
    store.add(
        RunRecord("abc", "/p/library.py", "gpt2_step", "2026-12-02T10:00:00+00:00", "h", report)
    )
    later = msgspec.structs.replace(
        report,
        trace=msgspec.structs.replace(
            report.trace, path=str(trace.with_name("gpt2_step-def.pt.trace.json.gz"))
        ),
    )
    store.add(
        RunRecord("def", "/p/library.py", "gpt2_step", "2026-12-02T10:01:00+00:00", "h", later)
    )
    assert not any(p.exists() for p in written)  # pruned with the first run


def test_no_pass_or_no_trace_writes_nothing() -> None:
    report = recorded()
    assert write_memory_timeline(msgspec.structs.replace(report, memory_pass=None)) is None
    bare = msgspec.structs.replace(report, trace=msgspec.structs.replace(report.trace, path=""))
    assert write_memory_timeline(bare) is None
