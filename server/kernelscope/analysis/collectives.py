"""Collectives in one rank's trace: what each moved, how fast, and how much of the time spent
in them was hidden under compute. Pure over the trace.

A collective's work is gloo's range on its own thread (``gloo:all_reduce``, its tensor in
``Input Dims``) on the CPU, or an NCCL kernel (``ncclDevKernel_AllReduce_…``, with the
``In msg nelems``/``Out msg nelems``/``dtype``/``Group size`` that torch adds to it) on a GPU.
Its size is what nccl-tests calls the size: the larger of the input and the output; its
algorithm bandwidth that size over its time, and its bus bandwidth that times nccl-tests'
factor for the collective (all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all
(n-1)/n; the others 1), comparable with the link's peak. A collective's time includes the
wait for the last rank to arrive, so a rank that waits shows a low bandwidth.

Within the function's calls (on a GPU, each call's GPU work: from the first event it launched
to the end of the last, as the GPU runs behind the host): communication is the union of the
collectives' spans, compute the union of the other work (the call's other GPU kernels and
copies; on the CPU the ops of the threads that are not gloo's), overlap their intersection,
and idle the rest of the windows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import compress
from operator import attrgetter, methodcaller
from typing import cast

import msgspec

from kernelscope.analysis.calls import Calls, gpu_work
from kernelscope.analysis.costs import DTYPE_BYTES, numel
from kernelscope.analysis.trace_model import GpuEvent, Op, Trace

__all__ = ["Collective", "Communication", "communication"]

_GLOO = re.compile(r"^gloo:(\w+)$")
_NCCL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
#: Collectives by the names gloo, NCCL and c10d give them.
_KINDS = {
    "all_reduce": "all_reduce",
    "allreduce": "all_reduce",
    "allreduce_coalesced": "all_reduce",
    "all_gather": "all_gather",
    "allgather": "all_gather",
    "_allgather_base": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "reducescatter": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "all_to_all": "all_to_all",
    "alltoall": "all_to_all",
    "alltoall_base": "all_to_all",
    "all_to_allv": "all_to_all",
    "allgather_coalesced": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "barrier": "barrier",
    "send": "send",
    "recv": "recv",
    "sendrecv": "send_recv",
}
#: NCCL's ``dtype`` names (c10's ScalarType) in bytes.
_SCALAR_BYTES = {
    "Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2,
    "Char": 1, "Byte": 1, "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1,
    "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1, "ComplexFloat": 8, "ComplexDouble": 16,
}  # fmt: skip


class Collective(msgspec.Struct):
    """The collectives of one kind and size, within the calls."""

    kind: str
    """all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, ... as torch names it."""
    dtype: str
    bytes: int
    """Per call, nccl-tests' size: the larger of input and output (0 when unknown)."""
    calls: int
    us: float
    """In all, every call's time (the wait for the other ranks included)."""
    algbw_gbps: float
    """bytes / time per call, GB/s (10⁹ bytes)."""
    busbw_gbps: float
    """algbw × nccl-tests' factor for the kind and the group size."""
    name: str
    """The trace's name of one of them (gloo's range, NCCL's kernel)."""
    group: int = 1
    """The process group's size, which the bus factor takes."""


class Communication(msgspec.Struct):
    """One rank's communication within the function's calls, per call."""

    world_size: int
    rank: int | None
    backend: str
    comm_us: float
    """The time some collective ran."""
    overlap_us: float
    """The part of it during which compute ran too."""
    compute_us: float
    idle_us: float
    """The calls' time with neither."""
    window_us: float
    overlap_share: float
    """overlap / communication: the share of it hidden under compute."""
    collectives: list[Collective]


_NAME = attrgetter("name")
_Span = tuple[float, float]
#: (kind, dtype, bytes, group size, start, end, name) of one collective.
_Found = tuple[str, str, int, int, float, float, str]


def communication(trace: Trace, calls: Calls) -> Communication | None:
    """The rank's collectives and their overlap with compute; None when it ran none."""
    world = trace.world_size or 1
    found: list[_Found] = []
    comm_threads: set[tuple[int | str, int | str]] = set()
    for op in _named([*trace.user_annotations, *trace.cpu_ops], "gloo:"):
        match = _GLOO.match(op.name)
        if match and calls.index_of(op.ts) >= 0:
            kind = _KINDS.get(match[1], match[1])
            dtype, size = _gloo_size(op, kind, world)
            found.append((kind, dtype, size, world, op.ts, op.end, op.name))
            comm_threads.add((op.pid, op.tid))
    gpu_comm: set[int] = set()
    work: list[tuple[int, GpuEvent]] = []
    if any(_starts(trace.gpu_events, "nccl")):
        work = gpu_work(trace, calls)
    for k, (_, event) in enumerate(work):
        match = _NCCL.match(event.name) if event.cat == "kernel" else None
        if match is not None:
            kind, dtype, size, group = _nccl_args(event.args, match[1])
            found.append((kind, dtype, size, group or world, event.ts, event.end, event.name))
            gpu_comm.add(k)
    if not found:
        return None
    if gpu_comm:  # the GPU runs behind the host: each call's window is its GPU work's span
        windows = _gpu_windows(work)
        others: Iterable[_Span] = (
            (g.ts, g.end) for k, (_, g) in enumerate(work) if k not in gpu_comm
        )
    else:
        windows = list(zip(calls.starts, calls.ends, strict=True))
        others = (
            (op.ts, op.end)
            for op in trace.cpu_ops
            if (op.pid, op.tid) not in comm_threads and not op.name.startswith("c10d::")
        )
    comm = _clip(_union((f[4], f[5]) for f in found), windows)
    compute = _clip(_union(others), windows)
    overlap = _length(_intersect(comm, compute))
    window = _length(_union(windows))
    busy = _length(comm) + _length(compute) - overlap
    n = max(len(calls), 1)
    return Communication(
        world_size=max([world, *(f[3] for f in found)]),
        rank=trace.rank,
        backend=trace.backend or ("nccl" if gpu_comm else "gloo"),
        comm_us=_length(comm) / n,
        overlap_us=overlap / n,
        compute_us=_length(compute) / n,
        idle_us=max(window - busy, 0.0) / n,
        window_us=window / n,
        overlap_share=overlap / _length(comm) if _length(comm) > 0 else 0.0,
        collectives=_rows(found, n),
    )


