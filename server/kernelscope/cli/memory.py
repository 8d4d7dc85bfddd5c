"""``kernelscope memory PATH::QUALNAME``: the memory pass at a few batch sizes, the fit of
peak against batch, and the largest batch that fits, checked by running it."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable

from kernelscope.analysis.memory_fit import DEFAULT_HEADROOM
from kernelscope.app.memory import DEFAULT_BATCHES, run_forecast
from kernelscope.app.profile import resolve_remote
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
from kernelscope.engine.remotes import RemoteError
from kernelscope.engine.runner import JobFailed, ProgressCallback
from kernelscope.engine.targets import Target, TargetError, launcher_here, load_target
from kernelscope.protocol import Entry
from kernelscope.render.memory import render_forecast
from kernelscope.render.text import render_failure


def _batches(text: str) -> list[int]:
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 8,16,32, got {text!r}") from None
    if len(sizes) < 2 or sizes[0] < 1:
        raise argparse.ArgumentTypeError("give at least two different batch sizes, all >= 1")
    return sizes


def _headroom(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share like 0.1, got {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError("the headroom is a share of the room, from 0 to < 1")
    return value


def _size(text: str) -> int:
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    scale = units.get(t[-1:], 1)
    try:
        value = float(t[:-1] if scale > 1 else t) * scale
    except ValueError:
        message = f"expected a size like 80G or 512M, got {text!r}"
        raise argparse.ArgumentTypeError(message) from None
    if value <= 0:
        raise argparse.ArgumentTypeError("the room must be more than 0 bytes")
    return int(value)


def add_memory_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """Add the ``memory`` subcommand and its options."""
    p = subparsers.add_parser(
        "memory", help="where the memory peak goes, and the largest batch that fits"
    )
    p.add_argument("target", metavar="PATH::QUALNAME")
    p.add_argument(
        "--batch-sizes",
        type=_batches,
        default=list(DEFAULT_BATCHES),
        help="batch sizes passed to the input provider, comma-separated (default 1,2,4)",
    )
    p.add_argument(
        "--headroom",
        type=_headroom,
        default=DEFAULT_HEADROOM,
        help=f"share of the room kept free (default {DEFAULT_HEADROOM})",
    )
    p.add_argument(
        "--room",
        type=_size,
        default=None,
        help="bytes the call may use, like 80G (default: the device's free memory, measured)",
    )
    p.add_argument(
        "--will-fit",
        type=positive_int,
        metavar="N",
        default=None,
        help="also say whether batch N fits (its predicted peak against the room)",
    )
    p.add_argument("--no-check", action="store_true", help="do not run the forecast batch")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default auto)")
    p.add_argument(
        "--timeout", type=positive_float, default=120.0, help="seconds per batch (default 120)"
    )
    p.add_argument("--python", default=None, help="interpreter that runs the worker (has torch)")
    p.add_argument("--remote", metavar="NAME", help="run on [tool.kernelscope.remotes.NAME]")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    return p


def run_memory(
    args: argparse.Namespace, entry_of: Callable[[Target], Entry | None] | None = None
) -> int:
    """Run the memory subcommand; returns the exit status. ``entry_of``: the program that
    calls the target (--via), parsed again before each batch size so that the program runs
    once and its kept capture is replayed after."""
    try:
        target = load_target(args.target, python=args.python)
        remote = resolve_remote(args.remote, target.project, python=args.python)
        entry = entry_of(target) if entry_of is not None else None
        launcher_here(entry, remote)
        if entry is not None and entry.in_place:
            raise TargetError(
                "the memory forecast replays a captured call: name a function, not a loop"
            )
    except (TargetError, RemoteError) as e:
        return fail_usage(str(e), args.json)
    program = None if entry is None or entry_of is None else (lambda: entry_of(target))
    progress = ProgressLine(sys.stderr, target.qualname)
    progress.stage("worker start")

    def on_batch(batch: int) -> ProgressCallback:
        progress.name = f"{target.qualname} batch {batch}"
        return progress.on_progress

    try:
        result = asyncio.run(
            run_forecast(
                target,
                args.batch_sizes,
                args.device,
                args.python,
                remote,
                on_batch,
                args.timeout,
                args.headroom,
                args.room,
                not args.no_check,
                args.will_fit,
                program,
            )
        )
    except JobFailed as e:
        progress.clear()
        if args.json:
            print_json({"error": e.failure})
        print(render_failure(e.failure, args.target), file=sys.stderr)
        return EXIT_FAILED
    finally:
        progress.clear()
    if args.json:
        print_json(result)
    else:
        print(render_forecast(result))
    return EXIT_OK if result.fits is not False else EXIT_FAILED
