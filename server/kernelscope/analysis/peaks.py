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
    fp8_tflops: float = 0.0
    """Dense fp8 tensor-core rate; 0 where the device has none (its fp16 rate applies)."""
    link_gbps: float = 0.0
    """Host <-> device bandwidth of one direction of the host link (PCIe, NVLink-C2C)."""
    link: str = ""
    l2_mib: float = 0.0
    """L2 cache size (MiB); 0 where not in the table."""
    l2_gbps: float = 0.0
    """L2 bandwidth (GB/s), the roof of a call whose working set fits L2; 0 where unknown
    (then HBM's roof applies to every call)."""

    @property
    def l2_bytes(self) -> float:
        """L2 cache size in bytes."""
        return self.l2_mib * 2**20

    def tflops_for(self, dtype: str) -> float:
        """The matmul ceiling for a dtype name as Kineto writes it (c10::BFloat16, float...)."""
        d = dtype.lower()
        if "float8" in d or d == "fp8":
            return self.fp8_tflops or self.fp16_tflops
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


# Most specific names first: the first key contained in the device name wins. Links: PCIe
# 5.0 x16 = 64 GB/s, 4.0 x16 = 32, 3.0 x16 = 16 per direction; GH200's NVLink-C2C 450.
_G5, _G4, _G3 = ("PCIe 5.0 x16", 64.0), ("PCIe 4.0 x16", 32.0), ("PCIe 3.0 x16", 16.0)
_C2C = ("NVLink-C2C", 450.0)
# Hopper SXM parts: 50 MiB of L2 at ~10 TB/s, an upper bound read from published
# microbenchmarks (an H100 PCIe's L2 streamed ~5.5-7 TB/s at 114 SMs; SXM parts have 132 SMs
# at higher clocks); docs/h200-run/model/ measures it on the H200.
_HOPPER_L2 = (50.0, 10000.0)


def _p(name: str, bf16: float, fp16: float, tf32: float, fp32: float, hbm: float,
       fp8: float, link: tuple[str, float], l2: tuple[float, float] = (0.0, 0.0),
       ) -> Peaks:  # fmt: skip
    return Peaks(name, bf16, fp16, tf32, fp32, hbm, fp8_tflops=fp8, link_gbps=link[1],
                 link=link[0], l2_mib=l2[0], l2_gbps=l2[1])  # fmt: skip


DATASHEET: tuple[tuple[str, Peaks], ...] = (
    ("gh200", _p("NVIDIA GH200", 989, 989, 495, 67, 4000, 1979, _C2C, _HOPPER_L2)),
    ("h200", _p("NVIDIA H200", 989, 989, 495, 67, 4800, 1979, _G5, _HOPPER_L2)),
    ("h100 pcie", _p("NVIDIA H100 PCIe", 756, 756, 378, 51, 2000, 1513, _G5)),
    ("h100 nvl", _p("NVIDIA H100 NVL", 835, 835, 418, 60, 3900, 1671, _G5)),
    ("h100", _p("NVIDIA H100 SXM", 989, 989, 495, 67, 3350, 1979, _G5, _HOPPER_L2)),
    ("b200", _p("NVIDIA B200", 2250, 2250, 1100, 80, 8000, 4500, _G5)),
    ("a100-sxm4-40gb", _p("NVIDIA A100 40GB", 312, 312, 156, 19.5, 1555, 0, _G4)),
    ("a100-pcie-40gb", _p("NVIDIA A100 40GB PCIe", 312, 312, 156, 19.5, 1555, 0, _G4)),
    ("a100 80gb pcie", _p("NVIDIA A100 80GB PCIe", 312, 312, 156, 19.5, 1935, 0, _G4)),
    ("a100", _p("NVIDIA A100 80GB", 312, 312, 156, 19.5, 2039, 0, _G4)),
    ("l40s", _p("NVIDIA L40S", 362, 362, 183, 91.6, 864, 733, _G4)),
    ("l4", _p("NVIDIA L4", 121, 121, 60, 30.3, 300, 242, _G4)),
    ("a10g", _p("NVIDIA A10G", 70, 70, 35, 31.2, 600, 0, _G4)),
    ("a10", _p("NVIDIA A10", 125, 125, 62.5, 31.2, 600, 0, _G4)),
    ("rtx 6000 ada", _p("NVIDIA RTX 6000 Ada", 364, 364, 182, 91.1, 960, 728, _G4)),
    ("rtx a6000", _p("NVIDIA RTX A6000", 155, 155, 77, 38.7, 768, 0, _G4)),
    ("rtx 4090", _p("NVIDIA GeForce RTX 4090", 165, 165, 82.6, 82.6, 1008, 330, _G4)),
    ("rtx 3090", _p("NVIDIA GeForce RTX 3090", 71, 71, 35.6, 35.6, 936, 0, _G4)),
    ("v100", _p("NVIDIA V100", 0, 125, 0, 15.7, 900, 0, _G3)),
    ("t4", _p("NVIDIA T4", 0, 65, 0, 8.1, 320, 0, _G3)),
    ("mi300x", _p("AMD Instinct MI300X", 1307, 1307, 654, 163.4, 5300, 2615, _G5)),
    ("mi250x", _p("AMD Instinct MI250X", 383, 383, 0, 47.9, 3277, 0, _G4)),
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
    """Measured ceilings for this device if cached (with the datasheet's fp8 rate and host
    link where calibration did not measure them), else the datasheet's, else None."""
    measured = load_calibrated(cache).get(device_name)
    sheet = datasheet_peaks(device_name, total_memory)
    if measured is None:
        return sheet
    if sheet is not None:
        measured = msgspec.structs.replace(
            measured,
            fp8_tflops=measured.fp8_tflops or sheet.fp8_tflops,
            link_gbps=measured.link_gbps or sheet.link_gbps,
            link=measured.link or sheet.link,
            l2_mib=measured.l2_mib or sheet.l2_mib,
            l2_gbps=measured.l2_gbps or sheet.l2_gbps,
        )
    return measured
