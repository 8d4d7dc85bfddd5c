"""A worker ended as the out-of-memory killer ends a process: SIGKILL, no word to it."""

import os
import signal
import time

import torch

_profiled_calls = 0


def killed_while_profiled():
    # Holds 400 MB, and dies in the schedule's second profiled call (the first is the cold
    # call, under a light profiler) once the launcher has sampled its memory.
    global _profiled_calls
    held = torch.ones(100 * 1024 * 1024)
    if torch.autograd.profiler._is_profiler_enabled:
        _profiled_calls += 1
        if _profiled_calls == 2:
            time.sleep(1.5)  # the launcher samples a busy worker twice a second
            os.kill(os.getpid(), signal.SIGKILL)
    return held.sum()
