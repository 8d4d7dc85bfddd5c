"""How much of the calls' host time the data pipeline takes: torch's DataLoader marks each
``next()`` on its iterator with a ``record_function`` range,
``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`` (or the multiprocessing
iterator's), which holds the dataset's ``__getitem__``, the collate function and, with
workers, the wait for their batches. Where the worker timed ``next()`` with the calls
unprofiled (``UnprofiledTiming.loader_share``), that figure is the one: the profiler's range
holds its cost for each of the dataset's ops (pytorch/examples' VAE: 55 % of the step
profiled, ~35 % in its program alone)."""

from __future__ import annotations

from typing import NamedTuple

from kernelscope.analysis.calls import Calls
from kernelscope.analysis.trace_model import Op, Trace
from kernelscope.protocol import UnprofiledTiming
from kernelscope.units import fmt_us as fmt

LOADER_PREFIX = "enumerate(DataLoader)#"
DATA_SHARE = 0.25
"""Of the calls' host time: from here on a host-bound call is data-pipeline-bound."""


class LoaderTime(NamedTuple):
    """The DataLoader's ``next()`` inside the calls: host µs per step, its share of the
    calls' host time, its longest range (to find the line), and whether the first two were
    timed unprofiled (else they are the profiler's)."""

    us_per_step: float
    share: float
    op: Op
    unprofiled: bool = False
    sources: tuple[str, ...] = ()
    """``PATH::QUALNAME`` of the dataset's item and the collate_fn (live runs only)."""

    @property
    def how(self) -> str:
        """How the figures were taken, for the messages."""
        return "unprofiled" if self.unprofiled else "as profiled"


def loader_time(
    trace: Trace, calls: Calls | None, steps: int, timing: UnprofiledTiming | None = None
) -> LoaderTime | None:
    """The DataLoader's time inside the calls (the whole trace without calls), as `timing`
    measured it unprofiled where it did; None when no DataLoader ran there."""
    nexts = [
        op
        for op in trace.user_annotations
        if op.name.startswith(LOADER_PREFIX) and (not calls or calls.index_of(op.ts) >= 0)
    ]
    if not nexts:
        return None
    us = sum(op.dur for op in nexts)
    if calls:
        host = calls.host_us
    else:
        host = max(op.end for op in trace.ops) - min(op.ts for op in trace.ops)
    longest = max(nexts, key=lambda op: op.dur)
    if timing is not None and timing.loader_us_per_call is not None and timing.loader_share:
        sources = tuple(timing.loader_sources)
        return LoaderTime(timing.loader_us_per_call, timing.loader_share, longest, True, sources)
    share = min(1.0, us / host) if host > 0 else 0.0
    return LoaderTime(us / max(steps, 1), share, longest)


def pipeline_bound(loader: LoaderTime | None, bound: str) -> bool:
    """Whether a host-bound call is data-pipeline-bound: its DataLoader takes at least
    ``DATA_SHARE`` of its host time."""
    return loader is not None and bound in ("overhead", "host") and loader.share >= DATA_SHARE


def pipeline_summary(loader: LoaderTime, busy: float | None, gpu_us: float) -> str:
    """The verdict of a data-pipeline-bound call, in place of launch arithmetic."""
    gpu = f"; the GPU is busy {busy:.0%} of the call ({fmt(gpu_us)} of GPU work per step)"
    return (
        f"data-pipeline-bound: the DataLoader's next() takes {loader.share:.0%} of the "
        f"call's host time ({fmt(loader.us_per_step)} per step, {loader.how})"
        f"{gpu if busy is not None else ''}"
        ": the time is the dataset's Python and collation, not kernel launches"
    )
