# pyright: basic
"""NVML's view of the GPU while a block runs (nvidia-ml-py, optional)."""

import contextlib
from typing import Any


class GpuSampler:
    """NVML readings of one GPU before and after a block runs: SM and memory clocks, power,
    utilization (NVML's average over its last period), clock-limit reasons. Nothing when
    nvidia-ml-py is not installed. No thread reads while the block runs: one waking every
    20 ms took the GIL from timed host-bound calls."""

    def __init__(self, torch, device):
        self.nvml: Any = None
        self.handle = None
        self.rows = []
        self.reasons = 0
        try:
            import pynvml  # pyright: ignore[reportMissingImports]  (nvidia-ml-py, optional)

            pynvml.nvmlInit()
            handle = None
            uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
            if uuid is not None:
                with contextlib.suppress(Exception):
                    handle = pynvml.nvmlDeviceGetHandleByUUID("GPU-%s" % uuid)
            if handle is None:
                handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
            self.max_sm = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
            self.max_mem = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)
            self.nvml, self.handle = pynvml, handle
        except Exception:
            self.nvml = None

    def _read(self):
        n, h = self.nvml, self.handle
        util = n.nvmlDeviceGetUtilizationRates(h)
        row = (
            n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
            n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
            n.nvmlDeviceGetPowerUsage(h) / 1000.0,
            util.gpu,
            util.memory,
        )
        self.rows.append(row)
        reasons = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            n, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        if reasons is not None:
            with contextlib.suppress(Exception):
                self.reasons |= int(reasons(h))

    def start(self):
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self._read()

    def stop(self):
        """The reading right after the block (its clocks and power under load), or None
        without NVML."""
        if self.nvml is None:
            return None
        with contextlib.suppress(Exception):
            self._read()  # utilization is NVML's average over its last period: the block's end
        if not self.rows:
            return None
        sm, mem, power, util, mem_util = self.rows[-1]
        return {
            "samples": len(self.rows),
            "sm_clock_mhz": sm,
            "sm_clock_max_mhz": self.max_sm,
            "mem_clock_mhz": mem,
            "mem_clock_max_mhz": self.max_mem,
            "power_w": power,
            "utilization_pct": util,
            "memory_utilization_pct": mem_util,
            "clock_event_reasons": self.reasons,
        }
