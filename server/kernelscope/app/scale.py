"""The batch-doubling test, run: one short job per batch factor on one warm worker
(``run_scaling``), then the pure verdict of analysis/scaling.py and its plot (``scale``,
what the CLI and the MCP server call)."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import msgspec

from kernelscope.analysis.scaling import ScalePoint, ScaleVerdict, classify, growth
from kernelscope.engine.dispatch import runner_for
from kernelscope.engine.project import provider_hint
from kernelscope.engine.runner import JobFailed, JobRunner
from kernelscope.engine.targets import Schedule, Target, build_request
from kernelscope.protocol import JobProgress, ProfileFailed
from kernelscope.pyfunctions import INPUTS_FILE, def_line, provider_name
from kernelscope.render.plot import render_png
from kernelscope.units import fmt_us

SCALE_SCHEDULE = Schedule(wait=0, warmup=1, active=2)
"""Each factor's job is short: only its unprofiled timing is used."""
DEFAULT_FACTORS = (1, 2, 4, 8)
ScaleProgress = Callable[[int, JobProgress], None]
"""Progress callback: the factor being measured and the worker's progress frame."""


class ScaleFailed(JobFailed):
    """A factor's job failed; ``points`` holds the factors measured before it."""

    def __init__(
        self, failure: ProfileFailed, factor: int | None, points: Sequence[ScalePoint]
    ) -> None:
        super().__init__(failure)
        self.factor = factor
        self.points = list(points)

    def explained(self, base_batch: int = 1) -> ProfileFailed:
        """The failure, naming the factor it failed at and what was measured before it."""
        if not self.points or self.factor is None:
            return self.failure
        done = ", ".join(f"×{p.factor} {fmt_us(p.us_per_call)}" for p in self.points)
        message = (
            f"at ×{self.factor} (batch_size {self.factor * base_batch}): {self.failure.message}"
            f" (measured before it: {done})"
        )
        return msgspec.structs.replace(self.failure, message=message)


def check_factors(factors: Sequence[int]) -> list[int]:
    """The factors sorted and deduplicated; ValueError unless at least two, all ≥ 1."""
    unique = sorted(set(factors))
    if any(f < 1 for f in unique):
        raise ValueError("batch factors must be >= 1")
    if len(unique) < 2:
        raise ValueError("give at least two different batch factors")
    return unique


async def run_scaling(
    target: Target,
    factors: Sequence[int],
    runner: JobRunner,
    device: str = "auto",
    timeout: float = 120.0,
    on_progress: ScaleProgress | None = None,
    *,
    base_batch: int = 1,
    trace_dir: Path | None = None,
) -> list[ScalePoint]:
    """Time `target` at each factor (batch_size = base_batch × factor) on one warm worker.

    Each factor is one short job (wait 0, warmup 1, active 2, no stacks, no line pass) whose
    unprofiled time per call becomes the point. Raises ScaleFailed (a JobFailed) naming the
    factor that failed, with the points measured before it; a target without an input
    provider fails before any job runs, since nothing would pass it the batch size.
    """
    factors = check_factors(factors)
    check_provider(target)
    trace_dir = trace_dir or target.project.root / ".kernelscope" / "scale"
    points: list[ScalePoint] = []
    for factor in factors:
        batch_size = base_batch * factor
        request = build_request(
            target,
            trace_dir,
            SCALE_SCHEDULE,
            device=device,
            batch_size=batch_size,
            with_stack=False,
            line_pass=False,
            memory_pass=False,
        )
        callback = partial(on_progress, factor) if on_progress else None
        try:
            result = await runner.profile(request, callback, timeout)
        except JobFailed as e:
            raise ScaleFailed(e.failure, factor, points) from None
        side = result.finished.sidecar
        us = side.timing.us_per_call
        points.append(
            ScalePoint(
                factor=factor,
                batch_size=batch_size,
                us_per_call=us,
                us_per_item=us / factor,
                growth=growth(us, points),
                method=side.timing.method,
                reps=side.timing.reps,
                trace_path=result.finished.trace_path,
                device_type=side.device_type,
                device_name=side.device_name,
                device_index=side.device_index,
            )
        )
    return points


