"""Starts workers and runs jobs on them: one warm worker, one job at a time.

A worker is ``<prefix argv> <python> -u -c <bootstrap>`` with its source streamed on stdin;
local runs have an empty prefix, remote ones ssh's or a command's (see remotes.py). The
launcher replaces crashed, timed-out and cancelled workers and turns every failure into a
``JobFailed`` naming the cause (and the remote, for a remote worker).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import re
import signal
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from kernelscope import protocol
from kernelscope.engine.clean_timing import (
    CLEAN_WORKER,
    TIMING_WORKER_ENV,
    CleanTiming,
    clean_progress,
    host_bound,
    timed_again,
    timing_request,
)
from kernelscope.engine.host_memory import SAMPLE_S, memory_total, oom_message, resident_bytes
from kernelscope.engine.remotes import Remote, explain_exit
from kernelscope.engine.runner import JobFailed, JobResult, ProgressCallback
from kernelscope.engine.shipping import R, ShipError, keep_traces, remote_request
from kernelscope.engine.stuck import few_calls_hint, loop_hint
from kernelscope.protocol import (
    FRAME_HEADER,
    MAX_FRAME_BYTES,
    CalibrationFinished,
    JobOutcome,
    JobProgress,
    ProfileFailed,
    ProfileFinished,
    RunCalibration,
    RunProfile,
    RunTiming,
    RunTry,
    TryFinished,
    WorkerReady,
    failure,
)
from kernelscope.worker import BOOTSTRAP, bootstrap_payload

log = logging.getLogger(__name__)

_FAULT_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
_FAULT_KIND = re.compile(r"^Fatal Python error: (?P<what>.+)$")
# Failures of the worker rather than of the user's code: a remote's name goes in front.
_WORKER_KINDS = frozenset(
    {"crash", "timeout", "worker_start", "no_torch", "no_cuda", "bad_device", "internal"}
)


class WorkerState(enum.Enum):
    """Where a worker process is in its life; logged on every change."""

    STARTING = "starting"
    READY = "ready"
    BUSY = "busy"
    DEAD = "dead"


@dataclass
class _Pending:
    job_id: str
    on_progress: ProgressCallback | None
    future: asyncio.Future[JobOutcome | ProfileFailed] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class WorkerProcess:
    """One worker subprocess and the tasks that read its stdout frames and stderr lines."""

    def __init__(
        self, argv: Sequence[str], env: dict[str, str] | None = None, remote: Remote | None = None
    ) -> None:
        self.argv = list(argv)
        self.env = env
        self.remote = remote
        self.bytes_sent = 0
        self.bytes_received = 0
        self.state = WorkerState.STARTING
        self.ready: WorkerReady | None = None
        self.stderr_tail: deque[str] = deque(maxlen=400)
        self._proc: asyncio.subprocess.Process | None = None
        self._ready_future: asyncio.Future[WorkerReady | ProfileFailed] | None = None
        self._pending: _Pending | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._exit_failure: ProfileFailed | None = None
        self._stage = ""  # the running job's last JobProgress stage
        self._peak_rss = 0  # the running job's largest resident memory seen (local workers)

    @property
    def pid(self) -> int | None:
        """The local process id (of ssh, for a remote worker)."""
        return self._proc.pid if self._proc else None

    def _set_state(self, state: WorkerState) -> None:
        if state is not self.state:
            log.info("worker %s: %s -> %s", self.pid, self.state.value, state.value)
            self.state = state

    def _mark_idle(self) -> None:
        if self.state is WorkerState.BUSY:
            self._set_state(WorkerState.READY)

    async def start(self, timeout: float) -> WorkerReady:
        """Spawn, stream the program, and wait for its WorkerReady frame."""
        loop = asyncio.get_running_loop()
        self._ready_future = loop.create_future()
        env = dict(os.environ if self.env is None else self.env)
        env.setdefault("KINETO_LOG_LEVEL", "99")
        env.setdefault("PYTHONUNBUFFERED", "1")
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except OSError as e:
            self._set_state(WorkerState.DEAD)
            raise JobFailed(
                failure("worker_start", f"cannot start {self.argv[0]}: {e.strerror or e}")
            ) from None
        assert self._proc.stdin is not None
        self._tasks = [
            asyncio.create_task(self._read_frames()),
            asyncio.create_task(self._read_stderr()),
        ]
        if self.remote is None:
            self._tasks.append(asyncio.create_task(self._watch_memory()))
        try:
            payload = bootstrap_payload()
            self.bytes_sent += len(payload)
            self._proc.stdin.write(payload)
            await self._proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            first = await asyncio.wait_for(asyncio.shield(self._ready_future), timeout)
        except TimeoutError:
            await self.kill()
            raise JobFailed(
                failure("worker_start", f"the worker did not start within {timeout:.0f} s")
            ) from None
        if isinstance(first, ProfileFailed):
            await self.kill()
            raise JobFailed(first)
        self.ready = first
        self._set_state(WorkerState.READY)
        return first

    async def _read_frames(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        try:
            while True:
                header = await stdout.readexactly(FRAME_HEADER.size)
                (size,) = FRAME_HEADER.unpack(header)
                if size > MAX_FRAME_BYTES:
                    log.error("worker %s sent a %d-byte frame; stopping it", self.pid, size)
                    break
                body = await stdout.readexactly(size)
                self.bytes_received += FRAME_HEADER.size + size
                self._dispatch(protocol.decode_from_worker(body))
        except asyncio.IncompleteReadError:
            pass
        except msgspec.ValidationError as e:
            log.error("worker %s sent a bad frame: %s", self.pid, e)
            # its job would wait for an answer that never comes: fail it, stop the worker
            pending = self._pending
            if pending is not None and not pending.future.done():
                pending.future.set_result(
                    failure("internal", f"the worker sent a message this server cannot read: {e}")
                )
            with contextlib.suppress(ProcessLookupError):
                if self._proc.returncode is None:
                    self._proc.kill()
        except asyncio.CancelledError:
            return
        await self._on_exit()

    def _dispatch(self, msg: protocol.FromWorker) -> None:
        pending = self._pending
        if isinstance(msg, WorkerReady):
            if self._ready_future and not self._ready_future.done():
                self._ready_future.set_result(msg)
        elif isinstance(msg, JobProgress):
            if pending and pending.job_id == msg.job_id:
                self._stage = msg.stage
                if pending.on_progress:
                    pending.on_progress(msg)
        elif isinstance(msg, ProfileFailed) and not msg.job_id:
            if self._ready_future and not self._ready_future.done():
                self._ready_future.set_result(msg)  # failed before ready: no torch, say
        elif pending and pending.job_id == msg.job_id and not pending.future.done():
            if isinstance(msg, ProfileFailed) and msg.kind == "exit":
                self._exit_failure = msg  # the process is about to end by os._exit
            pending.future.set_result(msg)

    async def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        with contextlib.suppress(asyncio.CancelledError):
            async for raw in self._proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                self.stderr_tail.append(line)
                log.debug("worker %s: %s", self.pid, line)

    async def _watch_memory(self) -> None:
        """Keep the busy worker's largest resident memory (an OOM kill leaves no other trace)."""
        with contextlib.suppress(asyncio.CancelledError):
            while self._proc is not None and self._proc.returncode is None:
                if self.state is WorkerState.BUSY:
                    rss = resident_bytes(self._proc.pid)
                    self._peak_rss = max(self._peak_rss, rss or 0)
                await asyncio.sleep(SAMPLE_S)

    async def _on_exit(self) -> None:
        self._set_state(WorkerState.DEAD)
        code = await self._proc.wait() if self._proc else None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._tasks[1]), 1.0)
        crashed = self._crash_failure(code)
        if self._ready_future and not self._ready_future.done():
            self._ready_future.set_result(crashed)
        pending = self._pending
        if pending and not pending.future.done():
            pending.future.set_result(crashed)

    def _crash_failure(self, code: int | None) -> ProfileFailed:
        """Explain an unexpected exit from ssh's stderr, the exit status and faulthandler's dump."""
        if self.remote is not None:
            explained = explain_exit(
                self.remote, code, list(self.stderr_tail), self.ready is not None
            )
            if explained is not None:
                tail = [ln for ln in self.stderr_tail if ln.strip()][-8:]
                return failure(explained[0], explained[1], traceback=tail)
        what, path, line = _parse_fault(list(self.stderr_tail))
        if code is not None and code < 0:
            try:
                signame = signal.Signals(-code).name
            except ValueError:
                signame = f"signal {-code}"
            cause = what or signame
            oom = None
            if code == -signal.SIGKILL and self.remote is None:
                oom = oom_message(self._peak_rss, memory_total(), self._stage)
            message = oom or f"the worker crashed ({cause}); it was replaced"
        elif what:  # through ssh the exit status is 255, but faulthandler said what happened
            message = f"the worker crashed ({what}); it was replaced"
        else:
            message = f"the worker exited with status {code}; it was replaced"
        tail = [ln for ln in self.stderr_tail if ln.strip()][-8:]
        return failure("crash", message, path=path, line=line, traceback=tail)

    async def run(
        self,
        request: RunProfile | RunTiming | RunTry | RunCalibration,
        on_progress: ProgressCallback | None,
        timeout: float,
        local_signals: bool,
    ) -> JobOutcome:
        """Send one job and wait for its result; raise JobFailed on any failure."""
        if self.state is not WorkerState.READY or self._proc is None or self._proc.stdin is None:
            raise JobFailed(failure("crash", "the worker is not running"))
        pending = _Pending(request.job_id, on_progress)
        self._stage, self._peak_rss = "", 0
        self._pending = pending
        self._set_state(WorkerState.BUSY)
        try:
            frame = protocol.encode_frame(request)
            self.bytes_sent += len(frame)
            self._proc.stdin.write(frame)
            await self._proc.stdin.drain()
            result = await asyncio.wait_for(asyncio.shield(pending.future), timeout)
        except TimeoutError:
            frames = await self._where_stuck(local_signals)
            await self.kill()
            via = getattr(request, "entry", None) is not None
            program = "the program's run to the call, " if via else ""
            hint = (
                f"the whole job counts ({program}the cold call, the timing and the profiled "
                "steps): --timeout N (the editor's kernelscope.timeout) gives it longer"
            )
            loop = (
                loop_hint(request, frames)
                if self.stage == "cold" and type(request) is RunProfile
                else None
            )
            raise JobFailed(
                failure(
                    "timeout",
                    f"timed out after {timeout:g} s; the worker was replaced",
                    path=frames[0][0] if frames else None,
                    line=frames[0][1] if frames else None,
                    hint=f"{loop}; or {hint}" if loop else hint,
                )
            ) from None
        except asyncio.CancelledError:
            await self._cancel(request.job_id, pending)
            raise
        except (BrokenPipeError, ConnectionResetError):
            result = await pending.future
        finally:
            self._pending = None
        self._mark_idle()
        if getattr(result, "worker_ends", False):
            await self.retire()
        if isinstance(result, ProfileFailed):
            if self._exit_failure is not None:
                await self.kill()
            if type(request) is RunProfile:
                result = few_calls_hint(request, result)
            raise JobFailed(result)
        return result

    @property
    def stage(self) -> str:
        """The running job's last progress stage ("cold": its cold call)."""
        return self._stage

    async def retire(self, grace: float = 2.0) -> None:
        """A worker that said it ends (it ran a program, and is not clean for the next
        job): let it exit, kill it if it lingers."""
        self._set_state(WorkerState.DEAD)
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._proc.wait(), grace)
        await self.kill()

    async def _where_stuck(self, local_signals: bool) -> list[tuple[str, int]]:
        """Ask faulthandler (SIGUSR1) where the main thread is, before killing it: its user
        frames, innermost first."""
        if not local_signals or self._proc is None or not hasattr(signal, "SIGUSR1"):
            return []
        before = len(self.stderr_tail)
        with contextlib.suppress(ProcessLookupError):
            self._proc.send_signal(signal.SIGUSR1)
            await asyncio.sleep(0.3)
        return _user_frames(list(self.stderr_tail)[before:])

    async def _cancel(self, job_id: str, pending: _Pending) -> None:
        """Cancel frame first; kill if the worker does not stop within a second."""
        if self._proc is not None and self._proc.stdin is not None:
            with contextlib.suppress(Exception):
                self._proc.stdin.write(protocol.encode_frame(protocol.Cancel(job_id=job_id)))
                await self._proc.stdin.drain()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(pending.future), 1.0)
                self._mark_idle()
                return
        await self.kill()

    async def kill(self) -> None:
        """End the process and its reader tasks."""
        self._set_state(WorkerState.DEAD)
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def shutdown(self) -> None:
        """Ask the worker to exit; kill it if it lingers."""
        if (
            self._proc is not None
            and self._proc.stdin is not None
            and self.state is WorkerState.READY
        ):
            with contextlib.suppress(Exception):
                self._proc.stdin.write(protocol.encode_frame(protocol.Shutdown()))
                await self._proc.stdin.drain()
                await asyncio.wait_for(self._proc.wait(), 2.0)
        await self.kill()


