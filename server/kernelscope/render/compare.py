"""A comparison of two runs as text: the time per call against the noise, then the ops and
lines that moved."""

from __future__ import annotations

from kernelscope.render.memory import memory_delta_lines
from kernelscope.render.text import shorten, table
from kernelscope.report.compare import MIN_DELTA_US, OP_NOISE, Comparison
from kernelscope.units import cut, fmt_us


def change_text(c: Comparison) -> str:
    """``−12 % (1.45 ms → 1.28 ms; noise ±3 %): faster``."""
    verdict = (
        "slower: a regression beyond the noise"
        if c.regression
        else "faster"
        if c.improvement
        else "within the noise"
    )
    noise = f"; noise ±{c.noise:.0%}" if c.noise else ""
    return (
        f"{c.change:+.0%} ({fmt_us(c.time_before_us)} → {fmt_us(c.time_after_us)}, "
        f"{c.timed}{noise}): {verdict}"
    )


def noise_rule(c: Comparison) -> str:
    """What "changed" means for an op, and how many moved within their noise."""
    run = f" (the run's noise, above the {OP_NOISE:.0%} floor)" if c.noise > OP_NOISE else ""
    within = f"; {c.ops_within_noise} more moved within it" if c.ops_within_noise else ""
    return (
        f"an op changed when its calls did, or its time beyond its noise: ±{c.op_noise:.0%} "
        f"of its time per step{run}, at least {MIN_DELTA_US:g} µs{within}"
    )


def render_comparison(c: Comparison, max_rows: int = 15) -> str:
    """The CLI's text for `kernelscope diff`."""
    out = [
        f"kernelscope diff · {c.before} → {c.after}",
        f"time      {change_text(c)}",
        "",
    ]
    if c.ops:
        out += table(
            ["op", "status", f"{c.unit} before", f"{c.unit} after", "Δ per step", "calls/step"],
            [
                [
                    cut(d.name, 48),
                    d.status,
                    fmt_us(d.before_us),
                    fmt_us(d.after_us),
                    ("+" if d.delta_us >= 0 else "−") + fmt_us(abs(d.delta_us)),
                    f"{d.calls_before:g} → {d.calls_after:g}",
                ]
                for d in c.ops[:max_rows]
            ],
            align="llrrrr",
        )
        out.append(f"  {noise_rule(c)}")
    else:
        out.append(f"ops       no op changed: {noise_rule(c)}")
    if c.memory is not None:
        out += ["", *memory_delta_lines(c.memory)]
    if c.lines:
        out += ["", "lines that moved (per call):"]
        for d in c.lines[:max_rows]:
            moved = f" (was line {d.moved_from})" if d.moved_from else ""
            moved += f" (edited; was `{cut(d.was, 40)}`)" if d.was else ""
            out.append(
                f"  {shorten(d.path)}:{d.line}{moved}  {fmt_us(d.before_us)} → "
                f"{fmt_us(d.after_us)}  {cut(d.code, 60)}"
            )
    return "\n".join(out)
