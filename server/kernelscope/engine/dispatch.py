"""Which runner runs a job: Ray for a ``kind = "ray"`` remote, else a warm launcher."""

from __future__ import annotations

from collections.abc import Sequence

from kernelscope.engine.launcher import Launcher
from kernelscope.engine.ray_jobs import RayJobs
from kernelscope.engine.remotes import Remote
from kernelscope.engine.runner import JobRunner


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