class Launcher:
    """Runs jobs on one persistent worker, replacing it when it dies; one job at a time.

    With a `remote`, the worker runs there: the project's files are shipped with each job
    (or found in the remote's workdir) and the traces come back into the request's
    trace_dir."""

    def __init__(
        self,
        python: str | None = None,
        prefix: Sequence[str] = (),
        env: dict[str, str] | None = None,
        start_timeout: float = 90.0,
        respawn: bool = True,
        remote: Remote | None = None,
        clean_timing: CleanTiming = "auto",
    ) -> None:
        self.remote = remote
        # An ssh remote gets its clean worker there (a second session); a command prefix may
        # allocate a GPU per worker (srun) and Ray runs jobs, not workers: none for those.
        elsewhere = prefix or (remote is not None and remote.kind != "ssh")
        self.clean_timing: CleanTiming = "never" if elsewhere else clean_timing
        self._timer: WorkerProcess | None = None  # the worker that never profiles
        self._timer_starting: asyncio.Task[WorkerReady] | None = None
        self.python = remote.python if remote else python or sys.executable
        self.prefix = list(prefix)
        self.env = env
        self.start_timeout = start_timeout
        self.respawn = respawn
        self._worker: WorkerProcess | None = None
        self._starting: asyncio.Task[WorkerReady] | None = None
        self._lock = asyncio.Lock()
        self._profiled_best: float | None = None  # the profiles' reference loops' fastest (µs)

    def host_best_us(self) -> float | None:
        """The reference loop at its best in this launcher's workers (each at its start, each
        profile's timing): the host's CPU speed at its best (µs), None before any."""
        seen = [
            w.ready.reference_us
            for w in (self._worker, self._timer)
            if w is not None and w.ready is not None and w.ready.reference_us
        ]
        seen += [self._profiled_best] if self._profiled_best else []
        return min(seen) if seen else None

    @property
    def argv(self) -> list[str]:
        """The command line that starts a worker (RemoteError for a remote that cannot)."""
        if self.remote is not None:
            return self.remote.worker_argv(BOOTSTRAP)
        return [*self.prefix, self.python, "-u", "-c", BOOTSTRAP]

    @property
    def _local(self) -> bool:
        """Whether the workers are this machine's processes (signals reach them)."""
        return self.remote is None and not self.prefix

    @property
    def worker(self) -> WorkerProcess | None:
        """The current worker, if any."""
        return self._worker

    def start(self) -> asyncio.Task[WorkerReady]:
        """Start a worker in the background (idempotent); await the task for WorkerReady."""
        if self._starting is None or (
            self._starting.done()
            and (self._worker is None or self._worker.state is WorkerState.DEAD)
        ):
            self._worker = WorkerProcess(self.argv, self.env, self.remote)
            self._starting = asyncio.create_task(self._worker.start(self.start_timeout))
            self._starting.add_done_callback(_seen)  # a failed background start is not an error
        if self.clean_timing == "always" or (
            self.clean_timing == "auto" and (self.remote is not None or gpu_here())
        ):
            self._start_timer()
        return self._starting

    def _start_timer(self) -> asyncio.Task[WorkerReady] | None:
        """Start the worker that never profiles beside the profiling one (idempotent), so a
        host-bound call's clean timing does not wait for a second start after the first job
        (``import torch`` and CUDA's start are 5-7 s on an H200); None where there is none."""
        if self.clean_timing == "never":
            return None
        if self._timer_starting is None or (
            self._timer_starting.done()
            and (self._timer is None or self._timer.state is WorkerState.DEAD)
        ):
            if self.remote is not None:  # the variable goes there, in the command line
                argv = self.remote.worker_argv(BOOTSTRAP, {TIMING_WORKER_ENV: CLEAN_WORKER})
                self._timer = WorkerProcess(argv, self.env, self.remote)
            else:
                env = dict(os.environ if self.env is None else self.env)
                env[TIMING_WORKER_ENV] = CLEAN_WORKER
                self._timer = WorkerProcess(self.argv, env)
            self._timer_starting = asyncio.create_task(self._timer.start(self.start_timeout))
            self._timer_starting.add_done_callback(_seen)
        return self._timer_starting

    async def _timer_started(self) -> None:
        """Wait for the clean worker's start, so it is not starting (importing torch) while
        a job is measured; a failed start is the clean timing's to report, not the job's."""
        task = self._timer_starting
        if task is not None and not task.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(task)

    async def profile(
        self,
        request: RunProfile,
        on_progress: ProgressCallback | None = None,
        timeout: float = 120.0,
    ) -> JobResult:
        """Run one job; JobFailed says why it produced no profile."""
        stages: dict[str, float] = {}
        if self.remote is not None:
            request = await self._remote_request(request)
        in_place = request.entry is not None and request.entry.in_place
        if in_place and self.clean_timing != "never":
            finished, ready = await self._run_unwarmed(request, on_progress, timeout, stages)
        else:
            finished, ready = await self._run(request, on_progress, timeout, stages)
        assert isinstance(finished, ProfileFinished)
        loop = finished.sidecar.timing.reference_us
        if loop and (self._profiled_best is None or loop < self._profiled_best):
            self._profiled_best = loop
        again = not in_place and (  # in place, the steps before the profiler are timed
            self.clean_timing == "always" or (self.clean_timing == "auto" and host_bound(finished))
        )
        if again:
            t = time.perf_counter()
            finished = await self._time_cleanly(request, finished, on_progress, timeout)
            stages["clean timing"] = time.perf_counter() - t
        if request.return_traces:
            t = time.perf_counter()
            try:
                finished = await asyncio.to_thread(keep_traces, finished, Path(request.trace_dir))
            except (ShipError, OSError) as e:
                raise JobFailed(failure("internal", f"cannot keep the traces: {e}")) from None
            stages["transfer"] = time.perf_counter() - t
        return JobResult(finished, ready, stages)

    async def _run_unwarmed(
        self,
        request: RunProfile,
        on_progress: ProgressCallback | None,
        timeout: float,
        stages: dict[str, float],
    ) -> tuple[JobOutcome, WorkerReady]:
        """An in-place job, in the worker that has not profiled: the program's calls before
        the profiler starts are its unprofiled timing, and a process that has profiled once
        runs host-bound code slower for good (nanoGPT's loop: +49 % compiled, about 2x eager,
        on the H200). The worker ends after the job, as every in-place worker does."""
        async with self._lock:
            t = time.perf_counter()
            timer = await self._clean_worker()
            stages["worker start"] = time.perf_counter() - t
            ready = timer.ready
            assert ready is not None  # a started worker said what it runs on
            request = _with_host_best(request, self.host_best_us())
            outcome = await timer.run(request, on_progress, timeout, self._local)
            return outcome, ready

    async def _time_cleanly(
        self,
        request: RunProfile,
        finished: ProfileFinished,
        on_progress: ProgressCallback | None,
        timeout: float,
    ) -> ProfileFinished:
        """Time the call again in the worker that never profiles; on any failure keep the
        profiling worker's timing (and log why)."""
        job = timing_request(request, finished, self.host_best_us())
        progress = clean_progress(on_progress)

        async def run() -> JobOutcome:
            timer = await self._clean_worker()
            return await timer.run(job, progress, timeout, self._local)

        async with self._lock:
            return await timed_again(finished, run, "profiling worker's")

    async def try_variants(
        self,
        request: RunTry,
        on_progress: ProgressCallback | None = None,
        timeout: float = 300.0,
    ) -> tuple[TryFinished, WorkerReady]:
        """Time the function and its variants in turns, unprofiled; JobFailed says why not.
        Here, in the worker that never profiles (a profiling session slows host-bound code
        in its process, the baseline with it)."""
        if self.remote is not None:
            request = await self._remote_request(request)
        if self.clean_timing == "never":
            request = _with_host_best(request, self.host_best_us())
            outcome, ready = await self._run(request, on_progress, timeout)
        else:
            async with self._lock:
                try:
                    timer = await self._clean_worker()
                    request = _with_host_best(request, self.host_best_us())
                    outcome = await timer.run(request, on_progress, timeout, self._local)
                except JobFailed as e:
                    raise self._named(e, request) from None
                ready = timer.ready
                assert ready is not None  # a started worker said what it runs on
        assert isinstance(outcome, TryFinished)
        return outcome, ready

    async def _clean_worker(self) -> WorkerProcess:
        """The worker that never profiles, started with the profiling one, or now if it
        died since (hold the lock)."""
        task = self._start_timer()
        assert task is not None and self._timer is not None
        await asyncio.shield(task)
        return self._timer

    async def _remote_request(self, request: R) -> R:
        """Ship the project's files (or name the workdir) and ask for the traces back."""
        assert self.remote is not None
        try:
            return await asyncio.to_thread(remote_request, request, self.remote)
        except ShipError as e:
            raise JobFailed(failure(e.kind, f"{self.remote.label}: {e}")) from None

    async def calibrate(
        self, request: RunCalibration, timeout: float = 300.0
    ) -> tuple[CalibrationFinished, WorkerReady]:
        """Measure the GPU's ceilings on the worker; JobFailed says why not."""
        measured, ready = await self._run(request, None, timeout)
        assert isinstance(measured, CalibrationFinished)
        return measured, ready

    async def _run(
        self,
        request: RunProfile | RunTry | RunCalibration,
        on_progress: ProgressCallback | None,
        timeout: float,
        stages: dict[str, float] | None = None,
    ) -> tuple[JobOutcome, WorkerReady]:
        async with self._lock:
            t = time.perf_counter()
            try:
                ready = await self.start()
            except JobFailed as e:
                raise self._named(e, request) from None
            await self._timer_started()
            waited = time.perf_counter() - t
            if stages is not None and waited > 0.001:  # a worker started (or finished) for it
                stages["worker start"] = waited
            worker = self._worker
            assert worker is not None
            try:
                outcome = await worker.run(request, on_progress, timeout, self._local)
            except JobFailed as e:
                if worker.state is WorkerState.DEAD and self.respawn:
                    self.start()
                raise self._named(e, request) from None
            return outcome, ready

    def _named(self, error: JobFailed, request: RunProfile | RunCalibration) -> JobFailed:
        """A remote worker's failure with the remote's name, and crash paths made local."""
        remote, failed = self.remote, error.failure
        if remote is None:
            return error
        if failed.kind in _WORKER_KINDS and not failed.message.startswith("remote "):
            failed = msgspec.structs.replace(failed, message=f"{remote.label}: {failed.message}")
        if failed.kind == "crash" and failed.path and isinstance(request, RunProfile):
            failed = msgspec.structs.replace(
                failed, path=local_path(failed.path, Path(request.project_root))
            )
        return JobFailed(failed)

    @property
    def warm(self) -> bool:
        """A launcher keeps its worker up between jobs."""
        return True

    async def restart(self) -> None:
        """Replace the worker now (after a settings change, say)."""
        if not self.warm:
            return
        async with self._lock:
            if self._worker is not None:
                await self._worker.kill()
            await self._stop_timer_start()
            if self._timer is not None:
                await self._timer.kill()
                self._timer = None
            self._starting = None
            self.start()

    async def close(self) -> None:
        """Shut the worker down."""
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
            with contextlib.suppress(BaseException):
                await self._starting
        await self._stop_timer_start()
        if self._worker is not None:
            await self._worker.shutdown()
        if self._timer is not None:
            await self._timer.shutdown()

    async def _stop_timer_start(self) -> None:
        """Cancel the clean worker's start if it is still under way."""
        task, self._timer_starting = self._timer_starting, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def gpu_here() -> bool:
    """Whether this machine has a GPU driver's device node (NVIDIA's, or ROCm's): only there
    can a call be host-bound on a GPU and need the clean worker (a CPU machine starts it on
    first use, for ``try``)."""
    return any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/kfd"))


