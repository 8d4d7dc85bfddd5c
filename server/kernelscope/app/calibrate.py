"""Calibrate: measure a GPU's matmul and copy ceilings on a worker, and keep them as the
peaks the roofline uses on that GPU (analysis.peaks.save_calibrated)."""

from __future__ import annotations

from kernelscope.analysis.peaks import Peaks
from kernelscope.engine.dispatch import runner_for
from kernelscope.engine.remotes import Remote
from kernelscope.protocol import CalibrationFinished, RunCalibration


async def measure(
    request: RunCalibration,
    python: str | None = None,
    remote: Remote | None = None,
    timeout: float = 300.0,
) -> CalibrationFinished:
    """The ceilings measured on a worker of its own; raises JobFailed."""
    runner = runner_for(remote, python, respawn=False)
    try:
        return (await runner.calibrate(request, timeout))[0]
    finally:
        await runner.close()


def peaks_of(measured: CalibrationFinished) -> Peaks:
    """The measured ceilings as the roofline's peaks."""
    return Peaks(
        measured.device_name,
        measured.bf16_tflops,
        measured.fp16_tflops,
        measured.tf32_tflops,
        measured.fp32_tflops,
        measured.copy_gbps,
        source="calibrated",
    )
