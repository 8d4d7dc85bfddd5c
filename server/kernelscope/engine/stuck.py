"""A call too long to be a step (past the job's timeout, or made too few times in place): the
loop of the profiled function, whose iterations make better steps than a call that may not
return for hours (an epoch)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import msgspec

from kernelscope import pyfunctions
from kernelscope.protocol import ProfileFailed, RunProfile

#: The worker's hint for a program that made too few calls in place (inplace.py's too_few).
RUN_LONGER = "run the program longer"


def loop_hint(request: RunProfile, frames: list[tuple[str, int]]) -> str | None:
    """ "its first call had not returned: it was in its loop at FILE:LINE ..." where one of
    `frames` (the stuck worker's user frames, innermost first) is a line of the profiled
    function inside one of its loops; None elsewhere, and on any error (the timeout's
    failure must come whatever this finds)."""
    try:
        return _loop_hint(request, frames)
    except (OSError, ValueError, RuntimeError, UnicodeDecodeError):
        return None


def _profiled(request: RunProfile) -> tuple[Path, str, pyfunctions.FunctionDef | None]:
    """The profiled function's file, its source (the editor's unsaved text, where sent) and
    the function in it (None where it is not there)."""
    target = Path(request.path).resolve()
    source = request.source
    if source is None:
        source = target.read_text(encoding="utf-8")
    return target, source, pyfunctions.find(source, request.qualname)


def _loop_hint(request: RunProfile, frames: list[tuple[str, int]]) -> str | None:
    target, source, fn = _profiled(request)
    if fn is None:
        return None
    for path, line in frames:
        if not fn.contains(line) or Path(path).resolve() != target:
            continue
        loop = pyfunctions.loop_around(source, fn, line)
        if loop is None:  # a helper nested in the function, with no loop: look further out
            continue
        entry = request.entry
        spot = f"{os.path.relpath(target, entry.cwd if entry and entry.cwd else None)}:{loop}"
        via = f" --via {shlex.quote(entry.label)}" if entry is not None else " --via PROGRAM"
        return (
            f"its first call had not returned: it was in its loop at {spot} (at line "
            f"{line}); a call that long is profiled by that loop's iterations, in place: "
            f"kernelscope profile {spot}{via}"
        )
    return None


def few_calls_hint(request: RunProfile, failed: ProfileFailed) -> ProfileFailed:
    """In place, a function the program called too few times (an epoch's function) that
    holds a loop: the hint names that loop's iterations as the steps instead."""
    entry = request.entry
    if failed.kind != "too_few_calls" or entry is None or entry.loop_line:
        return failed
    if not (failed.hint or "").startswith(RUN_LONGER) or " made 0 " in failed.message:
        return failed  # a function that never ran is not sent to its loop
    try:
        target, source, fn = _profiled(request)
        loop = pyfunctions.first_loop(source, fn) if fn is not None else None
    except (OSError, ValueError, UnicodeDecodeError):
        return failed
    if loop is None:
        return failed
    try:
        spot = f"{os.path.relpath(target, entry.cwd or None)}:{loop}"
    except ValueError:  # another drive (Windows)
        spot = f"{target}:{loop}"
    hint = (
        f"each call runs its loop at {spot}: that loop's iterations make the steps "
        f"(kernelscope profile {spot} --via {shlex.quote(entry.label)}); or {failed.hint}"
    )
    return msgspec.structs.replace(failed, hint=hint)
