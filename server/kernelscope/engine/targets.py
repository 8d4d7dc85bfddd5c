"""Turn "path.py::Qual.name" plus options into a RunProfile request for a worker."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from kernelscope.engine.project import Project, ProjectError, load_project
from kernelscope.protocol import DEFAULT_ACTIVE, DEFAULT_WAIT, DEFAULT_WARMUP, RunProfile


class TargetError(Exception):
    """The target cannot be profiled as written; the message says why."""


@dataclass(frozen=True)
class Target:
    """One function to profile: its file, qualified name, and project."""

    path: Path
    qualname: str
    project: Project

    @property
    def module_name(self) -> str:
        """The module name the worker imports the file under."""
        return self.project.module_name(self.path)


@dataclass(frozen=True)
class Schedule:
    """torch.profiler's schedule(wait, warmup, active)."""

    wait: int = DEFAULT_WAIT
    warmup: int = DEFAULT_WARMUP
    active: int = DEFAULT_ACTIVE

    def check(self) -> None:
        """Raise TargetError for counts the profiler cannot use."""
        if self.wait < 0 or self.warmup < 0 or self.active < 1:
            raise TargetError("--wait and --warmup must be >= 0 and --active >= 1")


def parse_target(spec: str) -> tuple[Path, str]:
    """Split PATH::QUALNAME."""
    path, sep, qualname = spec.rpartition("::")
    if not sep or not path or not qualname:
        raise TargetError(f"expected PATH::QUALNAME (e.g. model.py::forward), got {spec!r}")
    if not all(part.isidentifier() for part in qualname.split(".")):
        raise TargetError(f"{qualname!r} is not a qualified name like fn or Class.method")
    return Path(path), qualname


def load_target(spec: str, source: str | None = None) -> Target:
    """Resolve a target spec against the file system (unsaved `source` may stand in)."""
    path, qualname = parse_target(spec)
    if source is None and not path.is_file():
        raise TargetError(f"no such file: {path}")
    try:
        project = load_project(path)
    except ProjectError as e:
        raise TargetError(str(e)) from None
    return Target(path.resolve(), qualname, project)


def build_request(
    target: Target,
    trace_dir: Path,
    schedule: Schedule,
    device: str = "auto",
    source: str | None = None,
    batch_size: int | None = None,
    with_stack: bool = True,
    line_pass: bool = True,
) -> RunProfile:
    """The worker request for one profile of `target`."""
    schedule.check()
    module = target.module_name
    return RunProfile(
        job_id=uuid.uuid4().hex[:12],
        path=str(target.path),
        qualname=target.qualname,
        module_name=module,
        project_root=str(target.project.root),
        trace_dir=str(trace_dir),
        source=source,
        device=device,
        wait=schedule.wait,
        warmup=schedule.warmup,
        active=schedule.active,
        line_pass=line_pass,
        with_stack=with_stack,
        provider=target.project.provider_for(module, target.qualname),
        batch_size=batch_size,
    )
