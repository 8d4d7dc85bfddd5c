"""Trace (+ sidecar) → verdict and findings: builds the facts once, then the verdict and
every check over them. Pure: no LSP, no torch."""

from __future__ import annotations

import gc
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

import msgspec

from kernelscope.analysis.calls import find_calls
from kernelscope.analysis.checks import DEFAULT_CHECKS
from kernelscope.analysis.collectives import Communication, communication
from kernelscope.analysis.facts import Options, facts_of, first_kernel_delay
from kernelscope.analysis.roofline import OpRoof
from kernelscope.analysis.timeline import build_timeline
from kernelscope.analysis.trace_load import load_trace
from kernelscope.analysis.trace_model import Trace
from kernelscope.analysis.verdict import Verdict
from kernelscope.findings import Finding
from kernelscope.protocol import Sidecar


class Analysis(msgspec.Struct):
    """Everything the analyses found in one trace."""

    verdict: Verdict
    findings: list[Finding]
    entry_to_first_kernel_us: float | None
    steps: int
    warnings: list[str] = []
    roofline: list[OpRoof] = []
    calls_found_by: str = ""
    """How the calls were found in the trace: ks:call, profiler steps, annotations, trace."""
    communication: Communication | None = None


def analyze(
    trace: Trace,
    sidecar: Sidecar | None = None,
    options: Options | None = None,
    function_path: str | None = None,
    cold_trace: Trace | None = None,
) -> Analysis:
    """Run every analysis on one trace; the sidecar adds FLOPs, lines and the cold call."""
    options = options or Options()
    with _collector_paused():
        calls = find_calls(trace)
        timeline = build_timeline(trace, options.min_gap_us, calls)
        facts = facts_of(trace, sidecar, timeline, options, function_path, cold_trace, calls)
        findings = [f for check in DEFAULT_CHECKS for f in check(facts, options)]
        comm = communication(trace, calls)
    entry = first_kernel_delay(cold_trace) if cold_trace is not None else first_kernel_delay(trace)
    return Analysis(
        facts.verdict,
        findings,
        entry,
        timeline.steps,
        list(trace.warnings),
        roofline=facts.roofline,
        calls_found_by=calls.source,
        communication=comm,
    )


@contextmanager
def _collector_paused() -> Generator[None]:
    """The garbage collector off meanwhile: the analyses make many short-lived objects, and
    each collection they would trigger walks the trace's lists of events (a 150 MB trace
    has 655 k), for nothing: none of them is in a cycle."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def analyze_file(
    path: str | Path, sidecar_path: str | Path | None = None, options: Options | None = None
) -> Analysis:
    """Load a trace (and its sidecar) and analyze it; raises TraceError or SidecarError."""
    trace = load_trace(path)
    sidecar = load_sidecar(sidecar_path) if sidecar_path else None
    return analyze(trace, sidecar, options)


class SidecarError(Exception):
    """The sidecar file cannot be read."""


def load_sidecar(path: str | Path) -> Sidecar:
    """A worker sidecar written beside a trace."""
    try:
        return msgspec.json.decode(Path(path).read_bytes(), type=Sidecar)
    except OSError as e:
        raise SidecarError(f"cannot read {path}: {e.strerror or e}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise SidecarError(f"{path} is not a kernelscope sidecar: {e}") from None
