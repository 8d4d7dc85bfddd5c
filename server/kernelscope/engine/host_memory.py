"""A local worker's resident memory, sampled while it runs a job, to tell an out-of-memory
kill from a crash: the kernel's OOM killer ends a process with SIGKILL and says nothing to
it, so the only evidence left to the launcher is how much the worker held before it died.
Linux's ``/proc``; elsewhere nothing is known and the crash reads as before."""

from __future__ import annotations

import os

from kernelscope.protocol import STAGE_LABELS

#: The stages with the profiler recording (the warm-up steps record, then drop, events).
PROFILED_STAGES = frozenset({"warmup", "active", "export"})

#: A SIGKILLed worker that held at least this share of the machine's memory is reported as
#: most likely killed for memory.
OOM_SHARE = 0.5
#: Seconds between samples of a busy worker's memory.
SAMPLE_S = 0.5

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes(pid: int) -> int | None:
    """The process's resident memory, or None where it cannot be read (gone, not Linux)."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def memory_total() -> int | None:
    """This machine's memory (``MemTotal``), or None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def oom_message(peak: int, total: int | None, stage: str) -> str | None:
    """What to say of a worker SIGKILLed after holding `peak` bytes at its largest, during
    `stage` (a JobProgress stage, or ""); None when it held too little to blame memory."""
    if total is None or total <= 0 or peak < OOM_SHARE * total:
        return None
    label = STAGE_LABELS.get(stage, stage)
    during = f" during the {label} stage" if label else ""
    message = (
        f"the worker was killed (SIGKILL){during}, holding {peak / 1e9:.1f} GB of this "
        f"machine's {total / 1e9:.1f} GB: most likely by the kernel's out-of-memory killer"
    )
    if stage in PROFILED_STAGES:
        message += (
            ". The profiler keeps every event of its window in memory (a few KB per op "
            "recorded with shapes), and one call of this function makes too many: profile a "
            "smaller function that it calls"
        )
    return message + "; the worker was replaced"
