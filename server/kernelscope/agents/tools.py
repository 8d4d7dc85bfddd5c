"""The MCP tools: arguments in, the application layer's use case run (the language server's
job service, warm workers included), the ``--json`` result and a short summary out.

Each tool returns the same object ``kernelscope … --json`` prints as structured content,
and a few lines that lead with the verdict as text. Anything the CLI would refuse with a
message (a bad path, an unknown function, a failed job) is a tool error with that message.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import msgspec
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import Field

from kernelscope.analysis.diagnose import SidecarError
from kernelscope.analysis.memory_fit import DEFAULT_HEADROOM
from kernelscope.analysis.trace_model import TraceError
from kernelscope.app.experiments import UnknownVariant, check_variants
from kernelscope.app.history import DiffError, diff
from kernelscope.app.jobs import ProfileService, ProfileSpec
from kernelscope.app.memory import DEFAULT_BATCHES, run_forecast
from kernelscope.app.profile import with_hint
from kernelscope.app.scale import DEFAULT_FACTORS, ScaleFailed, ScaleResult, check_factors, scale
from kernelscope.app.store import Store
from kernelscope.engine.kernel_choice import KernelChoiceError, checked_pattern
from kernelscope.engine.remotes import RemoteError
from kernelscope.engine.runner import JobFailed
from kernelscope.engine.targets import Schedule, Target, TargetError, load_target, parse_entry
from kernelscope.protocol import (
    DEFAULT_ACTIVE,
    DEFAULT_WAIT,
    DEFAULT_WARMUP,
    PERCENT,
    STAGE_LABELS,
    VARIANTS,
    JobProgress,
)
from kernelscope.pyfunctions import find
from kernelscope.render.memory import render_forecast
from kernelscope.render.summary import comparison_summary, experiments_summary, report_summary
from kernelscope.render.text import render_failure, shorten
from kernelscope.units import fmt_us

log = logging.getLogger(__name__)
T = TypeVar("T")

Path_ = Annotated[
    str,
    Field(description="The Python file: absolute, or relative to the server's working directory"),
]
Qualname = Annotated[str, Field(description="The function in it: `fn` or `Class.method`")]
Device = Annotated[str, Field(description="auto | cpu | cuda | cuda:N")]
RemoteName = Annotated[
    str | None,
    Field(description="A remote of [tool.kernelscope.remotes] in the project's pyproject.toml"),
]
BatchSize = Annotated[
    int | None, Field(ge=1, description="Passed to the function's input provider")
]
Timeout = Annotated[float, Field(gt=0, description="Seconds before the job is stopped")]
Via = Annotated[
    str | None,
    Field(
        description="The program that calls the function, run from the server's folder: "
        '"train.py --max_iters 20", "-m pkg.train", or "tests/test_model.py::test_forward"'
    ),
]
#: A program's options: (via, call, caller, in_place, fresh).
EntryOptions = tuple[str | None, int, str | None, bool, bool]


def result(value: object, text: str) -> CallToolResult:
    """A tool result: ``value`` as ``--json`` prints it, and the summary."""
    structured = msgspec.json.decode(msgspec.json.encode(value))
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured
    )


class Tools:
    """The tools, over one job service (its workers stay warm between calls)."""

    def __init__(self, service: ProfileService, root: Path | None = None) -> None:
        self.service = service
        self.root = root or Path.cwd()

    def _target(self, path: str, qualname: str) -> tuple[Target, str]:
        """The function to run and its file's text; ToolError when either is not there."""
        try:
            target = load_target(f"{self._path(path)}::{qualname}")
        except TargetError as e:
            raise ToolError(str(e)) from None
        try:
            source = target.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ToolError(f"cannot read {target.path}: {e}") from None
        if find(source, target.qualname) is None:
            raise ToolError(f"{target.path.name} has no function {target.qualname!r}")
        return target, source

    def _spec(
        self,
        target: Target,
        source: str,
        device: str,
        schedule: Schedule,
        timeout: float,
        batch_size: int | None,
        remote: str | None,
        entry: EntryOptions | None = None,
    ) -> ProfileSpec:
        via, call, caller, in_place, fresh = entry or (None, 1, None, False, False)
        return ProfileSpec(
            path=target.path,
            qualname=target.qualname,
            source=source,
            device=device,
            schedule=schedule,
            timeout=timeout,
            python=None,
            batch_size=batch_size,
            remote=remote,
            via=via,
            call=call,
            caller=caller,
            cwd=self.root,
            in_place=in_place,
            fresh=fresh,
        )

    async def profile(
        self,
        path: Path_,
        qualname: Qualname,
        ctx: Context,
        device: Device = "auto",
        remote: RemoteName = None,
        wait: Annotated[int, Field(ge=0, description="Profiler schedule: steps skipped")] = (
            DEFAULT_WAIT
        ),
        warmup: Annotated[int, Field(ge=0, description="Steps run before recording")] = (
            DEFAULT_WARMUP
        ),
        active: Annotated[int, Field(ge=1, description="Steps recorded")] = DEFAULT_ACTIVE,
        batch_size: BatchSize = None,
        timeout: Timeout = 120.0,
        via: Via = None,
        call: Annotated[int, Field(ge=1, description="With via: profile the K-th call")] = 1,
        caller: Annotated[
            str | None,
            Field(description="With via: count only calls with this FILE:LINE on their stack"),
        ] = None,
        in_place: Annotated[
            bool,
            Field(description="With via: profile the program's own calls as the steps"),
        ] = False,
        fresh: Annotated[
            bool,
            Field(description="With via: run the program again, not the call's kept capture"),
        ] = False,
        skip: Annotated[
            int | None,
            Field(
                ge=1,
                description="In place: calls before the profiler starts (the first cold; "
                "default 5, then timed to 20 and more while the calls are still settling)",
            ),
        ] = None,
        stop_after: Annotated[
            bool,
            Field(
                description="In place: stop the program after the profiled steps (false: "
                "let it run to its end first, its checkpoints and logs written)"
            ),
        ] = True,
        counters: Annotated[
            bool | None,
            Field(
                description="After the profile, measure one warm call's kernels with Nsight "
                "Compute (ncu, a CUDA GPU, counter access): DRAM bytes and FLOPs measured "
                "(default: [tool.kernelscope] counters)"
            ),
        ] = None,
        counters_match: Annotated[
            str | None,
            Field(
                description="Measure only the kernels whose names this regular expression "
                "matches (searched in the trace's names, templates included: 'multi_tensor' "
                "for a foreach optimizer's); turns counters on unless counters is false "
                "(default: [tool.kernelscope] counters_match)"
            ),
        ] = None,
    ) -> CallToolResult:
        """Profile one function under a warmed torch.profiler schedule in a worker process
        of its own (this machine's GPU or CPU, or a remote); returns the verdict
        (overhead-, memory- or compute-bound, with the numbers), time per op and per line,
        and findings at file:line with what to try. With `via`, the function is profiled
        as that program (a training script with its arguments) calls it: no inputs needed."""
        target, source = self._target(path, qualname)
        spec = self._spec(
            target,
            source,
            device,
            Schedule(wait, warmup, active),
            timeout,
            batch_size,
            remote,
            (via, call, caller, in_place, fresh),
        )
        if counters_match is not None:
            try:
                checked_pattern(counters_match, "counters_match")
            except KernelChoiceError as e:
                raise ToolError(str(e)) from None
        spec = dataclasses.replace(
            spec,
            counters=counters,
            counters_match=counters_match,
            skip=skip,
            finish=not stop_after,
        )
        record = await self._job(
            lambda on: self.service.profile(spec, on), ctx, f"{target.path}::{qualname}"
        )
        text = report_summary(record.report) + f"\nrun id: {record.run_id}"
        return result(record.report, text)

    async def analyze(
        self,
        trace: Annotated[
            str, Field(description="A torch.profiler trace (.json or .json.gz), any size")
        ],
        ctx: Context,
        sidecar: Annotated[
            str | None, Field(description="kernelscope's sidecar (default: found beside it)")
        ] = None,
        trace_only: Annotated[bool, Field(description="Ignore any sidecar")] = False,
    ) -> CallToolResult:
        """Diagnose a torch.profiler trace recorded anywhere (plain or gzip'd JSON): the
        verdict, ops, findings, and with stacks (`with_stack=True`) the time per function of
        the user's code, found in this project; with kernelscope's sidecar, the whole
        report."""
        path = self._path(trace)
        if not path.is_file():
            raise ToolError(f"no such file: {path}")
        side = self._path(sidecar) if sidecar else None
        if side is not None and not side.is_file():
            raise ToolError(f"no such file: {side}")
        sending: set[asyncio.Task[None]] = set()
        sent = [-1.0]

        def on_read(share: float) -> None:  # called on the event loop, ten times a second
            value = round(share * 90, 1)
            if value <= sent[0]:  # MCP progress only goes up
                return
            sent[0] = value
            task = asyncio.ensure_future(_report(ctx, value, f"reading the trace: {share:.0%}"))
            sending.add(task)
            task.add_done_callback(sending.discard)

        try:
            out = await _detached(
                self.service.analyze_trace(path, side, trace_only, on_read, self.root)
            )
        except (TraceError, SidecarError) as e:
            raise ToolError(f"{path}: {e}") from None
        except JobFailed as e:
            raise ToolError(e.failure.message) from None
        return result(out, report_summary(out))

    async def scale(
        self,
        path: Path_,
        qualname: Qualname,
        ctx: Context,
        factors: Annotated[
            list[int] | None, Field(description="Batch factors, at least two (default 1,2,4,8)")
        ] = None,
        base_batch: Annotated[
            int, Field(ge=1, description="batch_size passed to the provider at factor 1")
        ] = 1,
        device: Device = "auto",
        timeout: Annotated[float, Field(gt=0, description="Seconds per factor")] = 120.0,
    ) -> CallToolResult:
        """Time the function at batch ×1, ×2, ×4, … (its input provider takes batch_size)
        and name its bottleneck from how the time per call grows."""
        target, _ = self._target(path, qualname)
        try:
            wanted = check_factors(factors or DEFAULT_FACTORS)
        except ValueError as e:
            raise ToolError(str(e)) from None

        def on_progress(factor: int, msg: JobProgress) -> None:
            step(msg, f"×{factor}")

        step = self._reporter(ctx)
        try:
            out = await _detached(
                scale(target, wanted, None, device, timeout, on_progress, base_batch=base_batch)
            )
        except ScaleFailed as e:
            raise ToolError(
                render_failure(e.explained(base_batch), f"{target.path}::{qualname}")
            ) from None
        except TargetError as e:
            raise ToolError(str(e)) from None
        return result(out, scale_summary(out))

    async def memory(
        self,
        path: Path_,
        qualname: Qualname,
        ctx: Context,
        batch_sizes: Annotated[
            list[int] | None,
            Field(description="Batch sizes for the input provider, at least two (default 1,2,4)"),
        ] = None,
        headroom: Annotated[
            float, Field(ge=0.0, lt=1.0, description="Share of the room kept free")
        ] = DEFAULT_HEADROOM,
        room_bytes: Annotated[
            int | None,
            Field(gt=0, description="Bytes the call may use (default: the device's free memory)"),
        ] = None,
        check: Annotated[bool, Field(description="Run the forecast batch to check it")] = True,
        will_fit: Annotated[
            int | None,
            Field(ge=1, description="Also say whether this batch size fits (its predicted peak)"),
        ] = None,
        via: Via = None,
        call: Annotated[int, Field(ge=1, description="With via: the K-th call")] = 1,
        device: Device = "auto",
        timeout: Annotated[float, Field(gt=0, description="Seconds per batch size")] = 120.0,
    ) -> CallToolResult:
        """Where the memory peak goes at a few batch sizes (each in a fresh worker), and the
        largest batch that fits the device's free memory less a headroom, checked by a run.
        Every `profile` result also carries `memory_pass`: the peak by line and by kind."""
        target, _ = self._target(path, qualname)
        entry_of = None
        if via is not None:
            try:
                parse_entry(via, target, self.root, call)  # its mistakes, before any job
            except TargetError as e:
                raise ToolError(str(e)) from None
            entry_of = lambda: parse_entry(via, target, self.root, call)  # noqa: E731
        sizes = sorted(set(batch_sizes or DEFAULT_BATCHES))
        if len(sizes) < 2 or sizes[0] < 1:
            raise ToolError("give at least two different batch sizes, all >= 1")
        step = self._reporter(ctx)

        def on_batch(batch: int) -> Callable[[JobProgress], None]:
            return lambda msg: step(msg, f"batch {batch}")

        job = run_forecast(target, sizes, device, None, None, on_batch, timeout, headroom,
                           room_bytes, check, will_fit, entry_of)  # fmt: skip
        try:
            out = await _detached(job)
        except JobFailed as e:
            raise ToolError(render_failure(e.failure, f"{target.path}::{qualname}")) from None
        except (TargetError, RemoteError) as e:
            raise ToolError(str(e)) from None
        return result(out, render_forecast(out))

    async def try_(
        self,
        path: Path_,
        qualname: Qualname,
        ctx: Context,
        variants: Annotated[
            list[str] | None,
            Field(
                description=f"Of {', '.join(VARIANTS)} (default: what the function's last "
                "run suggests, else all)"
            ),
        ] = None,
        device: Device = "auto",
        remote: RemoteName = None,
        batch_size: BatchSize = None,
        budget: Annotated[float, Field(gt=0, description="Seconds of timed calls")] = 2.0,
        timeout: Annotated[float, Field(gt=0, description="Seconds before it is stopped")] = (
            600.0
        ),
        via: Via = None,
        call: Annotated[int, Field(ge=1, description="With via: try the K-th call")] = 1,
        caller: Annotated[
            str | None,
            Field(description="With via: count only calls with this FILE:LINE on their stack"),
        ] = None,
    ) -> CallToolResult:
        """Measure the advice in place: time the function and its variants (torch.compile,
        CUDA Graphs, TF32, bf16, channels_last, batch ×2) in turns on the same inputs,
        without editing the file; each variant's speedup with a 95 % interval, its one-time
        cost, and whether its results equal the function's. With `via`, on the call that
        program makes (captured, each variant replayed in the call's state)."""
        target, source = self._target(path, qualname)
        try:
            chosen = check_variants(variants) if variants is not None else None
        except UnknownVariant as e:
            raise ToolError(str(e)) from None
        spec = self._spec(
            target,
            source,
            device,
            Schedule(),
            timeout,
            batch_size,
            remote,
            (via, call, caller, False, False),
        )
        out = await self._job(
            lambda on: self.service.try_variants(spec, chosen, on, budget),
            ctx,
            f"{target.path}::{qualname}",
        )
        return result(out, experiments_summary(out))

    async def diff(
        self,
        a: Annotated[
            str, Field(description="A run id, a trace file, or PATH::QUALNAME (its last two runs)")
        ],
        b: Annotated[str | None, Field(description="A run id or a trace file")] = None,
    ) -> CallToolResult:
        """Compare two runs or traces (or a function's last two runs): the change of its time
        against the noise both measured, and the ops and lines that moved."""
        try:
            out = diff(a, b, self.root)
        except DiffError as e:
            raise ToolError(str(e)) from None
        except (TraceError, SidecarError) as e:
            raise ToolError(f"cannot read the trace: {e}") from None
        return result(out, comparison_summary(out))

    async def last_run(self, path: Path_, qualname: Qualname) -> CallToolResult:
        """The stored result of a function's last profile (from this server, the editor or
        the CLI), without running anything."""
        full = self._path(path)
        try:
            target = load_target(f"{full}::{qualname}")
        except TargetError as e:
            raise ToolError(str(e)) from None
        record = Store(target.project.root).latest(str(target.path), target.qualname)
        if record is None:
            raise ToolError(
                f"no stored run of {qualname} in {shorten(str(full))}: profile it first"
            )
        head = f"run {record.run_id} at {record.created}"
        fn = None
        with contextlib.suppress(OSError, UnicodeDecodeError):
            fn = find(target.path.read_text(encoding="utf-8"), target.qualname)
        if fn is not None and record.text_hash and fn.text_hash != record.text_hash:
            head += " (the function was edited since: profile it again for current numbers)"
        return result(record, f"{report_summary(record.report)}\n{head}")

    def _path(self, path: str) -> Path:
        return Path(path) if Path(path).is_absolute() else self.root / path

    def _reporter(self, ctx: Context) -> Callable[[JobProgress, str], None]:
        """A progress callback sending MCP progress (0–100, never going back)."""
        loop = asyncio.get_running_loop()
        sent = [-1.0]
        pending: set[asyncio.Task[None]] = set()

        def on(msg: JobProgress, prefix: str = "") -> None:
            base = float(PERCENT.get(msg.stage, 50))
            label = STAGE_LABELS.get(msg.stage, msg.stage)
            if msg.total:
                label = f"{label} {msg.step}/{msg.total}"
            if base <= sent[0]:
                base = sent[0] + 0.01  # a later stage at a lower mark (scale's next factor)
            sent[0] = base
            task = loop.create_task(_report(ctx, base, f"{prefix} {label}".strip()))
            pending.add(task)
            task.add_done_callback(pending.discard)

        return on

    async def _job(
        self,
        job: Callable[[Callable[[JobProgress], None]], Awaitable[T]],
        ctx: Context,
        target: str,
    ) -> T:
        """Run a job with progress; its failures as tool errors with the CLI's message."""
        step = self._reporter(ctx)
        try:
            return await _detached(job(lambda msg: step(msg, "")))
        except JobFailed as e:
            qualname = target.rpartition("::")[2]
            raise ToolError(render_failure(with_hint(e.failure, qualname), target)) from None
        except (TargetError, RemoteError) as e:
            raise ToolError(str(e)) from None
        except TraceError as e:
            raise ToolError(f"cannot read the trace: {e}") from None


async def _report(ctx: Context, progress: float, message: str) -> None:
    try:
        await ctx.report_progress(progress, 100, message)
    except Exception as e:  # a client gone or without progress: the job goes on
        log.debug("progress not sent: %s", e)


async def _detached(job: Awaitable[T]) -> T:
    """Await a job in a task of its own, cancelled once when the call is. The SDK cancels
    a call's task again at every await until it ends; passed on, that would cut short the
    job's own clean-up (the worker told to stop, or killed) and leave the worker busy."""
    task = asyncio.ensure_future(job)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()
        raise


def scale_summary(out: ScaleResult) -> str:
    """A scale test: the verdict, then each factor's time."""
    fn = out.function
    where = shorten(fn.path) + (f":{fn.line}" if fn.line else "")
    times = ", ".join(f"×{p.factor} {fmt_us(p.us_per_call)}" for p in out.points)
    lines = [f"verdict: {out.verdict.summary}", f"{fn.qualname} ({where}): {times}"]
    if out.png:
        lines.append(f"chart: {out.png}")
    elif out.png_error:
        lines.append(out.png_error)
    return "\n".join(lines)
