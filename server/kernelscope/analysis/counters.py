"""Nsight Compute's per-kernel counters: read from its raw CSV, matched to the trace's
kernels of one call (by order and name) and rolled up into the roofline's op rows, which then
carry measured bytes and FLOPs instead of the model's. Pure: no torch, no processes."""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

import msgspec

from kernelscope.analysis.costs import OpCosts
from kernelscope.analysis.peaks import Peaks
from kernelscope.analysis.roofline import OpRoof, measured_roof
from kernelscope.analysis.trace_model import USER_ANNOTATION, GpuEvent, Trace
from kernelscope.protocol import NCU_METRICS, Counters, KernelCounters

_Metric = Callable[[str], "float | None"]

_TENSOR = "sm__ops_path_tensor_src_"
_SASS = "sm__sass_thread_inst_executed_op_{}_pred_on.sum"
_SCALE = {
    "ns": 1e-3,
    "nsecond": 1e-3,
    "us": 1.0,
    "usecond": 1.0,
    "ms": 1e3,
    "msecond": 1e3,
    "s": 1e6,
    "second": 1e6,
    "byte": 1.0,
    "kbyte": 1e3,
    "mbyte": 1e6,
    "gbyte": 1e9,
    "tbyte": 1e12,
}
_SECTOR_BYTES = 32
_BASE_NAME = re.compile(r"^(?:void\s+)?([\w:]+)")
_UNNAMED = re.compile(r"(^|[\s:,(<])<unnamed>")
_LOST_BRACKET = re.compile(r"(?<!\w)unnamed>")
_TEMPLATE_NAME = re.compile(r"\b([A-Za-z_]\w*)\b(?!::|\w)")
_KEYWORDS = frozenset({"void", "const", "unsigned", "signed", "struct", "class", "typename"})
#: What a kernel's name can start with before its function: a SFINAE return type (cuBLAS's
#: ``std::enable_if<…>::type internal::gemvx::kernel<…>(…)``).
_RETURN_TYPES = frozenset({"enable_if", "enable_if_t", "conditional", "type"})


class CountersError(Exception):
    """Nsight Compute's output has no kernels to read; the message is one line."""


