"""Trace analysis speed and memory against a bare msgspec decode and HolisticTraceAnalysis.

Synthesizes a plain-JSON Kineto trace of ``--size-mb`` MB by replicating the events of real
H200 recordings (fixtures/*/trace.json.gz) with shifted timestamps and shifted correlation,
flow, External id and Python id values (so links stay unique), into a temporary directory.
Then, interleaved, ``--rounds`` rounds of:

  (a) a bare decode: read the file + ``msgspec.json.decode`` into a plain Struct of every
      event field kernelscope could use (``args`` as ``msgspec.Raw``);
  (b) kernelscope's analysis of the file: ``kernelscope.diagnose.analyze_file(path)`` when it
      exists, else ``load_trace(path)`` + ``op_table(trace)``;
  (c) HolisticTraceAnalysis's parser of one trace file, ``hta.common.trace.parse_trace_file``
      (what ``TraceAnalysis`` runs per rank), when HTA is installed.

and the peak memory of (b) in a fresh child process. Targets (issue text): (b) <= 1.5x (a),
(c) >= 8x (b), peak memory of (b) <= 3x the file size.

    python bench/trace_speed.py [--size-mb 150] [--rounds 3] [--trace FILE] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gc
import gzip
import importlib
import importlib.metadata
import io
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
#: Replicated in this order; together they hold every event kind kernelscope reads:
#: syncs (memcpys, memsets, many cpu_ops and runtime calls), two_streams (two streams,
#: cuLaunchKernelEx driver launches), matmul_add_8192 (cuBLASLt launches, memsets).
SOURCES = ("syncs", "two_streams", "matmul_add_8192")

SPEED_VS_DECODE = 1.5
SPEED_VS_HTA = 8.0
MEMORY_VS_FILE = 3.0


# -- the bare-decode baseline -------------------------------------------------------------


class BareEvent(msgspec.Struct):
    """Every field of a Chrome trace event that an analysis reads; ``args`` undecoded.
    Defaults where Kineto omits a field (metadata events have no cat/dur, flows no args)."""

    ph: str
    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = 0.0
    dur: float = 0.0
    args: msgspec.Raw = msgspec.Raw(b"{}")


class BareTrace(msgspec.Struct):
    traceEvents: list[BareEvent]


class BareEventNoGc(BareEvent, gc=False):
    """The same Struct with the GC not tracking it (msgspec's documented speed option)."""


class BareTraceNoGc(msgspec.Struct):
    traceEvents: list[BareEventNoGc]


_BARE = msgspec.json.Decoder(BareTrace)
_BARE_NO_GC = msgspec.json.Decoder(BareTraceNoGc)


def bare_decode(path: Path) -> object:
    return _BARE.decode(path.read_bytes())


def bare_decode_no_gc(path: Path) -> object:
    return _BARE_NO_GC.decode(path.read_bytes())


# -- synthesis ----------------------------------------------------------------------------

_NUMBER = rb"(-?\d+(?:\.\d+)?)"
#: The values to shift, by the key they follow. Flow ids ("id") equal correlations.
_SHIFTED = re.compile(rb'"(ts|correlation|id|External id|Python id|Python parent id)": ' + _NUMBER)
_ID_STRIDE = 10_000_000  # per copy; far above any id one fixture uses
_STEP = re.compile(rb"ProfilerStep#(\d+)")


class _TopLevel(msgspec.Struct):
    traceEvents: list[msgspec.Raw]


class _EventHead(msgspec.Struct):
    ph: str = ""
    cat: str = ""
    ts: float = 0.0
    dur: float = 0.0


def _fixture_events(name: str) -> tuple[bytes, list[bytes], float, float, dict[str, Any]]:
    """(raw events to copy, raw events to keep once, first ts, last end, top-level fields)."""
    text = gzip.decompress((FIXTURES / name / "trace.json.gz").read_bytes())
    top = msgspec.json.decode(text, type=dict[str, msgspec.Raw])
    events = msgspec.json.decode(text, type=_TopLevel).traceEvents
    copied: list[bytes] = []
    once: list[bytes] = []
    start, end = float("inf"), float("-inf")
    for raw in events:
        head = msgspec.json.decode(raw, type=_EventHead)
        # metadata, instants and the profiler's own span describe the trace, not its work
        if head.ph in {"M", "i"} or head.cat == "Trace":
            once.append(bytes(raw))
            continue
        copied.append(bytes(raw))
        start = min(start, head.ts)
        end = max(end, head.ts + head.dur)
    fields = {k: v for k, v in top.items() if k != "traceEvents"}
    return b",\n  ".join(copied), once, start, end, fields


def _shifted(block: bytes, dt: float, did: int) -> bytes:
    def shift(match: re.Match[bytes]) -> bytes:
        key, value = match[1], match[2]
        if key == b"ts":
            return b'"ts": %.3f' % (float(value) + dt)
        number = int(value)
        return b'"%s": %d' % (key, number + did if number >= 0 else number)

    def renumber(match: re.Match[bytes]) -> bytes:
        return b"ProfilerStep#%d" % (int(match[1]) + did // _ID_STRIDE * 100)

    return _STEP.sub(renumber, _SHIFTED.sub(shift, block))


def synthesize(path: Path, size_mb: float) -> int:
    """Write the trace; returns its size in bytes."""
    sources = [_fixture_events(name) for name in SOURCES]
    target = int(size_mb * 1e6)
    out = io.BytesIO()
    _, once, t0, _, fields = sources[0]
    out.write(b"{\n")
    for key, value in fields.items():
        if key != "traceName":
            out.write(b'  "%s": %s,\n' % (key.encode(), bytes(value)))
    out.write(b'  "traceEvents": [\n  ')
    out.write(b",\n  ".join(once))
    cursor = t0  # where the next copy starts, µs
    copy = 0
    while out.tell() < target:
        for block, _, start, end, _ in sources:
            copy += 1
            dt = round(cursor - start)  # whole µs: shifted times keep their 3 decimals
            out.write(b",\n  ")
            out.write(_shifted(block, dt, copy * _ID_STRIDE))
            cursor += (end - start) + 1000.0  # 1 ms apart
    out.write(b'\n  ],\n  "traceName": "%s"\n}\n' % str(path).encode())
    path.write_bytes(out.getvalue())
    return out.tell()


# -- measurement --------------------------------------------------------------------------


def _load(path: Path) -> object:
    from kernelscope.trace_model import load_trace

    return load_trace(path)


def _load_and_table(path: Path) -> object:
    from kernelscope.ops import op_table
    from kernelscope.trace_model import load_trace

    trace = load_trace(path)
    return trace, op_table(trace)


def _analyses() -> dict[str, tuple[str, str, Callable[[Path], object]]]:
    """key: (what, its role, function). (b) is the whole analysis of a file, the target's;
    the others are parts of it, for information."""
    load = ("kernelscope trace_model.load_trace(path)", "info: the trace model's share", _load)
    table = (
        "kernelscope load_trace(path) + ops.op_table(trace)",
        "info: what the op table of a report costs",
        _load_and_table,
    )
    try:
        analyze_file = importlib.import_module("kernelscope.diagnose").analyze_file
    except (ImportError, AttributeError):
        return {"b": (table[0], "target", table[2]), "b2": load}
    return {"b": ("kernelscope.diagnose.analyze_file(path)", "target", analyze_file),
            "b2": load, "b3": table}  # fmt: skip


def _hta() -> tuple[str, Callable[[Path], object] | None]:
    """HTA's parser proper: the JSON file to its events DataFrame (symbols compressed, times
    rounded), as ``TraceAnalysis`` runs it per rank. Its ``parse_trace_file`` adds passes
    (iterations, links) of which one scans all steps for each event: on a replicated trace
    with thousands of steps it takes minutes, so it is not what is measured here."""
    try:
        from hta.common.trace_parser import parse_trace_dataframe  # pyright: ignore
        from hta.configs.parser_config import ParserConfig  # pyright: ignore

        version = importlib.metadata.version("HolisticTraceAnalysis")
    except Exception as exc:  # an install may be broken in many ways
        return f"HTA not measured: cannot import it ({type(exc).__name__}: {exc})", None
    logging.getLogger("hta").setLevel(logging.ERROR)  # it logs each parse as a warning

    def parse(path: Path) -> object:
        return parse_trace_dataframe(str(path), ParserConfig.get_default_cfg())  # pyright: ignore

    return (
        f"HolisticTraceAnalysis {version} hta.common.trace_parser.parse_trace_dataframe "
        "(default ParserConfig, JSON backend)",
        parse,
    )


def _timed(fn: Callable[[Path], object], path: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one call and of freeing what it returned, garbage from earlier
    calls collected first. Freeing is inside the timer for every column alike: `analyze_file`
    frees its trace before it returns, so the bare decode's result must be freed in the timer
    too, or the two would not be compared on the same work."""
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    result = fn(path)
    del result
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    gc.collect()
    return elapsed, cpu


_CHILD = """
import sys
from pathlib import Path
sys.path.insert(0, {bench!r})
import trace_speed
name, role, fn = trace_speed._analyses()[sys.argv[1]]
if sys.argv[2] == "run":
    result = fn(Path(sys.argv[3]))
status = Path("/proc/self/status").read_text()
print(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
"""


def peak_memory(key: str, path: Path) -> tuple[int, int]:
    """Peak RSS of a fresh child that imports analysis ``key`` only, and of one that also runs
    it on ``path``, in bytes. Read from VmHWM: Linux carries ``ru_maxrss`` over fork and exec,
    so a child's would start at this (large) process's peak."""
    code = _CHILD.format(bench=str(Path(__file__).parent))
    peaks: list[int] = []
    for mode in ("idle", "run"):
        out = subprocess.run(
            [sys.executable, "-c", code, key, mode, str(path)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        peaks.append(int(out) * 1024)  # kB
    return peaks[0], peaks[1]


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=150.0, help="synthetic trace size")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of each")
    parser.add_argument("--trace", type=Path, help="use this plain-JSON trace instead")
    parser.add_argument("--keep", type=Path, help="write the synthetic trace here and keep it")
    parser.add_argument("--no-hta", action="store_true", help="skip HolisticTraceAnalysis")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ks-trace-speed-") as tmp:
        if options.trace is not None:
            path = options.trace
            size = path.stat().st_size
            print(f"trace: {path} (given), {size / 1e6:.1f} MB")
        else:
            folder = options.keep or Path(tmp)
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / "synthetic.pt.trace.json"
            t0 = time.perf_counter()
            size = synthesize(path, options.size_mb)
            print(
                f"trace: {path}, {size / 1e6:.1f} MB plain JSON, synthesized in "
                f"{time.perf_counter() - t0:.1f} s from {' + '.join(SOURCES)} (H200 fixtures)"
            )
        head = msgspec.json.decode(path.read_bytes(), type=BareTrace).traceEvents
        kinds: dict[str, int] = {}
        for e in head:
            kinds[e.cat or f"ph={e.ph}"] = kinds.get(e.cat or f"ph={e.ph}", 0) + 1
        print(f"events: {len(head):,} in all; by category: " + ", ".join(
            f"{k} {n:,}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])
        ))  # fmt: skip
        del head

        analyses = _analyses()
        hta_name, hta = _hta() if not options.no_hta else ("HTA skipped (--no-hta)", None)
        columns: list[tuple[str, str, Callable[[Path], object]]] = [
            ("a", "bare msgspec decode into a plain Struct (args: Raw), incl. file read",
             bare_decode),
            ("a2", "the same decode, Struct with gc=False (info; not a target's baseline)",
             bare_decode_no_gc),
        ]  # fmt: skip
        for key, (name, role, fn) in analyses.items():
            note = "" if role == "target" else f" ({role})"
            columns.append((key, f"{name}, incl. file read{note}", fn))
        if hta is not None:
            columns.append(("c", hta_name + ", incl. file read", hta))
        else:
            print(hta_name)
        print(f"python {sys.version.split()[0]}, msgspec {msgspec.__version__}, "
              f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
              f"{options.rounds} interleaved rounds of each")  # fmt: skip

        wall: dict[str, list[float]] = {key: [] for key, _, _ in columns}
        cpu: dict[str, list[float]] = {key: [] for key, _, _ in columns}
        for r in range(options.rounds):
            line: list[str] = []
            for key, _, fn in columns:
                w, c = _timed(fn, path)
                wall[key].append(w)
                cpu[key].append(c)
                line.append(f"{key} {w:.3f} s")
            print(f"  round {r + 1} wall times: " + ", ".join(line))
        load = os.getloadavg()[0]
        if load > (os.cpu_count() or 1):
            print(
                f"  warning: load average {load:.1f} on {os.cpu_count()} CPUs: other processes "
                "compete, wall times are noisy; the CPU-time ratios below are steadier"
            )
        median = {key: statistics.median(ts) for key, ts in wall.items()}
        median_cpu = {key: statistics.median(ts) for key, ts in cpu.items()}

        print()
        print(f"{'':3} {'median wall s':>13} {'min wall s':>10} {'median CPU s':>12}  what")
        for key, what, _ in columns:
            print(f"{key:3} {median[key]:13.3f} {min(wall[key]):10.3f} "
                  f"{median_cpu[key]:12.3f}  {what}")  # fmt: skip

        memory: dict[str, int] = {}
        for key in analyses:
            idle, peak = peak_memory(key, path)
            memory[key] = peak - idle
            print(
                f"peak memory of ({key}) in a fresh process: {peak / 1e6:.0f} MB RSS, less "
                f"{idle / 1e6:.0f} MB for the interpreter and imports alone = "
                f"{memory[key] / 1e6:.0f} MB"
            )

        print()
        ratio = median["b"] / median["a"]
        print(f"(b)/(a) kernelscope analysis vs bare decode, median wall: {ratio:.2f}x "
              f"(target <= {SPEED_VS_DECODE}x): {_verdict(ratio <= SPEED_VS_DECODE)}")  # fmt: skip
        print(f"    info: by median CPU time {median_cpu['b'] / median_cpu['a']:.2f}x; "
              f"vs the gc=False decode (a2) {median['b'] / median['a2']:.2f}x")  # fmt: skip
        for key in analyses:
            if key != "b":
                print(f"    info: ({key})/(a), {analyses[key][0]}: "
                      f"{median[key] / median['a']:.2f}x wall, "
                      f"{median_cpu[key] / median_cpu['a']:.2f}x CPU")  # fmt: skip
        if "c" in median:
            speedup = median["c"] / median["b"]
            verdict = _verdict(speedup >= SPEED_VS_HTA)
            print(f"(c)/(b) HTA's parser vs kernelscope analysis, median wall: {speedup:.1f}x "
                  f"slower (target >= {SPEED_VS_HTA}x): {verdict}")  # fmt: skip
            for key in analyses:
                if key != "b":
                    print(f"    info: (c)/({key}), HTA vs {analyses[key][0]}: "
                          f"{median['c'] / median[key]:.1f}x")  # fmt: skip
        else:
            print("(c)/(b) HTA's parser vs kernelscope analysis: not measured (see above)")
        for key in analyses:
            share = memory[key] / size
            target = f"(target <= {MEMORY_VS_FILE}x): {_verdict(share <= MEMORY_VS_FILE)}"
            print(f"peak memory of ({key}) / file size: {memory[key] / 1e6:.0f} MB / "
                  f"{size / 1e6:.0f} MB = {share:.2f}x "
                  + (target if key == "b" else "(info)"))  # fmt: skip


if __name__ == "__main__":
    main()
