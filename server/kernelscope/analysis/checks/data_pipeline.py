"""KS107: a host-bound call whose time is its DataLoader's ``next()``: the dataset's Python,
its transforms and collation, not kernel launches."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from kernelscope.analysis.data_pipeline import DATA_SHARE, LoaderTime, pipeline_bound
from kernelscope.analysis.facts import Facts, Options
from kernelscope.analysis.syncs import NO_PLACE, python_places
from kernelscope.findings import Code, Finding, Severity
from kernelscope.units import fmt_us as fmt

PIPELINE_TRIES = [
    "load in worker processes: DataLoader(num_workers=N, persistent_workers=True) so batches "
    "are prepared while the step runs (prefetch_factor batches ahead per worker)",
    "make __getitem__ cheaper: decode and transform in batches (a batched collate_fn, "
    "transforms on the GPU), cache decoded samples, avoid per-item Python loops",
    "pin_memory=True and .to(device, non_blocking=True) so the copy overlaps the step",
]


def find_data_pipeline(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS107: the DataLoader's ``next()`` takes at least ``DATA_SHARE`` of a host-bound
    call's host time; on the line that calls it (the line pass's, else the Python stack's)."""
    del options
    loader = facts.loader
    if loader is None or not pipeline_bound(loader, facts.verdict.bound):
        return
    path, line = _loader_line(facts)
    busy = facts.verdict.gpu_busy_fraction_unprofiled or facts.verdict.gpu_busy_fraction
    gpu = f"; the GPU is busy {busy:.0%} of the call" if busy is not None else ""
    yield Finding(
        Code.DATA_PIPELINE,
        Severity.WARNING,
        f"data-pipeline-bound: the DataLoader's next() takes {loader.share:.0%} of the call's "
        f"host time ({fmt(loader.us_per_step)} per step, {loader.how}){gpu}: the dataset's "
        "Python, its transforms and collation, not kernel launches",
        path,
        line,
        [*_profile_sources(facts, loader), *PIPELINE_TRIES],
        _evidence(loader),
    )


def _profile_sources(facts: Facts, loader: LoaderTime) -> list[str]:
    """The commands that profile what the loader ran, as this program runs it (a call made
    in a DataLoader worker is handed to the main process)."""
    site = facts.sidecar.call_site if facts.sidecar else None
    via = f" --via {shlex.quote(site.via)}" if site is not None else ""
    return [
        f"profile where that time goes: kernelscope profile {shlex.quote(source)}{via}"
        for source in loader.sources
    ]


def _evidence(loader: LoaderTime) -> dict[str, float | int | str]:
    return {
        "loader_us_per_step": round(loader.us_per_step, 1),
        "loader_share": round(loader.share, 3),
        "unprofiled": int(loader.unprofiled),
        "threshold": DATA_SHARE,
    }


def _loader_line(facts: Facts) -> tuple[str | None, int | None]:
    """The user's line that asked the DataLoader for a batch."""
    loader = facts.loader
    assert loader is not None
    if facts.sidecar:
        hits = [s for s in facts.sidecar.lines if loader.op.name in s.top_ops]
        if hits:
            best = max(hits, key=lambda s: s.cpu_total_us)
            return best.path, best.line
    place = python_places(facts.trace, [loader.op])[0]
    if place != NO_PLACE:
        return place
    return facts.function_path, facts.function_line
