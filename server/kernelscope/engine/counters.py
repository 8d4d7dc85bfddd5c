"""Hardware counters for one warm call: a worker of its own started under Nsight Compute.

``ncu --profile-from-start off`` measures only between cudaProfilerStart and Stop, which the
worker's RunCounters job puts around one call after warming it. ncu's own lines go to its log
file (``--log-file``), so the worker's stdout carries only frames, as for any worker; the
bootstrap reads the program from stdin, which ncu passes through to the process it starts.
The log (a raw CSV page) is returned for the analysis to read; nothing here parses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from kernelscope.engine.clean_timing import TIMING_WORKER_ENV
from kernelscope.engine.kernel_choice import DEFAULT_KERNELS
from kernelscope.engine.launcher import WorkerProcess
from kernelscope.engine.runner import JobFailed
from kernelscope.protocol import (
    NCU_CACHE_CONTROL,
    NCU_METRICS,
    CountersFinished,
    RunCounters,
    RunProfile,
    Shutdown,
    encode_frame,
)
from kernelscope.worker import BOOTSTRAP

NCU_URL = "https://developer.nvidia.com/nsight-compute"
#: NVIDIA's page for ERR_NVGPUCTRPERM (counters restricted to admin users).
COUNTER_ACCESS_URL = (
    "https://developer.nvidia.com/nvidia-development-tools-solutions-"
    "ERR_NVGPUCTRPERM-permission-issue-performance-counters"
)
NO_COUNTER_ACCESS = (
    "ERR_NVGPUCTRPERM: this user may not read the GPU's performance counters; run as root (or "
    "with CAP_SYS_ADMIN), or allow every user with `options nvidia "
    "NVreg_RestrictProfilingToAdminUsers=0` in a file under /etc/modprobe.d/ and a reboot "
    f"(see {COUNTER_ACCESS_URL})"
)
NO_NCU = (
    "--counters needs Nsight Compute's `ncu` on PATH (it comes with the CUDA toolkit, or from "
    f"{NCU_URL})"
)
#: Never replayed: NCCL kernels wait on their peers, which ncu does not replay with them.
#: Every function name but those starting with "nccl", without a lookahead (whatever regex
#: flavour ncu has, and whether it searches or matches the whole name).
NOT_NCCL = "regex:^([^n]|n[^c]|nc[^c]|ncc[^l]).*$|^(n|nc|ncc)$"


class CountersUnavailable(Exception):
    """Why no counters were measured, in one line."""


@dataclass
class NcuRun:
    """What one run under ncu left: its log (the raw CSV page), its wall time, and the
    metrics this GPU lacks (left out of the run)."""

    log: str
    seconds: float
    launch_count: int
    missing: list[str]


def find_ncu(path: str | None = None) -> str:
    """ncu's path; CountersUnavailable when it is not on ``path`` (default: $PATH)."""
    ncu = shutil.which("ncu", path=path)
    if ncu is None:
        raise CountersUnavailable(NO_NCU)
    return ncu


def kernel_filter(functions: Sequence[str] = ()) -> str:
    """ncu's ``--kernel-name``: these functions (their names with or without a namespace,
    whether ncu searches or matches whole names), else every function but NCCL's."""
    if not functions:
        return NOT_NCCL
    return f"regex:^(.*::)?({'|'.join(functions)})$"


def ncu_argv(
    ncu: str,
    python: str,
    log_file: str,
    metrics: Sequence[str],
    launch_count: int,
    functions: Sequence[str] = (),
) -> list[str]:
    """The command line of a worker under ncu: ranged by cudaProfilerStart/Stop, clocks left
    as they run, caches flushed before each kernel (NCU_CACHE_CONTROL), raw CSV to log_file;
    only `functions`' kernels where given (kernel_filter)."""
    return [
        ncu,
        "--profile-from-start",
        "off",
        "--clock-control",
        "none",
        "--cache-control",
        NCU_CACHE_CONTROL,
        "--target-processes",
        "all",
        "--kernel-name-base",
        "function",
        "--print-kernel-base",
        "demangled",
        "--kernel-name",
        kernel_filter(functions),
        "--launch-count",
        str(launch_count),
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--metrics",
        ",".join(metrics),
        "--log-file",
        log_file,
        python,
        "-u",
        "-c",
        BOOTSTRAP,
    ]


