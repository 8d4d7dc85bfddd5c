"""A `try` as text: the function's time, each variant's speedup with its interval, what it
cost once, and whether it changed the results."""

from __future__ import annotations

from kernelscope.analysis.experiments import Experiments, VariantResult, baseline_text
from kernelscope.render.text import shorten, table
from kernelscope.units import cut, fmt_us


def render_experiments(e: Experiments) -> str:
    """The CLI's text for one experiment."""
    where = shorten(e.path) + (f":{e.line}" if e.line else "")
    method = "CUDA events" if e.method == "cuda_events" else "perf_counter"
    rows = [_row(v) for v in e.variants]
    out = [
        f"kernelscope try · {e.qualname}  ({where})",
        f"device    {e.device} · unprofiled, in turns with the function · {method}",
        *([f"call      {e.call}"] if e.call else []),
        f"function  {baseline_text(e)}",
        "",
        *table(
            ["variant", "per call", "speedup (95% CI)", "once", "results"],
            rows,
            align="lrrrl",
        ),
        "",
    ]
    failed = [v for v in e.variants if v.status == "failed" and v.path]
    for v in failed:
        out.append(f"{v.label} failed at {shorten(v.path or '')}:{v.line}: {v.why}")
    best = next((v for v in e.variants if v.name == e.best), None)
    out.append(f"best      {best.summary}" if best else "best      none is faster beyond the noise")
    return "\n".join(out)


def _row(v: VariantResult) -> list[str]:
    if v.speedup is None:
        return [v.label, "-", "-", "-", cut(f"{v.status}: {v.why}", 70)]
    per = " /item" if v.items > 1 else ""
    interval = f"×{v.speedup:.2f} ({v.ci_low or 0:.2f}–{v.ci_high or 0:.2f}){per}"
    once = f"{v.one_time_s:.2f} s {v.one_time_what}" if v.one_time_s is not None else "-"
    results = v.results
    if v.max_rel_err is not None and v.results in ("equal", "changed"):
        results += f" (max rel {v.max_rel_err:.1e})"
    return [v.label, fmt_us(v.us_per_call or 0.0), interval, once, results]
