"""Which part of the worker slows nanoGPT's loop: run train.py as __main__ after one of the
worker's set-ups (a warmed torch.profiler, an NVML sampler thread at 20 ms, sys.monitoring
PY_START disabling each code object), and print the median iteration time train.py logs.
python3 nanogpt_overhead.py MODE train.py ARGS... (from nanoGPT's folder)"""

import runpy
import sys
import threading

import torch

mode = sys.argv[1]
sys.argv = sys.argv[2:]
sys.path.insert(0, ".")
if mode == "warmprof":
    from torch.profiler import ProfilerActivity, profile

    x = torch.ones(8, device="cuda")
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        record_shapes=True,
        with_stack=True,
    ):
        (x + x).sum()
elif mode == "nvml":
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)

    def poll():
        while True:
            pynvml.nvmlDeviceGetUtilizationRates(h)
            pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
            pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)
            pynvml.nvmlDeviceGetPowerUsage(h)
            threading.Event().wait(0.02)

    threading.Thread(target=poll, daemon=True).start()
elif mode == "monitor":
    mon = sys.monitoring
    mon.use_tool_id(3, "probe")
    mon.register_callback(3, mon.events.PY_START, lambda code, off: mon.DISABLE)
    mon.set_events(3, mon.events.PY_START)
runpy.run_path(sys.argv[0], run_name="__main__")