def parse_ncu_csv(text: str) -> list[KernelCounters]:
    """The kernels of ``ncu --csv --page raw`` output, in the order they ran (ncu's own
    ``==PROF==`` lines before the table, a units row after its header, numbers with
    thousands separators, units scaled to µs and bytes). CountersError when there is no table."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise CountersError("Nsight Compute measured no kernel inside the ranged call")
    rows = list(csv.reader(lines[start:]))
    header = rows[0]
    units = rows[1] if len(rows) > 1 and not rows[1][0].strip() else [""] * len(header)
    col = {name: i for i, name in enumerate(header)}
    nvtx = next((i for i, h in enumerate(header) if h.startswith("thread Domain:Push/Pop")), None)
    out: list[KernelCounters] = []
    for row in rows[1:]:
        if len(row) != len(header) or not row[0].strip().isdigit():
            continue
        metric = _reader(row, units, col)
        out.append(_kernel(row[col["Kernel Name"]], metric, row[nvtx] if nvtx is not None else ""))
    if not out:
        raise CountersError("Nsight Compute measured no kernel inside the ranged call")
    return out


def _kernel(name: str, metric: _Metric, nvtx_cell: str) -> KernelCounters:
    return KernelCounters(
        name=name,
        duration_us=metric("gpu__time_duration.sum") or 0.0,
        dram_read_bytes=metric("dram__bytes_read.sum"),
        dram_write_bytes=metric("dram__bytes_write.sum"),
        l2_write_bytes=_sectors(metric("lts__t_sectors_srcunit_tex_op_write.sum")),
        tensor_flops=_tensor_flops(metric),
        fp32_flops=_pipe_flops(metric, "ffma", "fadd", "fmul"),
        fp16_flops=_pipe_flops(metric, "hfma", "hadd", "hmul"),
        fp64_flops=_pipe_flops(metric, "dfma", "dadd", "dmul"),
        sm_pct=metric("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        memory_pct=metric("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
        occupancy_pct=metric("sm__warps_active.avg.pct_of_peak_sustained_active"),
        nvtx=nvtx_range(nvtx_cell),
    )


def _sectors(count: float | None) -> float | None:
    """Bytes of a count of L2 sectors (32 bytes each)."""
    return None if count is None else count * _SECTOR_BYTES


def _reader(row: list[str], units: list[str], col: dict[str, int]) -> _Metric:
    def metric(name: str) -> float | None:
        i = col.get(name)
        return None if i is None else _number(row[i], units[i])

    return metric


def _tensor_flops(metric: _Metric) -> float | None:
    """Every tensor-pipe source type this GPU counts (each counter is math ops: 2 per MAC)."""
    values = [metric(m) for m in NCU_METRICS if m.startswith(_TENSOR)]
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _pipe_flops(metric: _Metric, fma: str, add: str, mul: str) -> float | None:
    """2 × FMA + ADD + MUL thread instructions (Nsight Compute's own roofline counts these)."""
    parts = [metric(_SASS.format(fma)), metric(_SASS.format(add)), metric(_SASS.format(mul))]
    if all(p is None for p in parts):
        return None
    f, a, m = (p or 0.0 for p in parts)
    return 2 * f + a + m


def _number(cell: str, unit: str) -> float | None:
    text = cell.strip().replace(",", "")
    if not text or text.lower() == "n/a":
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value * _SCALE.get(unit.strip().lower(), 1.0)


def nvtx_range(cell: str) -> str:
    """The innermost NVTX push/pop range of ncu's range column, or ``""``."""
    quoted = cell.split('"')
    if len(quoted) < 2:
        return ""
    parts = quoted[-2].split(":")
    return parts[1] if len(parts) > 1 else ""


def _anonymous(kernel: str) -> str:
    """The name with its anonymous namespaces as ``anon``, however spelt: Kineto's
    ``(anonymous namespace)``, ncu's ``<unnamed>``, and the ``unnamed>`` ncu also prints
    with the bracket and the namespace before it lost (``void unnamed>::multi_tensor_apply_
    kernel<unnamed>::TensorListMetadata<2>, …>``, seen on an H100 in 2026-12)."""
    text = _UNNAMED.sub(r"\1anon", kernel.replace("(anonymous namespace)", "anon"))
    return _LOST_BRACKET.sub("anon", text)  # what is left: its own "<" lost


def base_name(kernel: str) -> str:
    """A kernel's function name without namespaces, template arguments, parameters or a
    return type (``std::enable_if<…>::type internal::gemvx::kernel<…>(…)``: ``kernel``)."""
    text = _anonymous(kernel)
    m = _BASE_NAME.match(text.strip())
    name = m.group(1).rpartition("::")[2] if m else text
    if name not in _RETURN_TYPES:
        return name
    # past the return type: the last name before the parameters, templates taken out (only
    # here: ncu prints some template arguments with unbalanced brackets)
    head = _outside_templates(text.strip()).partition("(")[0].split()
    m = _BASE_NAME.match(head[-1]) if head else None
    return m.group(1).rpartition("::")[2] if m else name


def _outside_templates(text: str) -> str:
    """The text with every ``<…>`` (nested ones too) taken out."""
    out: list[str] = []
    depth = 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


def kernel_key(kernel: str) -> tuple[str, str]:
    """The same kernel as Kineto and Nsight Compute spell it (their demanglers differ: ncu
    drops ``native::`` and writes lambdas otherwise): the function's base name and the first
    name among its template arguments that is not a namespace or a number (the functor of
    an elementwise kernel: ``CUDAFunctor_add``, ``cos_kernel_cuda``)."""
    text = _anonymous(kernel)
    base = base_name(kernel)
    _, bracket, rest = text.partition(base + "<")
    functor = ""
    if bracket:
        names = (m.group(1) for m in _TEMPLATE_NAME.finditer(rest))
        functor = next((n for n in names if n not in _KEYWORDS), "")
    return base, functor


def is_nccl(kernel: str) -> bool:
    """An NCCL kernel: never replayed under ncu (its peers would wait on it)."""
    return "nccl" in kernel.lower()


def one_call_kernels(events: Sequence[GpuEvent], steps: int) -> list[GpuEvent]:
    """The kernels of the calls' last step in launch order (NCCL's left out): the call the
    counters measured ran the same kernels."""
    kernels = [g for g in events if g.cat == "kernel" and not is_nccl(g.name)]
    kernels.sort(key=lambda g: (g.correlation, g.ts))
    if steps > 1 and len(kernels) % steps == 0:
        return kernels[-(len(kernels) // steps) :]
    return kernels


class KernelPick(NamedTuple):
    """The kernel functions Nsight Compute is to measure, and those a pattern matched whose
    launches did not fit in the launch count (each with its launches in the call); `error`:
    why none could be chosen (the trace unread)."""

    functions: list[str]
    left_out: dict[str, int]
    error: str = ""


def costliest_functions(
    trace: Trace, events: Sequence[GpuEvent], steps: int, launch_count: int, match: str = ""
) -> KernelPick:
    """The kernel functions (``base_name``) for Nsight Compute to measure when one call has
    more kernels than ``launch_count``: those of the costliest op rows first (by their kernels'
    time in the call), each row taken whole where every launch of its functions not yet
    taken still fits, so its figures are measured (a function's launches all fit or it is
    not asked for); [] when the call's kernels all fit, or none does (then its first ones
    are measured). With `match` (a regular expression searched in each kernel's name as the
    trace has it) only the functions of the kernels it matches are chosen, costliest first,
    all fit or not, and those that do not fit are named (``left_out``)."""
    kernels = one_call_kernels(events, steps)
    every = [g for g in events if g.cat == "kernel" and not is_nccl(g.name)]
    unknown = steps > 1 and len(kernels) == len(every)  # the steps' kernels differ
    if not match and (len(kernels) <= launch_count or unknown):
        return KernelPick([], {})  # all fit, or one call's kernels are not known
    launches: dict[str, int] = {}
    for g in kernels:
        name = base_name(g.name)
        launches[name] = launches.get(name, 0) + 1
    if unknown:  # every step's kernels: a call's launches, at most
        launches = {n: -(-k // steps) for n, k in launches.items()}
    # what is taken together (a function; a row's functions) and its kernels' time
    spent: dict[frozenset[str], float] = {}
    if match:
        pattern = re.compile(match)
        for g in kernels:
            if pattern.search(g.name):
                one = frozenset({base_name(g.name)})
                spent[one] = spent.get(one, 0.0) + g.dur
    else:
        names: dict[tuple[str, bytes], set[str]] = {}
        times: dict[tuple[str, bytes], float] = {}
        for g, key in zip(kernels, kernel_rows(trace, kernels, OpCosts()), strict=True):
            names.setdefault(key, set()).add(base_name(g.name))
            times[key] = times.get(key, 0.0) + g.dur
        for key, row in names.items():
            spent[frozenset(row)] = spent.get(frozenset(row), 0.0) + times[key]
    chosen: set[str] = set()
    room = launch_count
    for group in sorted(spent, key=lambda k: -spent[k]):
        need = group - chosen
        cost = sum(launches[n] for n in need)
        if need and cost <= room and all(re.fullmatch(r"\w+", n) for n in need):
            chosen |= need
            room -= cost
    asked: set[str] = set()
    if match:  # the pattern's functions that ncu's filter can name
        asked = {n for group in spent for n in group if re.fullmatch(r"\w+", n)}
    return KernelPick(sorted(chosen), {n: launches[n] for n in sorted(asked - chosen)})


def kernel_rows(
    trace: Trace, kernels: Sequence[GpuEvent], costs: OpCosts
) -> list[tuple[str, bytes]]:
    """The roofline row (``row_key``) each kernel's time falls in: its op's, the launching
    op's under a user annotation, the kernel's own name where no op launched it."""
    ops = trace.ops
    owners: dict[int, tuple[str, bytes]] = {}
    keys: list[tuple[str, bytes]] = []
    for g in kernels:
        owner = g.op
        if owner >= 0 and ops[owner].cat == USER_ANNOTATION and g.launch >= 0:
            owner = g.launch
        if owner < 0:
            keys.append((g.name, b"kernel"))
            continue
        if owner not in owners:
            owners[owner] = row_key(trace, owner, costs)
        keys.append(owners[owner])
    return keys


def pair_kernels(
    traced: Sequence[GpuEvent], measured: Sequence[KernelCounters]
) -> list[tuple[GpuEvent, KernelCounters]]:
    """Measured kernels paired with the trace's, in order, by name (``kernel_key``): each
    measured kernel takes the next traced one of the same name; one with none is left out."""
    pairs: list[tuple[GpuEvent, KernelCounters]] = []
    keys = [kernel_key(g.name) for g in traced]
    j = 0
    for m in measured:
        key = kernel_key(m.name)
        k = next((i for i in range(j, len(keys)) if _same(keys[i], key)), None)
        if k is not None:
            pairs.append((traced[k], m))
            j = k + 1
    return pairs


def _same(a: tuple[str, str], b: tuple[str, str]) -> bool:
    """Two keys of one kernel: equal, or the same function where one name has no template
    arguments to compare (a name printed without them)."""
    return a == b or (a[0] == b[0] and not (a[1] and b[1]))


class MeasuredRow(msgspec.Struct):
    """An op row's figures from the counters, for one call."""

    key: tuple[str, bytes]
    kernels: int
    traced_kernels: int
    moved_bytes: float
    """DRAM bytes read and bytes written (KernelCounters.moved_bytes), summed."""
    flops: float
    duration_us: float
    sm_pct: float
    memory_pct: float
    occupancy_pct: float


def measured_rows(
    trace: Trace, events: Sequence[GpuEvent], steps: int, counters: Counters, costs: OpCosts
) -> dict[tuple[str, bytes], MeasuredRow]:
    """Per op row (its op's name and signature, as the roofline groups them): the measured
    kernels of one call summed, SM, memory and occupancy percentages weighted by duration."""
    traced = one_call_kernels(events, steps)
    keys = kernel_rows(trace, traced, costs)
    row_of = {id(g): k for g, k in zip(traced, keys, strict=True)}
    per_row: dict[tuple[str, bytes], int] = {}
    for k in keys:
        per_row[k] = per_row.get(k, 0) + 1
    # per row: kernels, µs, DRAM bytes, FLOPs, and the three percentages × µs
    sums: dict[tuple[str, bytes], list[float]] = {}
    for g, m in pair_kernels(traced, counters.kernels):
        d = m.duration_us
        add = (1.0, d, m.moved_bytes or 0.0, m.flops or 0.0)
        add += tuple((pct or 0.0) * d for pct in (m.sm_pct, m.memory_pct, m.occupancy_pct))
        acc = sums.setdefault(row_of[id(g)], [0.0] * len(add))
        acc[:] = [x + y for x, y in zip(acc, add, strict=True)]
    out: dict[tuple[str, bytes], MeasuredRow] = {}
    for k, (n, us, moved, flops, sm, memory, occupancy) in sums.items():
        weighted = [x / us if us else 0.0 for x in (sm, memory, occupancy)]
        out[k] = MeasuredRow(k, int(n), per_row.get(k, 0), moved, flops, us, *weighted)
    return out


def row_key(trace: Trace, index: int, costs: OpCosts) -> tuple[str, bytes]:
    """The key the roofline groups an op's row by: its name and its signature."""
    op = trace.ops[index]
    signature = costs.signatures([op])
    return (op.name, signature[0] if signature else bytes(op.args))


def apply_counters(
    trace: Trace,
    events: Sequence[GpuEvent],
    steps: int,
    rows: list[OpRoof],
    counters: Counters,
    costs: OpCosts,
    peaks: Peaks | None,
) -> None:
    """Mark each roofline row whose every kernel of one call was measured: its bytes and
    FLOPs per step become the counters', and its rates, intensity, bound and efficiency follow
    from them against the row's own GPU time."""
    measured = measured_rows(trace, events, steps, counters, costs)
    for row in rows:
        if row.kind == "transfer":
            continue
        key = row_key(trace, row.op_index, costs) if row.op_index >= 0 else (row.name, b"kernel")
        m = measured.get(key)
        if m is None or m.kernels < m.traced_kernels or m.kernels == 0:
            continue
        measured_roof(row, m.flops, m.moved_bytes, peaks)
        row.sm_pct, row.memory_pct, row.occupancy_pct = m.sm_pct, m.memory_pct, m.occupancy_pct
