"""Trace analysis speed and memory against a bare msgspec decode and HolisticTraceAnalysis.

Synthesizes a plain-JSON Kineto trace of ``--size-mb`` MB by replicating the events of real
H200 recordings (fixtures/*/trace.json.gz) with shifted timestamps and shifted correlation,
flow, External id and Python id values (so links stay unique), into a temporary directory
(``--gzip``: and a gzip copy of it). Then, interleaved, ``--rounds`` rounds of:

  (a) a bare decode: read the file (and inflate it) + ``msgspec.json.decode`` into a plain
      Struct of every event field kernelscope could use (``args`` as ``msgspec.Raw``);
  (b) kernelscope's analysis of the file, ``kernelscope.analysis.diagnose.analyze_file(path)``;
  (c) HolisticTraceAnalysis's parser of one trace file (what ``TraceAnalysis`` runs per
      rank), when HTA is installed: in this process up to ``--hta-inline-mb``, above that
      once, in a child process capped at 80 % of the available memory;

and the peak memory of (a) and (b) in fresh child processes. Targets (issue 10): (b) <= 1.5x
(a), peak memory of (b) <= 1.5x the JSON; (issue 3) (c) >= 8x (b).

    python bench/trace_speed.py [--size-mb 150] [--gzip] [--rounds 3] [--trace FILE] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gc
import gzip
import importlib
import importlib.metadata
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
MEMORY_VS_FILE = 1.5


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


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def bare_decode(path: Path) -> object:
    return _BARE.decode(_read(path))


def bare_decode_no_gc(path: Path) -> object:
    return _BARE_NO_GC.decode(_read(path))


def generic_decode(path: Path) -> object:
    """``msgspec.json.decode`` with no type: dicts and lists, as a script would start."""
    return msgspec.json.decode(_read(path))


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
    _, once, t0, _, fields = sources[0]
    with path.open("wb") as out:
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
        return out.tell()


def gzip_copy(path: Path) -> Path:
    """``path`` gzip'd beside it (level 1: the inflating cost is the same at any level)."""
    out = path.with_name(path.name + ".gz")
    with path.open("rb") as src, gzip.open(out, "wb", compresslevel=1) as dst:
        while chunk := src.read(16 << 20):
            dst.write(chunk)
    return out


# -- measurement --------------------------------------------------------------------------


def _load(path: Path) -> object:
    from kernelscope.analysis.trace_load import load_trace

    return load_trace(path)


def _analyze(path: Path) -> object:
    from kernelscope.analysis.diagnose import analyze_file

    return analyze_file(path)


def _analyze_one_stream(path: Path) -> object:
    """(b) with the file read by this process alone, as below MIN_BYTES."""
    from kernelscope.analysis import trace_load
    from kernelscope.analysis.diagnose import analyze_file

    apart = trace_load.processes
    trace_load.processes = lambda _size, _gzipped=False: 1
    try:
        return analyze_file(path)
    finally:
        trace_load.processes = apart


def _readers(size: int, gzipped: bool) -> int:
    from kernelscope.analysis.trace_segments import processes

    return processes(size, gzipped)


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


def _columns(
    with_hta: bool = True, parallel: bool = False
) -> dict[str, tuple[str, Callable[[Path], object]]]:
    """key: (what, function), in the order they are timed."""
    columns: dict[str, tuple[str, Callable[[Path], object]]] = {
        "a": ("bare msgspec decode into a plain Struct (args: Raw), incl. file read", bare_decode),
        "a2": ("the same decode, Struct with gc=False (info)", bare_decode_no_gc),
        "b": ("kernelscope.analysis.diagnose.analyze_file(path), incl. file read", _analyze),
        "b2": ("kernelscope trace_load.load_trace(path) (info: the trace model's share)", _load),
    }
    if parallel:
        columns["b1"] = (
            "(b) read in one stream, by this process alone (info)",
            _analyze_one_stream,
        )
    if with_hta:
        name, hta = _hta()
        if hta is not None:
            columns["c"] = (name + ", incl. file read", hta)
    return columns


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
import resource, sys, time
from pathlib import Path
sys.path.insert(0, {bench!r})
import trace_speed
key, mode, path, cap = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
fn = trace_speed._columns(key == "c")[key][1]
if cap:
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
t0 = time.perf_counter()
if mode == "run":
    result = fn(path)
