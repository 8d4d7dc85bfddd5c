"""Profile jobs for the server: one warm launcher per interpreter and per remote, coalescing,
analysis off-loop.

Two requests for the same function (on the same remote) share one job; jobs on one launcher
queue (one device, one job). The trace is analyzed in a process of its own (analysis_pool.py),
so the event loop keeps answering hovers and lenses meanwhile.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kernelscope.analysis.counters import KernelPick
from kernelscope.analysis.experiments import Experiments, suggested
from kernelscope.app.analysis_pool import AnalysisFailed, AnalysisPool, report_read
from kernelscope.app.counters import costliest_kernels
from kernelscope.app.distributed import distributed_job
from kernelscope.app.experiments import run_experiments, try_request
from kernelscope.app.held_trace import drop_held
from kernelscope.app.history import Delta, delta
from kernelscope.app.profile import add_counters, job_report, resolve_remote
from kernelscope.app.settings import Settings
from kernelscope.app.store import RunRecord, Store, now
from kernelscope.app.traces import analyze_path, import_job
from kernelscope.engine.dispatch import (
    NO_RANKS_THERE,
    profile_on_ranks,
    ranks_here_or_on_ray,
    runner_for,
)
from kernelscope.engine.entry_points import EntryPoint, entry_points
from kernelscope.engine.project import ProjectError, load_project
from kernelscope.engine.remotes import Remote, RemoteError
from kernelscope.engine.runner import JobFailed, JobResult, JobRunner
from kernelscope.engine.targets import (
    Schedule,
    Target,
    TargetError,
    build_request,
    job_ranks,
    launcher_here,
    parse_entry,
)
from kernelscope.protocol import (
    VARIANTS,
    Entry,
    JobProgress,
    ProfileFailed,
    ProfileFinished,
    RunProfile,
    WorkerReady,
)
from kernelscope.pyfunctions import FunctionDef, find
from kernelscope.report.files import companions
from kernelscope.report.schema import Report, TraceAnalysis
from kernelscope.units import stages_line

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class ProfileSpec:
    """What to profile: the file (as the editor has it), the function, and how."""

    path: Path
    qualname: str
    source: str
    device: str
    schedule: Schedule
    timeout: float
    python: str | None
    batch_size: int | None = None
    remote: str | None = None
    nproc: int | None = None
    """Ranks (None: the project's [tool.kernelscope] nproc, else the settings')."""
    via: str | None = None
    """The program that calls the function (None: [tool.kernelscope.via], the settings')."""
    call: int = 1
    caller: str | None = None
    cwd: Path | None = None
    """Where the program runs (None: the project's root)."""
    no_compile: bool = False
    in_place: bool = False
    """Profile the program's own calls as the steps (after `skip`)."""
    skip: int | None = None
    """In place: steps before the profiler (None: 5, and more while they settle)."""
    finish: bool = False
    """In place: let the program run to its end after the profiled steps."""
    fresh: bool = False
    """Run the program again even where a kept capture of the call could be replayed."""
    counters: bool | None = None
    """Measure the call with Nsight Compute after (None: [tool.kernelscope] counters, else
    the settings')."""
    counters_match: str | None = None
    """Measure only the kernels whose names this pattern matches (None: [tool.kernelscope]
    counters_match); a pattern turns counters on unless `counters` is False."""


@dataclass
class ProfileService:
    """Runs profile jobs and keeps their results per project."""

    analysis: AnalysisPool = field(default_factory=AnalysisPool)
    launchers: dict[str, JobRunner] = field(default_factory=dict[str, JobRunner])
    stores: dict[Path, Store] = field(default_factory=dict[Path, Store])
    running: dict[tuple[str, str, str], asyncio.Task[RunRecord]] = field(
        default_factory=dict[tuple[str, str, str], "asyncio.Task[RunRecord]"]
    )
    settings: Settings = field(default_factory=Settings)
    _closing: set[asyncio.Task[None]] = field(default_factory=set[asyncio.Task[None]])

    def launcher(self, python: str | None, remote: Remote | None = None) -> JobRunner:
        """The warm runner for an interpreter, or for a remote (started on first use; a
        remote whose definition changed gets a new one)."""
        key = f"remote:{remote.name}" if remote else python or sys.executable
        old = self.launchers.get(key)
        if old is not None and old.remote != remote:
            task = asyncio.ensure_future(old.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
            old = None
        if old is None:
            self.launchers[key] = runner_for(remote, None if remote else key)
        runner = self.launchers[key]
        if runner.warm:
            runner.start()
        return runner

    def remote_names(self, path: Path) -> list[str]:
        """Every remote defined for the project of `path` or in the settings."""
        try:
            remotes = load_project(path).remotes
        except ProjectError:
            remotes = {}
        return sorted({*remotes, *self.settings.remotes})

    def entry_points(self, path: Path, qualname: str) -> list[EntryPoint]:
        """Programs of the project of `path` that may call `qualname` (scripts that import
        its module and run something; tests that import and name it), but none when the
        project or the settings map one to it already (its plain "Profile" uses that)."""
        try:
            project = load_project(path)
        except ProjectError:
            return []
        if project.via_for(path, qualname) or dataclasses.replace(
            project, via=self.settings.via
        ).via_for(path, qualname):
            return []
        return entry_points(project.root, project.module_name(path), qualname)

    def mapped_providers(self, path: Path) -> set[str]:
        """The functions of the module at `path` that the project's `[tool.kernelscope.inputs]`
        or the `inputs` setting name as input providers."""
        try:
            project = load_project(path)
        except ProjectError:
            return set()
        module = project.module_name(path)
        mapped = {*project.inputs.values(), *self.settings.inputs.values()}
        return {name for m, _, name in (v.partition(":") for v in mapped) if m == module}

    def store_for(self, path: Path) -> Store:
        """The store of the project that holds `path`."""
        try:
            root = load_project(path).root
        except ProjectError:
            root = path.parent
        if root not in self.stores:
            self.stores[root] = Store(
                root, self.settings.keep_per_function, self.settings.max_trace_bytes
            )
        return self.stores[root]

    def find_run(self, run_id: str) -> RunRecord | None:
        """A run by id in any loaded project."""
        for store in self.stores.values():
            if (run := store.get(run_id)) is not None:
                return run
        return None

    async def profile(
        self, spec: ProfileSpec, on_progress: Callable[[JobProgress], None] | None = None
    ) -> RunRecord:
        """Profile (or join the running profile of) one function; raises JobFailed/TargetError."""
        key = (str(spec.path), spec.qualname, spec.remote or "")
        task = self.running.get(key)
        if task is None or task.done():
            task = asyncio.ensure_future(self._run(spec, on_progress))
            self.running[key] = task
            task.add_done_callback(lambda _: self._forget(key, task))
        # Cancelling any caller cancels the shared job: the user asked to stop profiling it.
        return await task

    def _forget(self, key: tuple[str, str, str], task: asyncio.Task[RunRecord]) -> None:
        if self.running.get(key) is task:
            del self.running[key]

    def _target(self, spec: ProfileSpec) -> tuple[Target, Remote | None, Store, FunctionDef]:
        """The function to run, its remote and its project's store; TargetError if none."""
        fn = find(spec.source, spec.qualname)
        if fn is None:
            raise TargetError(f"{spec.path.name} has no function {spec.qualname!r}")
        try:
            project = load_project(spec.path)
        except ProjectError as e:
            raise TargetError(str(e)) from None
        if self.settings.inputs:
            project = dataclasses.replace(
                project, inputs={**project.inputs, **self.settings.inputs}
            )
        if self.settings.via:
            project = dataclasses.replace(project, via={**project.via, **self.settings.via})
        try:
            remote = resolve_remote(spec.remote, project, self.settings.remotes)
        except RemoteError as e:
            raise TargetError(str(e)) from None
        return Target(spec.path, spec.qualname, project), remote, self.store_for(spec.path), fn

    async def try_variants(
        self,
        spec: ProfileSpec,
        variants: list[str] | None = None,
        on_progress: Callable[[JobProgress], None] | None = None,
        budget_s: float = 2.0,
    ) -> Experiments:
        """Time the function and its variants in turns on its warm runner (by default the
        variants its last run's verdict suggests); raises JobFailed/TargetError."""
        target, remote, store, _ = self._target(spec)
        if variants is None:
            record = store.latest(str(spec.path), spec.qualname)
            variants = (self.suggested_variants(record) if record else []) or list(VARIANTS)
        entry = await asyncio.to_thread(self._entry, spec, target)
        launcher_here(entry, remote)
        if entry is not None and entry.in_place:
            raise TargetError(
                "try replays a captured call: it does not run in place (drop inPlace, or name "
                "a function the loop calls)"
            )
        request = try_request(
            target,
            variants,
            store.traces_dir,
            device=spec.device,
            batch_size=spec.batch_size,
            budget_s=budget_s,
            source=spec.source,
            entry=entry,
        )
        runner = self.launcher(spec.python, remote)
        return await run_experiments(runner, request, on_progress, max(spec.timeout, 600.0))

    def delta(self, record: RunRecord) -> Delta | None:
        """The run against the function's run before it (history.delta)."""
        return delta(self.store_for(Path(record.path)), record)

    def suggested_variants(self, record: RunRecord) -> list[str]:
        """What a run's verdict suggests trying (analysis.experiments.suggested)."""
        report = record.report
        return suggested(report.verdict, (op.name for op in report.ops), report.device.type)

    async def _run(
        self, spec: ProfileSpec, on_progress: Callable[[JobProgress], None] | None
    ) -> RunRecord:
        target, remote, store, fn = self._target(spec)
        entry = await asyncio.to_thread(self._entry, spec, target)
        launcher_here(entry, remote)
        request = build_request(
            target,
            store.traces_dir,
            spec.schedule,
            device=spec.device,
            source=spec.source,
            batch_size=spec.batch_size,
            entry=entry,
        )
        nproc = job_ranks(entry, spec.nproc, target.project.nproc or self.settings.nproc)
        if nproc > 1:
            return await self._run_ranks(spec, request, remote, store, fn, nproc, on_progress)
        launcher = self.launcher(spec.python, remote)
        self.analysis.warm()  # starts meanwhile, if it is not running
        result = await launcher.profile(request, on_progress, spec.timeout)
        counters = spec.counters
        if counters is None:
            asked = bool(spec.counters_match)
            counters = target.project.counters or self.settings.counters or asked
        kernels = target.project.counter_kernels
        match = spec.counters_match
        if match is None and not kernels.match:
            match = self.settings.counters_match
        if match is not None:
            kernels = dataclasses.replace(kernels, match=match)
        if counters:
            try:
                await add_counters(
                    request, result, spec.python, remote, on_progress, spec.timeout, self._choose,
                    kernels,
                )  # fmt: skip
            except BaseException:  # cancelled under ncu: the trace held for it goes too,
                # behind the other jobs' analyses (closing the process would cancel them)
                task = asyncio.ensure_future(self.analysis.run(drop_held))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
                raise
        if on_progress:
            on_progress(JobProgress(job_id=request.job_id, stage="analysis"))
        record = await self._analyze(
            analyze_job,
            result.finished,
            spec.path,
            spec.qualname,
            result.ready,
            spec.remote,
            fn.text_hash,
            result.stages_s,
        )
        log.info("profiled %s: %s", spec.qualname, stages_line(record.report.stages_s))
        store.add(record, spec.source)
        return record

    @staticmethod
    def _entry(spec: ProfileSpec, target: Target) -> Entry | None:
        """The program the spec (or the project, or the settings) names; TargetError if bad."""
        command = spec.via or target.project.via_for(target.path, target.qualname)
        if not command:
            return None
        cwd = spec.cwd or target.project.root
        return parse_entry(
            command,
            target,
            cwd,
            spec.call,
            spec.caller,
            spec.no_compile,
            spec.source,
            in_place=spec.in_place,
            skip=spec.skip,
            fresh=spec.fresh,
            finish=spec.finish,
            python=spec.python,
        )

    async def _run_ranks(
        self,
        spec: ProfileSpec,
        request: RunProfile,
        remote: Remote | None,
        store: Store,
        fn: FunctionDef,
        nproc: int,
        on_progress: Callable[[JobProgress], None] | None,
    ) -> RunRecord:
        """A distributed job: its ranks on workers of their own (closed after), then rank 0's
        report carrying the step's verdict and findings as the run."""
        if not ranks_here_or_on_ray(remote):
            raise TargetError(NO_RANKS_THERE)
        self.analysis.warm()
        results = await profile_on_ranks(
            request, nproc, remote, spec.python, on_progress, spec.timeout
        )
        if on_progress:
            on_progress(JobProgress(job_id=request.job_id, stage="analysis"))
        record = await self._analyze(
            distributed_job,
            results,
            spec.path,
            spec.qualname,
            request,
            fn.text_hash,
            spec.remote,
        )
        store.add(record, spec.source)
        return record

    async def _choose(self, finished: ProfileFinished, launch_count: int, match: str) -> KernelPick:
        """The kernels ``--counters`` measures, chosen in the analysis process: the trace it
        reads stays there for the job's report (``analyze_job``), not in the server. No
        function (the call's first kernels) where that process died reading it."""
        try:
            return await self._analyze(costliest_kernels, finished, launch_count, match, keep=True)
        except JobFailed as e:
            return KernelPick([], {}, f"the analysis process failed reading the trace: {e}")

    async def _analyze(self, job: Callable[..., T], *args: object, keep: bool = False) -> T:
        """Run an analysis job in the analysis process; its death is a job failure. A big
        trace's process is let go after, unless it is to `keep` what it read."""
        big = not keep and (
            any(isinstance(a, Path) and _size(a) > BIG_TRACE_BYTES for a in args)
            or any(
                isinstance(a, ProfileFinished) and _size(Path(a.trace_path)) > BIG_TRACE_BYTES // 8
                for a in args
            )
        )
        try:
            return await self.analysis.run(job, *args, recycle=big)
        except AnalysisFailed as e:
            raise JobFailed(ProfileFailed(job_id="", kind="analysis", message=str(e))) from None

    async def import_trace(
        self,
        path: Path,
        qualname: str,
        source: str,
        trace: Path,
        sidecar: Path | None,
        on_read: Callable[[float], None] | None = None,
    ) -> RunRecord:
        """A trace recorded elsewhere (another machine, a CI job, a fixture) as the function's
        last run: copied into the project's store and analyzed off the event loop.
        ``on_read`` is told the share of the file read, ten times a second."""
        fn = find(source, qualname)
        if fn is None:
            raise TargetError(f"{path.name} has no function {qualname!r}")
        store = self.store_for(path)
        job = self._analyze(
            import_job,
            path,
            qualname,
            fn.def_line,
            fn.text_hash,
            trace,
            sidecar or companions(trace)[0],
            store.traces_dir,
        )
        record = await self._reading(job, on_read)
        store.add(record, source)
        return record

    async def analyze_trace(
        self,
        trace: Path,
        sidecar: Path | None = None,
        trace_only: bool = False,
        on_read: Callable[[float], None] | None = None,
        root: Path | None = None,
    ) -> Report | TraceAnalysis:
        """`kernelscope analyze` of a trace, off the event loop (nothing is stored), its
        Python frames' paths looked for under ``root``; raises TraceError, SidecarError or
        JobFailed (the analysis process died)."""
        return await self._reading(
            self._analyze(analyze_path, trace, sidecar, trace_only, report_read, root), on_read
        )

    async def _reading(
        self, analysis: Coroutine[Any, Any, T], on_read: Callable[[float], None] | None
    ) -> T:
        """Await an analysis, telling `on_read` the share of its trace read, ten times a
        second; cancelled, a queued analysis does not start (a running one ends on its own)."""
        job = asyncio.ensure_future(analysis)
        try:
            while on_read is not None and not job.done():
                await asyncio.wait([job], timeout=READ_POLL_S)
                if not job.done():
                    on_read(self.analysis.read_share)
            return await job
        except asyncio.CancelledError:
            job.cancel()
            raise

    async def close(self) -> None:
        """Stop every worker."""
        for task in list(self.running.values()):
            task.cancel()
        await asyncio.gather(
            *(lc.close() for lc in self.launchers.values()), return_exceptions=True
        )
        self.analysis.close()


def analyze_job(
    finished: ProfileFinished,
    path: Path,
    qualname: str,
    ready: WorkerReady,
    remote: str | None,
    text_hash: str,
    stages_s: dict[str, float] | None = None,
) -> RunRecord:
    """In the analysis process: read a finished job's traces and build its run record."""
    report = job_report(JobResult(finished, ready, stages_s or {}), str(path), qualname, remote)
    return RunRecord(finished.job_id, str(path), qualname, now(), text_hash, report)


READ_POLL_S = 0.1
BIG_TRACE_BYTES = 64 << 20  # a plain-JSON trace this big (gzip'd: an eighth) recycles the child


def _size(path: Path) -> int:
    try:
        return path.stat().st_size if path.is_file() else 0
    except OSError:
        return 0
