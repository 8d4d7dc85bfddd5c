"""``kernelscope scale PATH::QUALNAME``: the batch-doubling test, as a CLI subcommand."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from kernelscope.app.scale import (
    DEFAULT_FACTORS,
    ScaleFailed,
    ScaleResult,
    check_factors,
    device_label,
    rows,
    scale,
)
from kernelscope.cli.args import (
    EXIT_FAILED,
    EXIT_OK,
    Subparsers,
    fail_usage,
    positive_float,
    positive_int,
    print_json,
)
from kernelscope.cli.progress import ProgressLine
from kernelscope.engine.targets import TargetError, load_target
from kernelscope.protocol import JobProgress
from kernelscope.render.plot import text_chart
from kernelscope.render.text import render_failure, shorten, table
from kernelscope.units import fmt_us


def _factors(text: str) -> list[int]:
    try:
        return check_factors([int(part) for part in text.split(",") if part.strip()])
    except ValueError as e:
        message = str(e) if "factor" in str(e) else f"expected integers like 1,2,4,8, got {text!r}"
        raise argparse.ArgumentTypeError(message) from None


def add_scale_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """Add the ``scale`` subcommand and its options."""
    p = subparsers.add_parser(
        "scale", help="time a function at batch ×1, ×2, ×4, … and name its bottleneck"
    )
    p.add_argument("target", metavar="PATH::QUALNAME")
    p.add_argument(
        "--factors",
        type=_factors,
        default=list(DEFAULT_FACTORS),
        help="batch factors, comma-separated (default 1,2,4,8)",
    )
    p.add_argument(
        "--base-batch",
        type=positive_int,
        default=1,
        help="batch_size passed to the provider at factor 1 (default 1)",
    )
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default auto)")
    p.add_argument(
        "--timeout", type=positive_float, default=120.0, help="seconds per factor (default 120)"
    )
    p.add_argument("--python", default=None, help="interpreter that runs the worker (has torch)")
    p.add_argument(
        "--png",
        default=None,
        metavar="PATH",
        help="where to write the chart (default <project>/.kernelscope/scale/QUALNAME.png)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    return p


def run_scale(args: argparse.Namespace) -> int:
    """Run the scale subcommand; returns the exit status."""
    try:
        target = load_target(args.target, python=args.python)
    except TargetError as e:
        return fail_usage(str(e), args.json)
    progress = ProgressLine(sys.stderr, target.qualname)
    progress.stage("worker start")

    def on_progress(factor: int, msg: JobProgress) -> None:
        progress.name = f"{target.qualname} ×{factor}"
        progress.on_progress(msg)

    try:
        result = asyncio.run(
            scale(
                target,
                args.factors,
                args.python,
                args.device,
                args.timeout,
                on_progress,
                base_batch=args.base_batch,
                png=Path(args.png) if args.png else None,
            )
        )
    except ScaleFailed as e:
        progress.clear()
        return _fail_job(e, args)
    finally:
        progress.clear()
    if result.png_error is not None:
        print(f"kernelscope: {result.png_error}", file=sys.stderr)
    if args.json:
        print_json(result)
    else:
        print(render_scale(result))
    return EXIT_OK if result.png else EXIT_FAILED


def render_scale(result: ScaleResult) -> str:
    """The scale test as the terminal shows it."""
    fn, points = result.function, result.points
    where = shorten(fn.path) + (f":{fn.line}" if fn.line else "")
    method = points[0].method.replace("_", " ")
    out = [
        f"kernelscope scale · {fn.qualname}  ({where})",
        f"device    {device_label(result.device)} · unprofiled time per call ({method})",
        "",
        *table(
            ["factor", "batch", "per call", "per item", "growth"],
            [
                [
                    f"×{p.factor}",
                    str(p.batch_size),
                    fmt_us(p.us_per_call),
                    fmt_us(p.us_per_item),
                    f"×{p.growth:.2f}" if p.growth is not None else "-",
                ]
                for p in points
            ],
        ),
        "",
        text_chart(points),
        "",
        f"verdict   {result.verdict.summary}",
    ]
    if result.png:
        out.append(f"chart     {shorten(result.png)}")
    return "\n".join(out)


def _fail_job(e: ScaleFailed, args: argparse.Namespace) -> int:
    failure = e.explained(args.base_batch)
    if args.json:
        out: dict[str, object] = {"error": failure}
        if e.points:
            out["points"] = rows(e.points)
        print_json(out)
    print(render_failure(failure, args.target), file=sys.stderr)
    return EXIT_FAILED
