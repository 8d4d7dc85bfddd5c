"""KS301, host-device syncs: on their lines from the worker's line pass, else at the Python
function around each runtime call that blocks the host (``facts.is_sync``)."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.analysis.facts import Facts, Options
from kernelscope.analysis.trace_model import Op, Trace
from kernelscope.analysis.user_code import user_frame
from kernelscope.findings import Code, Finding, Severity
from kernelscope.protocol import LineStat
from kernelscope.units import fmt_us as fmt


def find_sync_points(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS301: host-device syncs on their lines, with the time the CPU waited."""
    lines = _line_syncs(facts)
    if not lines:
        yield from _trace_syncs(facts, options)
        return
    for s in sorted(lines, key=lambda s: -s.sync_wait_us)[: options.max_sync_findings]:
        what = ", ".join(s.top_ops[:2]) or "a synchronize or copy call"
        yield Finding(
            Code.SYNC,
            Severity.WARNING,
            f"host-device sync: {s.syncs} per call ({what}), the CPU waiting "
            f"{fmt(s.sync_wait_us)} per call",
            path=s.path,
            line=s.line,
            try_=[
                "keep the value on the device (no .item(), .cpu(), .tolist(), print of a tensor)",
                "boolean-mask indexing and nonzero() sync to size the output: "
                "use torch.where or masked ops",
                "if the value is needed, fetch it once "
                "per step, after the work is queued (non_blocking copies + an event)",
            ],
            evidence={"syncs_per_call": s.syncs, "wait_us": round(s.sync_wait_us, 1)},
        )


def _line_syncs(facts: Facts) -> list[LineStat]:
    """The line pass's lines that synced, on a GPU run. On a CPU run the line pass counts
    ``.item()`` and ``nonzero()`` (``aten::_local_scalar_dense``, ``aten::nonzero``), which
    there read CPU tensors: no device to wait for, so they are no evidence of a sync (a
    tensor on a device shows as a runtime call in the trace, which ``_trace_syncs`` reads)."""
    side = facts.sidecar
    if side is None or side.device_type != "cuda":
        return []
    return [s for s in side.lines if s.syncs > 0]


def _trace_syncs(facts: Facts, options: Options) -> Iterable[Finding]:
    """Sync calls found in the trace alone, placed at their Python function when stacks exist."""
    trace = facts.trace
    by_place: dict[tuple[str | None, int | None], list[Op]] = {}
    syncs = facts.own_syncs
    for op, place in zip(syncs, python_places(trace, syncs), strict=True):
        by_place.setdefault(place, []).append(op)
    steps = max(len(trace.steps), 1)
    ranked = sorted(by_place.items(), key=lambda kv: -sum(o.dur for o in kv[1]))
    for (path, line), ops in ranked[: options.max_sync_findings]:
        names = ", ".join(sorted({_synced_by(trace, o) for o in ops}))
        wait = sum(o.dur for o in ops) / steps
        yield Finding(
            Code.SYNC,
            Severity.WARNING,
            f"host-device sync: {len(ops) / steps:g} per step ({names}), the CPU waiting "
            f"{fmt(wait)} per step",
            path=path,
            line=line,
            try_=["keep values on the device; avoid .item(), .cpu(), .tolist() and boolean masks"],
            evidence={"wait_us": round(wait, 1)},
        )


def _synced_by(trace: Trace, op: Op) -> str:
    """``aten::item → cudaStreamSynchronize``: the outermost aten op around a sync call (what
    the user's code called: ``.item()``, ``.to("cpu")``), or the call alone where none is."""
    ops, outer, i = trace.ops, None, op.parent
    while 0 <= i < len(ops):
        if ops[i].name.startswith("aten::"):
            outer = ops[i].name
        i = ops[i].parent
    return op.name if outer is None else f"{outer} → {op.name}"


NO_PLACE: tuple[str | None, int | None] = (None, None)


def python_places(trace: Trace, ops: list[Op]) -> list[tuple[str | None, int | None]]:
    """For each op, the innermost user python_function around it (its def line: stacks are
    per function): a walk back from the op through the frames around it (``Trace.python_frames``),
    each frame's name parsed once per distinct name."""
    places: list[tuple[str | None, int | None]] = []
    user: dict[str, tuple[str, int] | None] = {}
    for op in ops:
        place = NO_PLACE
        for frame in trace.python_frames(op):
            name = frame.name
            if name in user:
                found = user[name]
            else:
                found = user[name] = user_frame(name)
            if found is not None:
                place = found
                break
        places.append(place)
    return places


def has_syncs(facts: Facts) -> bool:
    """Whether the calls make any host-device sync (for the advice of other findings)."""
    return bool(_line_syncs(facts) or facts.own_syncs)
