# pyright: basic
"""NVML's view of the GPU while a block runs (nvidia-ml-py, optional)."""

import contextlib
import statistics
import threading
from typing import Any


class GpuSampler:
    """NVML readings of one GPU every 20 ms while a block runs: SM and memory clocks, power,
    utilization, clock-limit reasons. Nothing when nvidia-ml-py is not installed."""

    PERIOD_S = 0.02

    def __init__(self, torch, device):
        self.nvml: Any = None
        self.handle = None
        self.rows = []
        self.reasons = 0
        self.stopping = threading.Event()
        self.thread = None
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

    def _loop(self):
        while True:
            with contextlib.suppress(Exception):
                self._read()
            if self.stopping.wait(self.PERIOD_S):
                return

    def start(self):
        if self.nvml is not None:
            self.thread = threading.Thread(target=self._loop, name="ks-nvml", daemon=True)
            self.thread.start()

    def stop(self):
        """Medians of the readings, or None without NVML."""
        if self.thread is None:
            return None
        self.stopping.set()
        self.thread.join()
        with contextlib.suppress(Exception):
            self._read()  # utilization is NVML's average over its last period: the window
        if not self.rows:
            return None
        cols = list(zip(*self.rows))
        return {
            "samples": len(self.rows),
            "sm_clock_mhz": statistics.median(cols[0]),
            "sm_clock_max_mhz": self.max_sm,
            "mem_clock_mhz": statistics.median(cols[1]),
            "mem_clock_max_mhz": self.max_mem,
            "power_w": statistics.median(cols[2]),
            "utilization_pct": statistics.median(cols[3]),
            "memory_utilization_pct": statistics.median(cols[4]),
            "clock_event_reasons": self.reasons,
        }