async def available_metrics(ncu: str, timeout: float = 60.0) -> tuple[list[str], list[str]]:
    """NCU_METRICS split into those this machine's GPU has and those it lacks (an unknown
    metric fails a whole run). CountersUnavailable on no counter access or no answer."""
    proc = await asyncio.create_subprocess_exec(
        ncu,
        "--query-metrics",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise CountersUnavailable(
            f"`ncu --query-metrics` did not answer within {timeout:g} s"
        ) from None
    text = out.decode("utf-8", "replace")
    return split_metrics(text)


def split_metrics(query: str) -> tuple[list[str], list[str]]:
    """NCU_METRICS by whether ``ncu --query-metrics`` lists their base name. Counter access
    refused there raises CountersUnavailable with its message."""
    if "ERR_NVGPUCTRPERM" in query:
        raise CountersUnavailable(NO_COUNTER_ACCESS)
    listed = {line.split()[0] for line in query.splitlines() if line.strip()}
    have = [m for m in NCU_METRICS if m.split(".")[0] in listed]
    if not have:
        first = next((ln.strip() for ln in query.splitlines() if ln.strip()), "no output")
        raise CountersUnavailable(f"`ncu --query-metrics` lists none of the metrics: {first}")
    return have, [m for m in NCU_METRICS if m not in have]


async def run_under_ncu(
    request: RunProfile,
    python: str,
    timeout: float = 300.0,
    launch_count: int = DEFAULT_KERNELS,
    ncu_path: str | None = None,
    start_timeout: float = 120.0,
    functions: Sequence[str] = (),
) -> NcuRun:
    """The request's call, warmed then ranged once, in a worker started under ncu; waits for
    ncu to exit and returns its log. CountersUnavailable (no ncu, no access, a timeout) or
    JobFailed (the call itself failed)."""
    ncu = find_ncu(ncu_path)
    t0 = time.perf_counter()
    metrics, missing = await available_metrics(ncu)
    env = dict(os.environ)
    env[TIMING_WORKER_ENV] = "1"  # never starts torch.profiler: CUPTI is ncu's here
    with tempfile.TemporaryDirectory(prefix="kernelscope-ncu-") as tmp:
        log_file = str(Path(tmp) / "ncu.csv")
        argv = ncu_argv(ncu, python, log_file, metrics, launch_count, functions)
        worker = _NcuWorker(argv, env)
        job = msgspec.convert(
            msgspec.structs.asdict(request) | {"job_id": request.job_id + "-c"}, RunCounters
        )
        deadline = t0 + timeout
        try:
            await worker.start(start_timeout)
            left = max(deadline - time.perf_counter(), 1.0)
            outcome = await worker.run(job, None, left, True)
            assert isinstance(outcome, CountersFinished)
            await worker.finish(max(deadline - time.perf_counter(), 5.0))
        except JobFailed as e:
            await worker.kill()
            why = ncu_failure(_read(log_file))
            if why is not None:
                raise CountersUnavailable(why) from None
            if e.failure.kind == "timeout":
                raise CountersUnavailable(
                    f"the run under Nsight Compute took longer than {timeout:g} s (each "
                    "measured kernel is replayed once per pass; fewer kernels: a smaller "
                    "launch count)"
                ) from None
            raise
        except TimeoutError:
            await worker.kill()
            raise CountersUnavailable(
                f"Nsight Compute did not finish within {timeout:g} s of its start"
            ) from None
        return NcuRun(_read(log_file), time.perf_counter() - t0, launch_count, missing)


def ncu_failure(log: str) -> str | None:
    """One line for what went wrong in an ncu log (its first ``==ERROR==`` line), or None."""
    if "ERR_NVGPUCTRPERM" in log:
        return NO_COUNTER_ACCESS
    errors = [ln.strip() for ln in log.splitlines() if ln.startswith("==ERROR==")]
    if errors:
        return "Nsight Compute: " + errors[0].removeprefix("==ERROR==").strip()
    return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


class _NcuWorker(WorkerProcess):
    """A worker whose end is awaited: ncu writes its results as its target exits."""

    async def finish(self, timeout: float) -> None:
        """Ask the worker to exit and wait for ncu to end (TimeoutError past ``timeout``)."""
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.write(encode_frame(Shutdown()))
                await proc.stdin.drain()
                proc.stdin.close()
        await asyncio.wait_for(proc.wait(), timeout)
        await self.kill()
