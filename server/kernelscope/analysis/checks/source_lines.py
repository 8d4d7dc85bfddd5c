"""The user's source line a finding about an op or a roofline row points at."""

from __future__ import annotations

from kernelscope.analysis.calls import forward_op
from kernelscope.analysis.facts import Facts
from kernelscope.analysis.roofline import OpRoof
from kernelscope.analysis.syncs import NO_PLACE, python_places


def lines_with_ops(facts: Facts, names: set[str]) -> list[tuple[str | None, int | None]]:
    if not facts.sidecar:
        return []
    hits = [s for s in facts.sidecar.lines if names & set(s.top_ops) and s.cuda_us > 0]
    hits.sort(key=lambda s: s.line)
    return [(s.path, s.line) for s in hits]


def row_line(facts: Facts, r: OpRoof) -> tuple[str | None, int | None]:
    """The user's line that ran a row's op (for a backward op, the line of its forward op,
    matched by autograd's sequence number): from the line pass, else the Python stack,
    else the function's def line."""
    trace = facts.trace
    op = trace.ops[r.op_index] if r.op_index >= 0 else None
    forward = forward_op(trace, op) if op is not None else None
    names = [o.name for o in (forward, op) if o is not None] or [r.name]
    if facts.sidecar:
        for name in names:
            hits = [s for s in facts.sidecar.lines if name in s.top_ops]
            if hits:
                best = max(hits, key=lambda s: (s.cuda_us, s.self_cpu_us))
                return best.path, best.line
    for candidate in (forward, op):
        if candidate is not None:
            place = python_places(trace, [candidate])[0]
            if place != NO_PLACE:
                return place
    return facts.function_path, facts.function_line
