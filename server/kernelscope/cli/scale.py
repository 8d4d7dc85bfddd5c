"""``kernelscope scale PATH::QUALNAME``: the batch-doubling test, as a CLI subcommand."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import msgspec

from kernelscope.analysis.scaling import ScalePoint, ScaleVerdict, classify
from kernelscope.app.scale import (
    DEFAULT_FACTORS,
    ScaleFailed,
    check_factors,
    device_label,
    measure,
    write_plot,
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
from kernelscope.engine.targets import Target, TargetError, load_target
from kernelscope.protocol import JobProgress
from kernelscope.pyfunctions import def_line
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
        target = load_target(args.target)
    except TargetError as e:
        return fail_usage(str(e), args.json)
    progress = ProgressLine(sys.stderr, target.qualname)
    progress.stage("worker start")

    def on_progress(factor: int, msg: JobProgress) -> None:
        progress.name = f"{target.qualname} ×{factor}"
        progress.on_progress(msg)

    try:
        points = asyncio.run(
            measure(
                target,
                args.factors,
                args.python,
                args.device,
                args.timeout,
                on_progress,
                base_batch=args.base_batch,
            )
        )
    except ScaleFailed as e:
        progress.clear()
        return _fail_job(e, args)
    finally:
        progress.clear()
    verdict = classify(points)
    png_path, error = write_plot(target, points, verdict, Path(args.png) if args.png else None)
    if error is not None:
        print(f"kernelscope: cannot write {png_path}: {error.strerror or error}", file=sys.stderr)
    png = None if error else str(png_path)
    if args.json:
        print_json(_json(target, points, verdict, png))
    else:
        print(_render(target, points, verdict, png))
    return EXIT_OK if png else EXIT_FAILED


def _function_line(target: Target) -> int | None:
    return def_line(target.path, target.qualname)


def _render(
    target: Target, points: list[ScalePoint], verdict: ScaleVerdict, png: str | None
) -> str:
    line = _function_line(target)
    where = shorten(str(target.path)) + (f":{line}" if line else "")
    method = points[0].method.replace("_", " ")
    out = [
        f"kernelscope scale · {target.qualname}  ({where})",
        f"device    {device_label(points[0])} · unprofiled time per call ({method})",
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
        f"verdict   {verdict.summary}",
    ]
    if png:
        out.append(f"chart     {shorten(png)}")
    return "\n".join(out)


def _point_json(p: ScalePoint) -> dict[str, object]:
    return {
        "factor": p.factor,
        "batch_size": p.batch_size,
        "us_per_call": p.us_per_call,
        "us_per_item": p.us_per_item,
        "growth": p.growth,
        "method": p.method,
        "reps": p.reps,
        "trace": p.trace_path,
    }


def _json(
    target: Target, points: list[ScalePoint], verdict: ScaleVerdict, png: str | None
) -> dict[str, object]:
    first = points[0]
    return {
        "function": {
            "path": str(target.path),
            "qualname": target.qualname,
            "line": _function_line(target),
        },
        "device": {
            "type": first.device_type,
            "name": first.device_name,
            "index": first.device_index,
        },
        "points": [_point_json(p) for p in points],
        "verdict": verdict,
        "png": png,
    }


def _fail_job(e: ScaleFailed, args: argparse.Namespace) -> int:
    failure = e.failure
    if e.points and e.factor is not None:
        done = ", ".join(f"×{p.factor} {fmt_us(p.us_per_call)}" for p in e.points)
        message = (
            f"at ×{e.factor} (batch_size {e.factor * args.base_batch}): {failure.message}"
            f" (measured before it: {done})"
        )
        failure = msgspec.structs.replace(failure, message=message)
    if args.json:
        out: dict[str, object] = {"error": failure}
        if e.points:
            out["points"] = [_point_json(p) for p in e.points]
        print_json(out)
    print(render_failure(failure, args.target), file=sys.stderr)
    return EXIT_FAILED
