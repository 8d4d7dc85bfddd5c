"""A distributed step as text: the verdict, a row per rank, the findings."""

from __future__ import annotations

from kernelscope.render.text import MARKS, shorten, table
from kernelscope.report.distributed import DistributedReport
from kernelscope.units import fmt_us


def render_distributed(d: DistributedReport) -> str:
    """The CLI's text for `kernelscope profile --nproc N`."""
    fn = d.reports[0].function if d.reports else None
    where = f"{fn.qualname}  ({shorten(fn.path)}:{fn.line})" if fn else ""
    out = [
        f"kernelscope profile · {where} · {d.world_size} ranks ({d.backend})",
        "",
        *table(
            ["rank", "per call", "wall/step", "collectives/step", "share", "top op"],
            [
                [
                    str(r.rank) + (" (straggler)" if r.rank == d.straggler else ""),
                    fmt_us(r.us_per_call),
                    fmt_us(r.wall_us_per_step),
                    fmt_us(r.comm_us_per_step),
                    f"{r.comm_share:.0%}",
                    r.top_op[:40],
                ]
                for r in d.ranks
            ],
            align="lrrrrl",
        ),
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