def _with_host_best(request: R, best: float | None) -> R:
    """`request` with the host's best reference loop, unless it names one already."""
    if best is None or request.host_reference_us is not None:
        return request
    return msgspec.structs.replace(request, host_reference_us=best)


def _seen(task: asyncio.Task[WorkerReady]) -> None:
    """Mark a start's failure as retrieved: the next job awaits a new start and reports it."""
    if not task.cancelled():
        task.exception()


def local_path(remote_path: str, root: Path) -> str:
    """A path on a remote host as the user's local file: the longest tail of it that names a
    file under `root` (faulthandler's dumps carry the remote's paths)."""
    parts = Path(remote_path).parts
    for i in range(1, len(parts)):
        candidate = root.joinpath(*parts[i:])
        if candidate.is_file():
            return str(candidate)
    return remote_path


def _parse_fault(lines: list[str]) -> tuple[str | None, str | None, int | None]:
    """faulthandler's cause and innermost frame (first listed: most recent call first)."""
    what: str | None = None
    path: str | None = None
    line: int | None = None
    for text in lines:
        kind = _FAULT_KIND.match(text)
        if kind:
            what = kind.group("what")
        frame = _FAULT_FRAME.match(text)
        if frame and path is None and _is_user_path(frame.group("path")):
            path, line = frame.group("path"), int(frame.group("line"))
    return what, path, line


def _user_frames(lines: list[str]) -> list[tuple[str, int]]:
    """faulthandler's frames in user files, innermost first (as it lists them)."""
    out: list[tuple[str, int]] = []
    for text in lines:
        frame = _FAULT_FRAME.match(text)
        if frame and _is_user_path(frame.group("path")):
            out.append((frame.group("path"), int(frame.group("line"))))
    return out


def _is_user_path(path: str) -> bool:
    return not (
        "kernelscope_worker" in path
        or "site-packages" in path
        or "/lib/python" in path
        or path.startswith("<")
    )
