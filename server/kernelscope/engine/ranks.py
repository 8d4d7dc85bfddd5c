"""A distributed job on this host: N workers started as torchrun would (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR=127.0.0.1 and a free port,
OMP_NUM_THREADS=1; NCCL on GPUs, gloo on the CPU, one GPU each), the same request sent to
all, run in lockstep (the worker agrees on call counts and meets at a barrier around the
active window). A program (--via) on N ranks initializes its own process group from those
variables; the worker agrees through it from the chosen call on.

One rank failing stops the others, and the error names every rank: what the failing one
raised and where, and where each other one was (a rank still running when another timed out
in a collective "never arrived").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from kernelscope.engine.launcher import Launcher
from kernelscope.engine.runner import JobFailed, JobResult, ProgressCallback
from kernelscope.protocol import (
    DIST_AGREE_PORT_ENV,
    DIST_LOCAL_RANK,
    DIST_MASTER_ADDR,
    DIST_MASTER_PORT,
    DIST_RANK,
    DIST_TIMEOUT_ENV,
    DIST_WORLD_SIZE,
    STAGE_LABELS,
    JobProgress,
    ProfileFailed,
    RunProfile,
)

#: What a rank raises when a peer went away: a consequence, not the cause.
_PEER_GONE = re.compile(r"Connection (closed|reset) by peer|remote worker crash|NCCL.*abort", re.I)
#: What a collective raises when a rank never joined it (gloo's and NCCL's words).
_TIMED_OUT = re.compile(r"timed out|timeout", re.I)
#: Seconds the other ranks get to end on their own after one fails (they usually fail too,
#: on a closed connection, which says more than a kill).
GRACE_S = 3.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_env(
    rank: int, world: int, port: int, collective_timeout: float, agree_port: int = 0
) -> dict[str, str]:
    """The environment of rank `rank`'s worker (one intra-op thread each unless the user's
    environment sets OMP_NUM_THREADS, as torchrun does: N ranks would fight for the cores);
    `agree_port`: the store a program's ranks agree through (0: none)."""
    return {
        "OMP_NUM_THREADS": "1",
        **os.environ,
        DIST_RANK: str(rank),
        DIST_WORLD_SIZE: str(world),
        DIST_LOCAL_RANK: str(rank),
        "LOCAL_WORLD_SIZE": str(world),
        "GROUP_RANK": "0",
        DIST_MASTER_ADDR: "127.0.0.1",
        DIST_MASTER_PORT: str(port),
        DIST_TIMEOUT_ENV: f"{collective_timeout:g}",
        **({DIST_AGREE_PORT_ENV: str(agree_port)} if agree_port else {}),
    }


@dataclass
class RankState:
    """Where one rank of a job is: its last stage, and its result or failure once it has one."""

    rank: int
    stage: str = "worker start"
    outcome: JobResult | ProfileFailed | None = None
    task: asyncio.Task[JobResult] | None = field(default=None, repr=False)


async def profile_ranks(
    request: RunProfile,
    nproc: int,
    python: str | None = None,
    on_progress: ProgressCallback | None = None,
    timeout: float = 120.0,
    make_launcher: Callable[[dict[str, str]], Launcher] | None = None,
) -> list[JobResult]:
    """Run `request` on `nproc` ranks; their results by rank. Raises JobFailed naming each
    rank when one fails (the others are stopped)."""
    if nproc < 2:
        raise ValueError("a distributed job has at least 2 ranks")
    port = free_port()
    agree = free_port() if request.entry is not None else 0
    while agree == port:
        agree = free_port()
    collective = max(5.0, timeout / 2)  # a hang fails in the collective, before the job times out
    launchers = [
        (make_launcher or _launcher(python))(rank_env(r, nproc, port, collective, agree))
        for r in range(nproc)
    ]
    ranks = [RankState(r) for r in range(nproc)]

    def progress_of(rank: RankState) -> ProgressCallback:
        def on(msg: JobProgress) -> None:
            rank.stage = STAGE_LABELS.get(msg.stage, msg.stage)
            if msg.total:
                rank.stage += f" {msg.step}/{msg.total}"
            if rank.rank == 0 and on_progress is not None:
                on_progress(msg)

        return on

    try:
        for rank, launcher in zip(ranks, launchers, strict=True):
            job = msgspec.structs.replace(request, job_id=f"{request.job_id}-r{rank.rank}")
            rank.task = asyncio.ensure_future(launcher.profile(job, progress_of(rank), timeout))
        tasks = [r.task for r in ranks if r.task is not None]
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        if pending and any(t.exception() for t in done if not t.cancelled()):
            more, pending = await asyncio.wait(pending, timeout=GRACE_S)
            done |= more
        for rank in ranks:
            task = rank.task
            if task is None or not task.done() or task.cancelled():
                continue
            error = task.exception()
            if error is None:
                rank.outcome = task.result()
            elif isinstance(error, JobFailed):
                rank.outcome = error.failure
            else:
                raise error
        failed = rank_failure(ranks)
        if failed is not None:
            raise JobFailed(failed)
        return [r.outcome for r in ranks if isinstance(r.outcome, JobResult)]
    finally:
        for rank in ranks:
            if rank.task is not None and not rank.task.done():
                rank.task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*(r.task for r in ranks if r.task), return_exceptions=True)
        await asyncio.gather(*(launcher.close() for launcher in launchers), return_exceptions=True)


def _launcher(python: str | None) -> Callable[[dict[str, str]], Launcher]:
    def make(env: dict[str, str]) -> Launcher:
        return Launcher(python, env=env, respawn=False, clean_timing="never")

    return make


def _message(rank: RankState) -> str:
    return rank.outcome.message if isinstance(rank.outcome, ProfileFailed) else ""


def rank_failure(ranks: list[RankState]) -> ProfileFailed | None:
    """One failure naming each rank when any failed: the cause (its kind, path and line; a
    rank that failed because a peer went away comes after it), then what every rank did."""
    failed = [r for r in ranks if isinstance(r.outcome, ProfileFailed)]
    failed.sort(key=lambda r: _PEER_GONE.search(_message(r)) is not None)
    if not failed:
        return None
    first = failed[0].outcome
    assert isinstance(first, ProfileFailed)
    hang = _TIMED_OUT.search(first.message) is not None  # a collective waited for them
    parts: list[str] = []
    for rank in ranks:
        outcome = rank.outcome
        if isinstance(outcome, ProfileFailed):
            where = f" at {os.path.basename(outcome.path)}" if outcome.path else ""
            where += f":{outcome.line}" if outcome.path and outcome.line else ""
            parts.append(f"rank {rank.rank}: {outcome.message}{where}")
        elif isinstance(outcome, JobResult):
            parts.append(f"rank {rank.rank}: finished")
        elif hang:
            parts.append(f"rank {rank.rank}: never arrived (still at {rank.stage}; stopped)")
        else:
            parts.append(f"rank {rank.rank}: stopped at {rank.stage}")
    message = f"rank {failed[0].rank} of {len(ranks)} failed: " + "; ".join(parts)
    return msgspec.structs.replace(first, message=message)