wall = time.perf_counter() - t0
status = Path("/proc/self/status").read_text()
print(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")), wall)
"""


class ChildRun(msgspec.Struct):
    """A column run once in a fresh process."""

    peak: int
    """Its peak RSS, bytes (VmHWM)."""
    wall: float
    tree: int
    """The peak of the summed PSS of it and its children (each page shared by n processes
    counted 1/n in each), sampled every 10 ms, bytes."""


def in_child(key: str, path: Path, cap: int = 0, run: bool = True) -> ChildRun | str:
    """Column ``key`` on ``path`` in a fresh child (address space capped at ``cap`` bytes when
    non-zero); a one-line reason when the child failed. The peak is VmHWM: Linux carries
    ``ru_maxrss`` over fork and exec, so a child's would start at this (large) process's."""
    code = _CHILD.format(bench=str(Path(__file__).parent))
    with tempfile.TemporaryFile("w+") as out_file, tempfile.TemporaryFile("w+") as err_file:
        proc = subprocess.Popen(  # to files: a pipe nobody reads while we sample would fill
            [sys.executable, "-c", code, key, "run" if run else "idle", str(path), str(cap)],
            stdout=out_file,
            stderr=err_file,
            text=True,
        )
        tree = 0
        while proc.poll() is None:
            tree = max(tree, _tree_pss(proc.pid))
            time.sleep(0.01)
        out_file.seek(0)
        err_file.seek(0)
        out, err = out_file.read(), err_file.read()
    if proc.returncode != 0:
        last = (err.strip().splitlines() or ["no output"])[-1]
        return f"failed (exit {proc.returncode}): {last}"
    peak, wall = out.split()
    return ChildRun(int(peak) * 1024, float(wall), tree)


def _tree_pss(pid: int) -> int:
    """The summed PSS of a process and its descendants, bytes (0 for those gone meanwhile)."""
    total = 0
    pending = [pid]
    while pending:
        p = pending.pop()
        try:
            rollup = Path(f"/proc/{p}/smaps_rollup").read_text()
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        for line in rollup.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1]) * 1024
                break
        pending += map(int, children)
    return total


def _available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def measure(path: Path, json_size: int, options: argparse.Namespace) -> None:
    """Times, memory and ratios for one file (plain or gzip) of ``json_size`` bytes of JSON."""
    size = path.stat().st_size
    print(f"\n=== {path.name}: {size / 1e6:.1f} MB on disk, {json_size / 1e6:.1f} MB of JSON ===")
    inline_hta = not options.no_hta and json_size <= options.hta_inline_mb * 1e6
    readers = _readers(json_size, size != json_size)
    columns = _columns(with_hta=inline_hta, parallel=readers > 1)
    if readers > 1:
        print(f"  (b) reads this file in {readers} processes (trace_segments)")
    if not options.no_hta and not inline_hta and "c" not in columns:
        hta_name, hta = _hta()
        if hta is None:
            print(hta_name)
    wall: dict[str, list[float]] = {key: [] for key in columns}
    cpu: dict[str, list[float]] = {key: [] for key in columns}
    for r in range(options.rounds):
        line: list[str] = []
        for key, (_, fn) in columns.items():
            w, c = _timed(fn, path)
            wall[key].append(w)
            cpu[key].append(c)
            line.append(f"{key} {w:.3f} s")
        print(f"  round {r + 1} wall times: " + ", ".join(line))
    load = os.getloadavg()[0]
    if load > (os.cpu_count() or 1):
        print(f"  warning: load average {load:.1f} on {os.cpu_count()} CPUs: wall times are "
              "noisy; the CPU-time ratios below are steadier")  # fmt: skip
    median = {key: statistics.median(ts) for key, ts in wall.items()}
    median_cpu = {key: statistics.median(ts) for key, ts in cpu.items()}
    print(f"{'':3} {'median wall s':>13} {'min wall s':>10} {'median CPU s':>12}  what")
    for key, (what, _) in columns.items():
        print(f"{key:3} {median[key]:13.3f} {min(wall[key]):10.3f} "
              f"{median_cpu[key]:12.3f}  {what}")  # fmt: skip

    if not options.no_hta and not inline_hta:
        cap = int(_available() * 0.8)
        got = in_child("c", path, cap)
        if isinstance(got, str):
            print(f"c   HTA once in a child capped at {cap / 1e9:.1f} GB: {got}")
        else:
            median["c"] = got.wall
            print(f"c   {got.wall:13.3f} (once, in a child capped at {cap / 1e9:.1f} GB; peak "
                  f"{got.peak / 1e9:.1f} GB)  HolisticTraceAnalysis's parser")  # fmt: skip

    memory: dict[str, int] = {}
    idle = in_child("b", path, run=False)
    assert not isinstance(idle, str), idle
    for key in ("a", "b"):
        got = in_child(key, path)
        if isinstance(got, str):
            print(f"peak memory of ({key}): {got}")
            continue
        memory[key] = got.peak - idle.peak
        print(f"peak memory of ({key}) in a fresh process: {got.peak / 1e6:.0f} MB RSS, less "
              f"{idle.peak / 1e6:.0f} MB for the interpreter and imports = "
              f"{memory[key] / 1e6:.0f} MB = {memory[key] / json_size:.2f}x the JSON")  # fmt: skip
        if key == "b" and readers > 1:  # with the processes that read it
            memory[key] = max(memory[key], got.tree - idle.tree)
            print(f"    with its {readers} reading processes: peak summed PSS {got.tree / 1e6:.0f}"
                  f" MB (sampled every 10 ms), less {idle.tree / 1e6:.0f} MB idle = "
                  f"{(got.tree - idle.tree) / 1e6:.0f} MB = "
                  f"{(got.tree - idle.tree) / json_size:.2f}x the JSON")  # fmt: skip

    ratio = median["b"] / median["a"]
    print(f"(b)/(a) kernelscope analysis vs bare decode, median wall: {ratio:.2f}x "
          f"(target <= {SPEED_VS_DECODE}x): {_verdict(ratio <= SPEED_VS_DECODE)}")  # fmt: skip
    print(f"    info: by median CPU time {median_cpu['b'] / median_cpu['a']:.2f}x "
          "(CPU time counts the reader thread too); (b2)/(a), the trace model alone: "
          f"{median['b2'] / median['a']:.2f}x")  # fmt: skip
    if "b1" in median:
        print(f"    info: read in one stream (b1)/(a) {median['b1'] / median['a']:.2f}x; the "
              f"processes made (b) {median['b1'] / median['b']:.2f}x faster")  # fmt: skip
    if "c" in median:
        speedup = median["c"] / median["b"]
        print(f"(c)/(b) HTA's parser vs kernelscope analysis: {speedup:.1f}x slower "
              f"(target >= {SPEED_VS_HTA}x): {_verdict(speedup >= SPEED_VS_HTA)}")  # fmt: skip
    if "b" in memory:
        share = memory["b"] / json_size
        print(f"peak memory of (b) / JSON size: {share:.2f}x (target <= {MEMORY_VS_FILE}x): "
              f"{_verdict(share <= MEMORY_VS_FILE)}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=150.0, help="synthetic trace size")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of each")
    parser.add_argument("--trace", type=Path, help="use this plain-JSON trace instead")
    parser.add_argument("--keep", type=Path, help="write the synthetic trace here and keep it")
    parser.add_argument("--gzip", action="store_true", help="also measure a gzip copy")
    parser.add_argument("--no-hta", action="store_true", help="skip HolisticTraceAnalysis")
    parser.add_argument("--hta-inline-mb", type=float, default=500.0,
                        help="above this, HTA runs once in a capped child")  # fmt: skip
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
        kinds: dict[str, int] = {}
        for e in msgspec.json.decode(path.read_bytes(), type=BareTrace).traceEvents:
            kinds[e.cat or f"ph={e.ph}"] = kinds.get(e.cat or f"ph={e.ph}", 0) + 1
        print(f"events: {sum(kinds.values()):,} in all; by category: " + ", ".join(
            f"{k} {n:,}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])
        ))  # fmt: skip
        print(f"python {sys.version.split()[0]}, msgspec {msgspec.__version__}, "
              f"{os.cpu_count()} CPUs, {_available() / 1e9:.1f} GB available, load average "
              f"{os.getloadavg()[0]:.1f}; {options.rounds} interleaved rounds of each")  # fmt: skip
        if size <= 500e6:
            w, _ = _timed(generic_decode, path)
            print(f"info: an untyped msgspec.json.decode of it (dicts) takes {w:.3f} s")
        measure(path, size, options)
        if options.gzip:
            t0 = time.perf_counter()
            gz = gzip_copy(path)
            print(f"\ngzip copy written in {time.perf_counter() - t0:.1f} s")
            measure(gz, size, options)


if __name__ == "__main__":
    main()
