"""Which runner runs a job: Ray for a ``kind = "ray"`` remote, else a warm launcher; and
where a job's ranks run: in one Ray job on a Ray remote, else on workers of this host."""

from __future__ import annotations

from collections.abc import Sequence

from kernelscope.engine.launcher import Launcher
from kernelscope.engine.ranks import profile_ranks
from kernelscope.engine.ray_jobs import RayJobs
from kernelscope.engine.remotes import Remote
from kernelscope.engine.runner import JobResult, JobRunner, ProgressCallback
from kernelscope.protocol import RunProfile

#: Why an SSH or command-prefix remote does not take ranks (yet).
NO_RANKS_THERE = (
    "--nproc runs its ranks on this host or on a Ray remote (one Ray job, a GPU per rank); "
    "an SSH or command remote does not take it yet"
)


def ranks_here_or_on_ray(remote: Remote | None) -> bool:
    """Whether a job's ranks can run with this remote (none, or a Ray one)."""
    return remote is None or remote.kind == "ray"


async def profile_on_ranks(
    request: RunProfile,
    nproc: int,
    remote: Remote | None = None,
    python: str | None = None,
    on_progress: ProgressCallback | None = None,
    timeout: float = 120.0,
) -> list[JobResult]:
    """``request`` on ``nproc`` ranks: one Ray job on a Ray remote, else workers here."""
    if remote is not None:
        assert remote.kind == "ray", NO_RANKS_THERE
        return await RayJobs(remote).profile_ranks(request, nproc, on_progress, timeout)
    return await profile_ranks(request, nproc, python, on_progress, timeout)


def runner_for(
    remote: Remote | None = None,
    python: str | None = None,
    respawn: bool = True,
    prefix: Sequence[str] = (),
) -> JobRunner:
    """A Ray runner for a ``kind = "ray"`` remote, else a warm launcher (here or remote)."""
    if remote is not None and remote.kind == "ray":
        return RayJobs(remote)
    return Launcher(python=python, respawn=respawn, remote=remote, prefix=prefix)
