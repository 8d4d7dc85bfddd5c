"""Builders of small hand-made sidecars, for the hand-made traces of tests/support/traces.py."""

from __future__ import annotations

from kernelscope.protocol import ColdCall, LineStat, Sidecar, UnprofiledTiming


def cpu_sidecar(*lines: LineStat, us_per_call: float = 80.0) -> Sidecar:
    """A CPU run's sidecar: its unprofiled time per call and the line pass's lines."""
    return Sidecar(
        function_line=3,
        device_type="cpu",
        device_name="cpu",
        device_index=None,
        device_properties={},
        wait=1,
        warmup=1,
        active=2,
        cold=ColdCall(first_call_us=100.0),
        timing=UnprofiledTiming(us_per_call=us_per_call, method="perf_counter", reps=100),
        wall_us_per_step=100.0,
        lines=list(lines),
    )