def check_provider(target: Target) -> None:
    """Raise ScaleFailed when no input provider exists: the batch size would go unused.

    A provider that exists but takes no ``batch_size`` is the worker's to report.
    """
    if target.project.provider_for(target.module_name, target.qualname):
        return
    name = provider_name(target.qualname)
    for i, path in enumerate([target.path, *target.project.provider_files(target.path)]):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            if i == 0 or path.is_file():
                return  # the worker reports it, with the line
            continue
        if name in _top_level_names(tree):
            return
    failure = ProfileFailed(
        job_id="",
        kind="missing_inputs",
        message=(
            f"{target.qualname} has no input provider, so nothing can pass it a batch size: "
            f"define {name}(batch_size: int = 1, device: str = 'cpu') in "
            f"{INPUTS_FILE} beside {target.path.name} (or at the project root), "
            "or map one in pyproject.toml under [tool.kernelscope.inputs]"
        ),
        path=str(target.path),
        line=def_line(target.path, target.qualname),
        hint=provider_hint(target.path, target.qualname),
    )
    raise ScaleFailed(failure, None, [])


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def write_plot(
    target: Target, points: Sequence[ScalePoint], verdict: ScaleVerdict, png: Path | None
) -> tuple[Path, OSError | None]:
    """Draw the points to `png` (default: .kernelscope/scale/QUALNAME.png in the project);
    the path, and the error when it could not be written."""
    path = png or target.project.root / ".kernelscope" / "scale" / f"{target.qualname}.png"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(
            render_png(points, verdict, f"{target.qualname} · {device_label(_device(points[0]))}")
        )
    except OSError as e:
        return path, e
    return path, None


def device_label(device: ScaleDevice) -> str:
    """Where a scale test ran: ``cuda:0 (NVIDIA H200)``."""
    where = device.type + (f":{device.index}" if device.index is not None else "")
    return f"{where} ({device.name})" if device.name else where


def _device(point: ScalePoint) -> ScaleDevice:
    return ScaleDevice(point.device_type, point.device_name, point.device_index)


class ScaleFunction(msgspec.Struct):
    """The function a scale test timed."""

    path: str
    qualname: str
    line: int | None


class ScaleDevice(msgspec.Struct):
    """Where it was timed."""

    type: str
    name: str
    index: int | None


class ScaleRow(msgspec.Struct):
    """One factor's unprofiled time."""

    factor: int
    batch_size: int
    us_per_call: float
    us_per_item: float
    growth: float | None
    method: str
    reps: int
    trace: str | None


class ScaleResult(msgspec.Struct, omit_defaults=True):
    """A scale test: the points, the verdict and the chart (``png`` None when it could not
    be written, ``png_error`` says why)."""

    function: ScaleFunction
    device: ScaleDevice
    points: list[ScaleRow]
    verdict: ScaleVerdict
    png: str | None
    png_error: str | None = None


def rows(points: Sequence[ScalePoint]) -> list[ScaleRow]:
    """The points as the result lists them."""
    return [
        ScaleRow(
            p.factor,
            p.batch_size,
            p.us_per_call,
            p.us_per_item,
            p.growth,
            p.method,
            p.reps,
            p.trace_path,
        )
        for p in points
    ]


async def scale(
    target: Target,
    factors: Sequence[int],
    python: str | None = None,
    device: str = "auto",
    timeout: float = 120.0,
    on_progress: ScaleProgress | None = None,
    base_batch: int = 1,
    png: Path | None = None,
) -> ScaleResult:
    """Measure every factor on a worker of its own (closed after), judge the growth and
    draw the chart; raises ScaleFailed."""
    check_provider(target)
    runner = runner_for(python=python, respawn=False)
    try:
        points = await run_scaling(
            target, factors, runner, device, timeout, on_progress, base_batch=base_batch
        )
    finally:
        await runner.close()
    verdict = classify(points)
    png_path, error = write_plot(target, points, verdict, png)
    return ScaleResult(
        ScaleFunction(str(target.path), target.qualname, def_line(target.path, target.qualname)),
        _device(points[0]),
        rows(points),
        verdict,
        None if error else str(png_path),
        None if error is None else f"cannot write {png_path}: {error.strerror or error}",
    )
