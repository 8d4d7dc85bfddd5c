"""Try the advice in place: time the function and the variants its verdict suggests
(torch.compile, CUDA Graphs, TF32, bf16, channels_last, batch ×2) in turns on one worker,
and judge them. The file is never edited."""

from __future__ import annotations

from pathlib import Path

import msgspec

from kernelscope.analysis.experiments import Experiments, judge, suggested
from kernelscope.app.store import Store
from kernelscope.engine.dispatch import runner_for
from kernelscope.engine.remotes import Remote
from kernelscope.engine.runner import JobRunner, ProgressCallback
from kernelscope.engine.targets import Schedule, Target, build_request
from kernelscope.protocol import VARIANTS, Entry, RunTry
from kernelscope.pyfunctions import def_line


class UnknownVariant(ValueError):
    """A variant name that is not one of VARIANTS."""


def check_variants(names: list[str]) -> list[str]:
    """The names, in VARIANTS order, without repeats; UnknownVariant for any other."""
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise UnknownVariant(
            f"unknown variant {', '.join(map(repr, unknown))}: choose from {', '.join(VARIANTS)}"
        )
    return [v for v in VARIANTS if v in names]


def default_variants(target: Target, device: str) -> list[str]:
    """What the function's last run suggests (the project's store), else every variant."""
    store = Store(target.project.root)
    record = store.latest(str(target.path), target.qualname)
    if record is None:
        return list(VARIANTS)
    report = record.report
    wanted = suggested(
        report.verdict,
        (op.name for op in report.ops),
        report.device.type if device == "auto" else device,
    )
    return wanted or list(VARIANTS)


def try_request(
    target: Target,
    variants: list[str],
    trace_dir: Path,
    device: str = "auto",
    batch_size: int | None = None,
    budget_s: float = 2.0,
    source: str | None = None,
    entry: Entry | None = None,
) -> RunTry:
    """The worker request for one experiment on `target` (as `entry`'s program calls it,
    when given)."""
    base = build_request(
        target,
        trace_dir,
        Schedule(),
        device=device,
        batch_size=batch_size,
        source=source,
        entry=entry,
    )
    return msgspec.convert(
        msgspec.structs.asdict(base) | {"variants": variants, "budget_s": budget_s}, RunTry
    )


async def run_experiments(
    runner: JobRunner,
    request: RunTry,
    on_progress: ProgressCallback | None = None,
    timeout: float = 600.0,
) -> Experiments:
    """Run the experiment on `runner` and judge it; raises JobFailed."""
    finished, _ = await runner.try_variants(request, on_progress, timeout)
    line = def_line(Path(request.path), request.qualname)
    return judge(finished, request.path, request.qualname, line)


async def try_once(
    request: RunTry,
    python: str | None = None,
    remote: Remote | None = None,
    on_progress: ProgressCallback | None = None,
    timeout: float = 600.0,
) -> Experiments:
    """One experiment on a worker of its own, closed after (the CLI's way)."""
    runner = runner_for(remote, python, respawn=False)
    try:
        return await run_experiments(runner, request, on_progress, timeout)
    finally:
        await runner.close()
