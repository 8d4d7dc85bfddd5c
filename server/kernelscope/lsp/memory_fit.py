"""The "Will batch N fit?" command: the memory forecast of `kernelscope memory` for a
function of the editor's, its answer in the progress's end, a message and the reply."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import msgspec
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from kernelscope.engine.targets import TargetError, load_target, parse_entry
from kernelscope.lsp.commands import profile_args, runnable, workspace_folder
from kernelscope.lsp.progress import ProgressReporter
from kernelscope.lsp.replies import MemoryFitReply, ProfileError
from kernelscope.lsp.server import MEMORY_FIT, KernelscopeServer

#: The batch sizes measured when the command names none: app.memory's DEFAULT_BATCHES,
#: which the server's start-up path may not import (it pulls in the analysis).
DEFAULT_SIZES = (1, 2, 4)


def _int(options: dict[str, Any], key: str, low: int = 1) -> int | None:
    value: object = options.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise JsonRpcInvalidParams(f"options.{key} must be an integer >= {low}, got {value!r}")
    return value


def _sizes(options: dict[str, Any]) -> list[int]:
    value: object = options.get("batchSizes", list(DEFAULT_SIZES))
    items = cast(list[object], value) if isinstance(value, list) else [None]
    sizes = [v for v in items if isinstance(v, int) and not isinstance(v, bool) and v >= 1]
    if len(sizes) != len(items) or len(set(sizes)) != len(sizes) or len(sizes) < 2:
        raise JsonRpcInvalidParams(
            f"options.batchSizes must be two or more different integers >= 1, got {value!r}"
        )
    return sorted(sizes)


async def will_fit(ls: KernelscopeServer, *args: Any) -> dict[str, Any]:
    """Will batch N fit (uri, qualname[, {batch, batchSizes, headroom, roomBytes, check,
    via}]): peaks at a few batch sizes of the input provider (or of the call `via` makes,
    its batch dimension resized), each in a fresh worker; their fit; the largest batch that
    fits the device's free memory less the headroom; whether batch N's predicted peak fits,
    and N (else that largest batch) run to check it."""
    uri, qualname, options = profile_args(args, MEMORY_FIT)
    path, _source = runnable(ls, uri)
    batch = _int(options, "batch")
    room = _int(options, "roomBytes")
    sizes = _sizes(options)
    headroom: object = options.get("headroom", 0.1)
    if (
        not isinstance(headroom, (int, float))
        or isinstance(headroom, bool)
        or not 0 <= headroom < 1
    ):
        raise JsonRpcInvalidParams(f"options.headroom must be from 0 to < 1, got {headroom!r}")
    check: object = options.get("check", True)
    if not isinstance(check, bool):
        raise JsonRpcInvalidParams(f"options.check must be true or false, got {check!r}")
    via: object = options.get("via")
    if via is not None and (not isinstance(via, str) or not via.strip()):
        raise JsonRpcInvalidParams(f"options.via must name a program, got {via!r}")
    python = ls.settings.worker_python
    try:
        target = load_target(f"{path}::{qualname}")
        cwd = workspace_folder(ls, path) or target.project.root
        if isinstance(via, str):
            parse_entry(via, target, cwd, python=python)  # its mistakes, before any job
    except TargetError as e:
        raise JsonRpcInvalidParams(str(e)) from None
    program = (
        (lambda: parse_entry(via, target, cwd, python=python)) if isinstance(via, str) else None
    )
    from kernelscope.app.memory import run_forecast
    from kernelscope.engine.runner import JobFailed
    from kernelscope.render.memory import render_forecast, will_it_fit

    asked = f"batch {batch}" if batch is not None else "a bigger batch"
    reporter = ProgressReporter(ls, qualname, title=f"Will {asked} of {qualname} fit?")
    await reporter.begin()
    s = ls.settings
    job = run_forecast(target, sizes, str(options.get("device", s.device)), s.worker_python,
                       None, lambda _batch: reporter.on_progress, float(s.timeout),
                       float(headroom), room, check, batch, program)  # fmt: skip
    task = asyncio.ensure_future(job)
    reporter.link(task)
    try:
        out = await task
    except asyncio.CancelledError:
        reporter.end("cancelled")
        return msgspec.to_builtins(MemoryFitReply(ok=False, cancelled=True))
    except JobFailed as e:
        f = e.failure
        reporter.end(f"failed: {f.message}")
        error = ProfileError(kind=f.kind, message=f.message, path=f.path, line=f.line)
        return msgspec.to_builtins(MemoryFitReply(ok=False, error=error))
    except TargetError as e:
        reporter.end(f"failed: {e}")
        raise JsonRpcInvalidParams(str(e)) from None
    if batch is not None:
        answer = will_it_fit(out)
    elif out.largest_batch is not None:
        answer = f"batch {out.largest_batch} fits" + (f" ({out.check})" if out.check else "")
    else:
        answer = "; ".join(out.notes) or "no forecast"
    reporter.end(answer)
    ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Info, f"{qualname}: {answer}"))
    return msgspec.to_builtins(
        MemoryFitReply(
            ok=True,
            answer=answer,
            fits=out.asked_fits if batch is not None and out.fits is None else out.fits,
            largest_batch=out.largest_batch,
            text=render_forecast(out),
        )
    )


def register(server: KernelscopeServer) -> None:
    """Register the command on `server`."""
    server.command(MEMORY_FIT)(will_fit)
