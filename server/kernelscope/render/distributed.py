"""A distributed step as text: the verdict, a row per rank, the findings."""

from __future__ import annotations

from kernelscope.analysis.collectives import Collective
from kernelscope.render.text import MARKS, call_site_lines, shorten, table
from kernelscope.report.distributed import DistributedReport
from kernelscope.units import cut, fmt_bytes, fmt_rate, fmt_us


def _collectives(rows: list[Collective], limit: int = 6) -> list[str]:
    """Rank 0's collectives: size, time, bandwidths."""
    if not rows:
        return []
    return [
        "",
        "collectives (rank 0, per step; bus bandwidth as nccl-tests counts it)",
        *table(
            ["collective", "dtype", "size", "calls", "time", "algbw", "busbw"],
            [
                [
                    c.kind, c.dtype, fmt_bytes(c.bytes) if c.bytes else "?", str(c.calls),
                    fmt_us(c.us), _rate(c.algbw_gbps), _rate(c.busbw_gbps),
                ]
                for c in rows[:limit]
            ],
            align="llrrrrr",
        ),
    ]  # fmt: skip


def _rate(gbps: float) -> str:
    return fmt_rate(gbps) if gbps else "?"  # the size unknown


def render_distributed(d: DistributedReport) -> str:
    """The CLI's text for `kernelscope profile --nproc N`."""
    fn = d.reports[0].function if d.reports else None
    where = f"{fn.qualname}  ({shorten(fn.path)}:{fn.line})" if fn else ""
    out = [
        f"kernelscope profile · {where} · {d.world_size} ranks ({d.backend})",
        *(call_site_lines(d.reports[0]) if d.reports else []),
        "",
        *table(
            [
                "rank",
                "per call",
                "wall/step",
                "collectives/step",
                "share",
                "hidden",
                "idle",
                "top op",
            ],
            [
                [
                    str(r.rank) + (" (straggler)" if r.rank == d.straggler else ""),
                    fmt_us(r.us_per_call),
                    fmt_us(r.wall_us_per_step),
                    fmt_us(r.comm_us_per_step),
                    f"{r.comm_share:.0%}",
                    f"{r.overlap_share:.0%}",
                    fmt_us(r.idle_us_per_call),
                    cut(r.top_op, 40),
                ]
                for r in d.ranks
            ],
            align="lrrrrrrl",
        ),
        *_collectives(d.collectives),
        "",
        f"skew      arrival {fmt_us(d.arrival_skew_us)} per step · time per call "
        f"{d.step_skew:.0%} between ranks",
        f"verdict   {d.verdict.summary}",
    ]
    for f in d.findings:
        at = f" {shorten(f.path)}:{f.line}" if f.path and f.line else ""
        out.append(f"  {MARKS.get(f.severity, '-')} {f.code}{at}  {f.message}")
        out += [f"      try: {t}" for t in f.try_]
    if d.merged_trace:
        out.append(f"trace     {shorten(d.merged_trace)} (every rank, one clock)")
    return "\n".join(out)
