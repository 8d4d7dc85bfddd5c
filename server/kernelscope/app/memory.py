"""`kernelscope memory`: the memory pass at a few batch sizes (a fresh worker each, so each
peak is a fresh process's), the fit of pure analysis/memory_fit.py, and a run at the
largest batch it says fits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from kernelscope.analysis.memory_fit import (
    DEFAULT_HEADROOM,
    BatchPoint,
    Forecast,
    check_batch,
    checked,
    forecast,
)
from kernelscope.app.profile import profile_once
from kernelscope.app.scale import check_provider
from kernelscope.engine.remotes import Remote
from kernelscope.engine.runner import JobFailed, ProgressCallback
from kernelscope.engine.targets import Schedule, Target, TargetError, build_request
from kernelscope.protocol import CallSite, Entry, MemoryPass, failure

#: Each batch size's job is short: only its memory pass is used.
MEMORY_SCHEDULE = Schedule(wait=0, warmup=1, active=1)
DEFAULT_BATCHES = (1, 2, 4)
BatchProgress = Callable[[int], ProgressCallback | None]
"""The progress callback of the job at one batch size."""


def peak_of(memory: MemoryPass, device_type: str) -> int:
    """The figure the forecast fits: the reserve on a GPU (what must fit the device), the
    allocated peak on the CPU (no reserve there)."""
    if device_type == "cuda" and memory.peak_reserved_bytes is not None:
        return memory.peak_reserved_bytes
    return memory.peak_allocated_bytes


async def memory_at(
    target: Target,
    batch_size: int,
    device: str,
    python: str | None,
    remote: Remote | None,
    on_progress: ProgressCallback | None,
    timeout: float,
    entry: Entry | None = None,
) -> tuple[MemoryPass, str, str, CallSite | None]:
    """The memory pass of one fresh worker at one batch size: (pass, device type, device
    name, the program's call site); raises JobFailed. With ``entry`` (a program's call),
    the captured call is replayed with its batch dimension resized to ``batch_size``."""
    if entry is not None:
        entry = msgspec.structs.replace(entry, rebatch=batch_size)
    request = build_request(
        target,
        memory_dir(target),
        MEMORY_SCHEDULE,
        device=device,
        batch_size=None if entry else batch_size,
        with_stack=False,
        line_pass=False,
        entry=entry,
    )
    result = await profile_once(request, python, remote, on_progress, timeout)
    side = result.finished.sidecar
    if side.memory_pass is None:  # an older worker
        raise JobFailed(failure("no_memory_pass", "the worker ran no memory pass"))
    return side.memory_pass, side.device_type, side.device_name, side.call_site


async def run_forecast(
    target: Target,
    batches: Sequence[int] = DEFAULT_BATCHES,
    device: str = "auto",
    python: str | None = None,
    remote: Remote | None = None,
    on_progress: BatchProgress | None = None,
    timeout: float = 120.0,
    headroom: float = DEFAULT_HEADROOM,
    room: int | None = None,
    check: bool = True,
    ask: int | None = None,
    entry_of: Callable[[], Entry | None] | None = None,
) -> Forecast:
    """Peaks at ``batches``, their fit, the largest batch that fits (``room`` bytes, else
    what the device has free), and that batch run to check it. Raises JobFailed for a
    failure at one of ``batches`` (a failure at the checked batch is in the forecast)."""
    entry = entry_of() if entry_of is not None else None
    if entry is None:
        check_provider(target)
    elif entry.in_place:
        raise TargetError("the memory forecast replays a captured call: not a loop or --in-place")
    points: list[BatchPoint] = []
    free: int | None = None
    device_type = device_name = ""
    resized: list[str] = []
    for batch in sorted(set(batches)):
        memory, device_type, device_name, site = await memory_at(
            target, batch, device, python, remote, _progress(on_progress, batch), timeout,
            entry,
        )  # fmt: skip
        if entry_of is not None:  # after the first, a kept capture is replayed
            entry = entry_of()
        resized += [m for m in (site.modes if site else []) if m.startswith("batch ")]
        points.append(
            BatchPoint(
                batch,
                peak_of(memory, device_type),
                curve=memory.by_run,
                signature=memory.runs_signature,
                allocated_peak_bytes=memory.trace_peak_bytes,
            )
        )
        free = memory.free_bytes if free is None else min(free, memory.free_bytes or free)
    measure = "reserved" if device_type == "cuda" else "allocated"
    out = forecast(
        target.qualname,
        device_name,
        measure,
        points,
        room if room is not None else free,
        headroom,
        ask,
    )
    if resized:
        out.notes.append(
            "the program's call replayed at each batch size, its batch dimension resized: "
            + resized[0]
        )
    if device_type != "cuda":
        out.notes.append(
            "on the CPU the room is MemAvailable plus what the model already holds, and the "
            "peak is the profiler's allocated bytes: a rough guide"
        )
    batch = check_batch(out)
    if not check or batch is None:
        return out
    try:
        memory, _, _, _ = await memory_at(
            target, batch, device, python, remote, _progress(on_progress, batch), timeout,
            entry,
        )  # fmt: skip
    except JobFailed as e:
        return checked(out, None, f"{e.failure.kind}: {e.failure.message}")
    return checked(out, peak_of(memory, device_type), None)


def _progress(on_progress: BatchProgress | None, batch: int) -> ProgressCallback | None:
    return on_progress(batch) if on_progress else None


def memory_dir(target: Target) -> Path:
    """Where the forecast's jobs keep their traces."""
    return target.project.root / ".kernelscope" / "memory"
