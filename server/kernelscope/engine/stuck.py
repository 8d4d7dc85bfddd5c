"""A first call past the job's timeout: the loop of the profiled function it was in, whose
iterations make better steps than a call that may not return for hours (an epoch)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from kernelscope import pyfunctions
from kernelscope.protocol import RunProfile


def loop_hint(request: RunProfile, frames: list[tuple[str, int]]) -> str | None:
    """ "its first call had not returned: it was in its loop at FILE:LINE ..." where one of
    `frames` (the stuck worker's user frames, innermost first) is a line of the profiled
    function inside one of its loops; None elsewhere, and on any error (the timeout's
    failure must come whatever this finds)."""
    try:
        return _loop_hint(request, frames)
    except (OSError, ValueError, RuntimeError, UnicodeDecodeError):
        return None


def _loop_hint(request: RunProfile, frames: list[tuple[str, int]]) -> str | None:
    target = Path(request.path).resolve()
    source = request.source
    if source is None:
        source = target.read_text(encoding="utf-8")
    fn = pyfunctions.find(source, request.qualname)
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
