"""Device ceilings: a table of datasheet peaks, and measured ones cached by `calibrate`.

Rates are dense (no sparsity) tensor-core TFLOP/s for bf16/fp16/tf32 and plain fp32, and HBM
bandwidth in GB/s, from the vendors' datasheets. Measured ceilings (`kernelscope calibrate`:
a large bf16 matmul and a large device-to-device copy) replace the datasheet's where present:
real kernels reach ~80 % of a datasheet matmul peak and ~90 % of its bandwidth, so measured
ceilings make "share of peak" honest.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec


class Peaks(msgspec.Struct, omit_defaults=True):
    """The ceilings of one device; rates in TFLOP/s, bandwidth in GB/s."""

    name: str
    bf16_tflops: float
    fp16_tflops: float
    tf32_tflops: float
    fp32_tflops: float
    hbm_gbps: float
    source: str = "datasheet"

    def tflops_for(self, dtype: str) -> float:
        """The matmul ceiling for a dtype name as Kineto writes it (c10::BFloat16, float...)."""
        d = dtype.lower()
        if "bfloat16" in d or d == "bf16":
            return self.bf16_tflops
        if "half" in d or "float16" in d or d == "fp16":
            return self.fp16_tflops
        if d in ("tf32",):
            return self.tf32_tflops
        return self.fp32_tflops

    @property
    def ridge_flop_per_byte(self) -> float:
        """Arithmetic intensity (bf16) above which a kernel is compute-bound on this device."""
        return self.bf16_tflops * 1e12 / (self.hbm_gbps * 1e9)


# Most specific names first: the first key contained in the device name wins.
DATASHEET: tuple[tuple[str, Peaks], ...] = (
    ("h200", Peaks("NVIDIA H200", 989, 989, 495, 67, 4800)),
    ("gh200", Peaks("NVIDIA GH200", 989, 989, 495, 67, 4000)),
    ("h100 pcie", Peaks("NVIDIA H100 PCIe", 756, 756, 378, 51, 2000)),
    ("h100 nvl", Peaks("NVIDIA H100 NVL", 835, 835, 418, 60, 3900)),
    ("h100", Peaks("NVIDIA H100 SXM", 989, 989, 495, 67, 3350)),
    ("b200", Peaks("NVIDIA B200", 2250, 2250, 1100, 80, 8000)),
    ("a100-sxm4-40gb", Peaks("NVIDIA A100 40GB", 312, 312, 156, 19.5, 1555)),
    ("a100-pcie-40gb", Peaks("NVIDIA A100 40GB PCIe", 312, 312, 156, 19.5, 1555)),
    ("a100 80gb pcie", Peaks("NVIDIA A100 80GB PCIe", 312, 312, 156, 19.5, 1935)),
    ("a100", Peaks("NVIDIA A100 80GB", 312, 312, 156, 19.5, 2039)),
    ("l40s", Peaks("NVIDIA L40S", 362, 362, 183, 91.6, 864)),
    ("l4", Peaks("NVIDIA L4", 121, 121, 60, 30.3, 300)),
    ("a10g", Peaks("NVIDIA A10G", 70, 70, 35, 31.2, 600)),
    ("a10", Peaks("NVIDIA A10", 125, 125, 62.5, 31.2, 600)),
    ("rtx 6000 ada", Peaks("NVIDIA RTX 6000 Ada", 364, 364, 182, 91.1, 960)),
    ("rtx a6000", Peaks("NVIDIA RTX A6000", 155, 155, 77, 38.7, 768)),
    ("rtx 4090", Peaks("NVIDIA GeForce RTX 4090", 165, 165, 82.6, 82.6, 1008)),
    ("rtx 3090", Peaks("NVIDIA GeForce RTX 3090", 71, 71, 35.6, 35.6, 936)),
    ("v100", Peaks("NVIDIA V100", 0, 125, 0, 15.7, 900)),
    ("t4", Peaks("NVIDIA T4", 0, 65, 0, 8.1, 320)),
    ("mi300x", Peaks("AMD Instinct MI300X", 1307, 1307, 654, 163.4, 5300)),
    ("mi250x", Peaks("AMD Instinct MI250X", 383, 383, 0, 47.9, 3277)),
)


def datasheet_peaks(device_name: str, total_memory: int | None = None) -> Peaks | None:
    """Datasheet ceilings for a device name as torch or Kineto reports it."""
    name = device_name.lower()
    if "a100" in name and total_memory and total_memory < 60 * 2**30:
        name = "a100-sxm4-40gb" if "pcie" not in name else "a100-pcie-40gb"
    for key, peaks in DATASHEET:
        if key in name:
            return peaks
    return None


def cache_path() -> Path:
    """Where measured ceilings are kept: $XDG_CACHE_HOME/kernelscope/peaks.json."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelscope" / "peaks.json"


def load_calibrated(path: Path | None = None) -> dict[str, Peaks]:
    """Measured ceilings by device name; empty when none were measured or the file is bad."""
    path = path or cache_path()
    try:
        return msgspec.json.decode(path.read_bytes(), type=dict[str, Peaks])
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return {}


def save_calibrated(peaks: Peaks, path: Path | None = None) -> Path:
    """Add or replace one device's measured ceilings in the cache."""
    path = path or cache_path()
    known = load_calibrated(path)
    known[peaks.name] = peaks
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(known)))
    tmp.replace(path)
    return path


def peaks_for(
    device_name: str, total_memory: int | None = None, cache: Path | None = None
) -> Peaks | None:
    """Measured ceilings for this device if cached, else the datasheet's, else None."""
    measured = load_calibrated(cache).get(device_name)
    return measured or datasheet_peaks(device_name, total_memory)