def _gpu_windows(work: list[tuple[int, GpuEvent]]) -> list[_Span]:
    """Per call, from the start of the first GPU event it launched to the end of the last."""
    spans: dict[int, _Span] = {}
    for call, g in work:
        start, end = spans.get(call, (g.ts, g.end))
        spans[call] = (min(start, g.ts), max(end, g.end))
    return sorted(spans.values())


def _starts(items: Sequence[Op] | Sequence[GpuEvent], prefix: str) -> Iterator[bool]:
    """Whether each item's name starts with ``prefix``, at C speed: a 2 GB trace has half
    a million ops, few of them collectives."""
    return map(methodcaller("startswith", prefix), map(_NAME, items))


def _named(ops: list[Op], prefix: str) -> Iterator[Op]:
    return compress(ops, _starts(ops, prefix))


def _gloo_size(op: Op, kind: str, world: int) -> tuple[str, int]:
    """(dtype, bytes) of a gloo range from its ``Input Dims``: an all-gather's input is one
    rank's share of the output."""
    inputs = op.inputs()
    size = 0
    dtype = ""
    for dims, name in zip(inputs.dims, inputs.types, strict=False):
        shape = cast("list[object]", dims) if isinstance(dims, list) else None
        if name in DTYPE_BYTES and shape is not None and all(type(d) is int for d in shape):
            size += numel(cast("list[int]", shape)) * DTYPE_BYTES[name]
            dtype = dtype or name
    return dtype, size * world if kind == "all_gather" else size


class _NcclArgs(msgspec.Struct):
    name: str = msgspec.field(default="", name="Collective name")
    nelems_in: int = msgspec.field(default=0, name="In msg nelems")
    nelems_out: int = msgspec.field(default=0, name="Out msg nelems")
    group: int = msgspec.field(default=0, name="Group size")
    dtype: str = ""


_NCCL_ARGS = msgspec.json.Decoder(_NcclArgs)


def _nccl_args(args: bytes, kernel_kind: str) -> tuple[str, str, int, int]:
    """(kind, dtype, bytes, group size) of an NCCL kernel from the args torch gives it; the
    kind from its name when they are absent."""
    try:
        a = _NCCL_ARGS.decode(args)
    except msgspec.MsgspecError:
        a = _NcclArgs()
    kind = _KINDS.get(a.name or kernel_kind.lower(), a.name or kernel_kind.lower())
    size = max(a.nelems_in, a.nelems_out) * _SCALAR_BYTES.get(a.dtype, 0)
    return kind, a.dtype, size, a.group


def bus_factor(kind: str, world: int) -> float:
    """nccl-tests' bus-bandwidth factor."""
    if world <= 1:
        return 1.0
    if kind == "all_reduce":
        return 2 * (world - 1) / world
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (world - 1) / world
    return 1.0


def _rows(found: Sequence[_Found], n: int) -> list[Collective]:
    """The collectives grouped by kind, dtype, size and group, per call."""
    groups: dict[tuple[str, str, int, int], list[tuple[float, str]]] = {}
    for kind, dtype, size, group, ts, end, name in found:
        groups.setdefault((kind, dtype, size, group), []).append((end - ts, name))
    rows: list[Collective] = []
    for (kind, dtype, size, group), spans in groups.items():
        us = sum(d for d, _ in spans)
        per_call = us / len(spans)
        algbw = size / (per_call * 1e3) if per_call > 0 and size else 0.0  # B/µs = MB/s
        rows.append(
            Collective(
                kind, dtype, size, len(spans) // n or len(spans), us / n, algbw,
                algbw * bus_factor(kind, group), spans[0][1], group,
            )
        )  # fmt: skip
    rows.sort(key=lambda r: -r.us)
    return rows


def _union(spans: Iterable[_Span]) -> list[_Span]:
    out: list[_Span] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def _intersect(a: list[_Span], b: list[_Span]) -> list[_Span]:
    out: list[_Span] = []
    i = j = 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _clip(spans: list[_Span], windows: list[_Span]) -> list[_Span]:
    return _intersect(spans, _union(windows))


def _length(spans: list[_Span]) -> float:
    return sum(end - start for start, end in spans)
