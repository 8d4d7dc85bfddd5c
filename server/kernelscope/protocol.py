"""The server <-> worker contract: msgspec Structs, 4-byte length-prefixed JSON frames.

The worker (stdlib + torch only) writes the same JSON with ``json``; every message is a
tagged Struct (``"type"`` field). Changes are additive: new fields get defaults.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, Literal

import msgspec

FRAME_HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 256 * 1024 * 1024


class Message(msgspec.Struct, tag_field="type", forbid_unknown_fields=False):
    """Base of every frame."""


# --- server -> worker: imperative requests ---------------------------------------------


#: torch.profiler's schedule(wait, warmup, active) when none is given: one step skipped,
#: three warm, five recorded.
DEFAULT_WAIT, DEFAULT_WARMUP, DEFAULT_ACTIVE = 1, 3, 5


class Entry(msgspec.Struct):
    """The program that calls the function: the worker runs it as the user would and takes
    the function's `call`-th call (from `caller` only, when given) as the one to profile."""

    kind: str
    """script | module | pytest."""
    target: str
    """The script's path, the module's dotted name, or the pytest node id."""
    args: list[str] = []
    """The program's own arguments (its sys.argv[1:])."""
    cwd: str = ""
    """The working directory it runs in (the user's, the workspace folder)."""
    call: int = 1
    caller: str | None = None
    """`path:line` of the only call site counted (an absolute path)."""
    first_line: int = 0
    """The function's first line (its first decorator's, else its def): where its code
    object starts, so the worker knows it however the program imports it."""
    def_line: int = 0
    """Its def line (where failures point)."""
    no_compile: bool = False
    """Disable torch.compile (dynamo) while the program runs."""
    in_place: bool = False
    """Profile the program's own calls (or loop iterations) as the steps, not replays."""
    skip: int = 5
    """In place: steps before the profiler starts (the first is the cold one, the others
    are timed without the profiler)."""
    settle: bool = False
    """In place: time more steps past `skip` while they are still settling (--skip not
    given)."""
    finish: bool = False
    """In place: let the program run on to its end after the profiled steps (the result
    comes then), instead of stopping it there (--no-stop-after)."""
    loop_line: int = 0
    """In place: the `for`/`while` statement whose iterations are the steps (0: calls)."""
    body_line: int = 0
    """The first line of that loop's body: each time it runs an iteration begins."""
    end_line: int = 0
    """The last line of that loop's body: a line of the loop's code outside `loop_line` to
    this one, or its code's return, is the loop's exit, which ends the iteration in
    progress (0: not known, the next iteration ends it)."""
    save: bool = False
    """Save the captured call under the project's .kernelscope/captures/ (local runs)."""
    capture: str | None = None
    """A saved capture to replay instead of running the program (the clean worker's)."""
    rebatch: int = 0
    """Replay the captured call with its batch dimension resized to this many rows (the
    memory forecast of a program's call; 0: as captured)."""
    keep_mb: int = 0
    """Without --save: keep the capture under .kernelscope/captures/ when it is at most this
    many MB (local runs), so the next profile replays it while the program is unchanged."""
    rerun_why: str = ""
    """Why a capture kept of this call was not replayed (its program's files changed)."""
    ranks: int = 0
    """The ranks a torchrun command line asked for (its --nproc-per-node), or the processes
    of an ``accelerate launch`` (0: no launcher). kernelscope starts them itself."""
    launcher: str = ""
    """The launcher's words as the user wrote them, where not torchrun's
    (``accelerate launch --mixed_precision bf16``): how the call line names the program."""
    env: dict[str, str] = {}
    """What the launcher sets in the program's environment (accelerate's settings), set
    before the program runs."""

    @property
    def label(self) -> str:
        """How the user wrote it: ``train.py --max_iters 20``."""
        head = {"module": ["-m", self.target], "pytest": ["pytest", self.target]}.get(
            self.kind, [self.target]
        )
        launcher = [f"torchrun --nproc-per-node {self.ranks}"] if self.ranks else []
        launcher = [self.launcher] if self.launcher else launcher
        return " ".join([*launcher, *head, *self.args])


class RunProfile(Message, tag="run_profile"):
    """Profile one function: cold call, warmed schedule, unprofiled timing, line pass."""

    job_id: str
    path: str
    qualname: str
    module_name: str
    project_root: str
    trace_dir: str
    source: str | None = None
    device: str = "auto"
    wait: int = DEFAULT_WAIT
    warmup: int = DEFAULT_WARMUP
    active: int = DEFAULT_ACTIVE
    timing_reps: int = 0
    line_pass: bool = True
    memory_pass: bool = True
    """One more warm call with the allocator's history on: where the memory goes, by line."""
    with_stack: bool = True
    record_shapes: bool = True
    provider: str | None = None
    batch_size: int | None = None
    inputs_module: str | None = None
    """Where input providers are looked for after the target's module and the
    `kernelscope_inputs.py` beside it and at the root ([tool.kernelscope] inputs_module)."""
    # Remote jobs. `path` and `project_root` stay the user's local paths; the worker runs the
    # project from `files` (relative path -> text, written to a content-addressed folder on
    # its host) or from `remote_root` (a remote's workdir), and maps paths back to local ones
    # in what it returns. With `return_traces`, traces come back in ProfileFinished.traces
    # and `trace_dir` is where the server keeps them.
    files: dict[str, str] = {}
    remote_root: str | None = None
    return_traces: bool = False
    entry: Entry | None = None
    """Run this program and profile the function as it calls it (no input provider)."""
    host_reference_us: float | None = None
    """The reference loop at its best in the other processes of this host (the workers' at
    their start, the profiling worker's timing: ``UnprofiledTiming.reference_us``): this
    host's CPU speed at its best, against which a timing slowed throughout is seen (the
    clean worker's timing, try's rounds, and in place the steps before the profiler)."""
    timing_min_s: float | None = None
    """Seconds of calls the unprofiled timing takes at least (None: the workers' own, 0.5 s
    in both). For measuring the loop's cost against the
    timing's accuracy (bench/loop_latency.py --timing-min-s); nothing sets it otherwise."""


class RunTiming(RunProfile, tag="run_timing"):
    """Only the unprofiled timing of the same call, for a worker that never profiles."""


class RunCounters(RunProfile, tag="run_counters"):
    """Warm the same call, then make one more inside cudaProfilerStart/Stop, for the worker
    started under Nsight Compute (``ncu --profile-from-start off``)."""


class RunTry(RunProfile, tag="run_try"):
    """Time the function and variants of it on the same inputs, in turns, unprofiled."""

    variants: list[str] = []
    """compile, graphs, tf32, bf16, channels_last, batch2 (VARIANTS)."""
    budget_s: float = 2.0
    """Seconds of timed calls, all candidates together (at least `rounds` rounds)."""
    rounds: int = 7


#: The experiments a RunTry can run, in the order they are offered.
VARIANTS = ("compile", "graphs", "tf32", "bf16", "channels_last", "batch2")
VARIANT_LABELS = {
    "compile": "torch.compile",
    "graphs": "CUDA Graphs",
    "tf32": "TF32",
    "bf16": "bf16 autocast",
    "channels_last": "channels_last",
    "batch2": "batch ×2",
}


class RunCalibration(Message, tag="run_calibration"):
    """Measure the device's matmul and copy ceilings."""

    job_id: str
    device: str = "cuda"
    size: int = 8192
    reps: int = 20
    copy_bytes: int = 2**30


class Cancel(Message, tag="cancel"):
    """Stop the running job; the worker answers ProfileFailed(kind='cancelled')."""

    job_id: str


class Shutdown(Message, tag="shutdown"):
    """Exit after the current job."""


# --- worker -> server: past-tense events ------------------------------------------------


class DeviceInfo(msgspec.Struct):
    """One accelerator as the worker's torch sees it."""

    index: int
    name: str
    total_memory: int = 0
    multi_processor_count: int = 0
    capability: str = ""


class WorkerReady(Message, tag="worker_ready"):
    """First frame: what the worker runs on."""

    pid: int
    hostname: str
    python: str
    executable: str
    torch: str | None
    cuda: str | None
    devices: list[DeviceInfo] = []
    cuda_init_us: float | None = None
    platform: str = ""
    reference_us: float | None = None
    """A pure-Python reference loop's fastest run once the worker started (µs): the host's CPU
    speed then, one reading of ``host_reference_us`` for the launcher's later jobs."""


#: Each JobProgress stage as the CLI and the editor name it, in the order a job runs them:
#: the worker sends the first ten, the launcher ``clean_timing``, the job service ``analysis``.
STAGE_LABELS = {
    "entry": "running the program to the call",
    "import": "importing",
    "inputs": "building inputs",
    "cold": "cold call",
    "timing": "unprofiled timing",
    "variants": "building the variants",
    "wait": "wait",
    "warmup": "warmup",
    "active": "active",
    "export": "exporting the trace",
    "lines": "line attribution",
    "memory": "memory pass",
    "clean_timing": "timing in a worker that never profiled",
    "counters": "hardware counters (Nsight Compute)",
    "analysis": "analysis",
}


#: A rank of a distributed job: torchrun's variables, set by engine/ranks.py for each worker.
DIST_RANK, DIST_WORLD_SIZE, DIST_LOCAL_RANK = "RANK", "WORLD_SIZE", "LOCAL_RANK"
DIST_MASTER_ADDR, DIST_MASTER_PORT = "MASTER_ADDR", "MASTER_PORT"
#: Seconds a collective waits before it fails (on its line) instead of hanging.
DIST_TIMEOUT_ENV = "KERNELSCOPE_DIST_TIMEOUT"
#: Where a program's ranks (--via on N ranks) agree on their counts: a TCP store of
#: kernelscope's own, apart from the program's process group, so no agreement of ours can
#: meet a collective of the program's.
DIST_AGREE_PORT_ENV = "KERNELSCOPE_AGREE_PORT"


#: How far along a job is at each stage: a progress bar's percentage (editor, MCP server).
PERCENT = {
    "entry": 5,
    "import": 5,
    "inputs": 10,
    "cold": 15,
    "timing": 20,
    "variants": 20,
    "wait": 25,
    "warmup": 35,
    "active": 50,
    "export": 75,
    "lines": 85,
    "memory": 88,
    "clean_timing": 90,
    "counters": 92,
    "analysis": 95,
}


class JobProgress(Message, tag="job_progress"):
    """A stage of a job (a key of STAGE_LABELS), with its step count where it has one."""

    job_id: str
    stage: str
    step: int = 0
    total: int = 0


class ColdCall(msgspec.Struct):
    """The first call of the function in this job, measured apart from the warmed steps."""

    first_call_us: float
    entry_to_first_kernel_us: float | None = None
    process_fresh: bool = False
    trace_path: str | None = None
    compile_us: float | None = None
    """Time torch.compile spent compiling during the cold call (dynamo's own timing)."""
    warmup_calls: int = 0
    """The calls of the warm-up after it, back to back as a loop warms up (the user's time
    in the same stage); 0 before 2026-12-05."""


class GpuSample(msgspec.Struct):
    """NVML's view of the GPU over the unprofiled timing (medians of readings every 20 ms)."""

    samples: int
    sm_clock_mhz: float
    sm_clock_max_mhz: float
    mem_clock_mhz: float
    mem_clock_max_mhz: float
    power_w: float
    utilization_pct: float
    memory_utilization_pct: float = 0.0
    clock_event_reasons: int = 0
    """NVML's clocks-event (throttle) reasons seen in any reading, as a bit mask."""


class ThreadUse(msgspec.Struct):
    """One thread of the timing's process, over the timed calls."""

    name: str
    """As the system names it (``pt_autograd_0``: autograd's thread for device 0)."""
    cpu: int
    """The CPU it last ran on."""
    cpu_s: float
    """CPU seconds it spent (in ticks of the system's clock, 10 ms on Linux)."""
    timing: bool = False
    """The thread that made the calls."""
    wait_s: float = 0.0
    """Seconds it was ready to run and waited for a CPU (Linux schedstat): the host busy
    with other work, or more of this process's threads than CPUs free for them."""


class Settling(msgspec.Struct):
    """In place, where --skip was not given: the timed steps go on past --skip's 5 to 20
    (unless they took 5 s), then while they still speed up (the median of the window before
    the last over 1.15x the last)."""

    first: int
    """The first step the figure is of (the steps before it were still settling)."""
    left_out: int
    """Timed steps left out of the figure as still settling."""
    left_out_us: float | None
    """Their median (µs)."""
    steady: bool
    """Whether the steps kept agreed; False: still changing when the timing stopped (at
    most 45 more steps, or 10 s of them)."""
    added: int
    """Steps timed past the minimum while they still sped up (the figure is of ``reps``
    steps from ``first``)."""
    minimum: int = 0
    """Steps timed past --skip's default to time 20 (a timing of its own times as many
    calls), unless they took 5 s."""


class SlowedSpells(msgspec.Struct):
    """The timed calls the host slowed: blocks of calls whose median ran more than SLOWED
    (1.3) times a fast block's (the one a fifth of the blocks beat; or all, where the timing
    thread's reference loop never came within SLOWED of the host's best)."""

    share: float
    """Of the timed calls."""
    factor: float
    """How much slower than that fast block those blocks ran: the median over their calls
    (before 2026-12-05 afternoon, over the blocks: a one-call block weighed as much as a
    block of 40)."""
    us_per_call: float
    """The median of those calls."""
    reps: int
    left_out: bool
    """Whether they were left out of the median (they are while a quarter of the calls
    remain)."""
    kept_because: Literal["", "most slowed", "not slower"] = ""
    """Why they were kept in: most calls ran slowed; "not slower" (they ran faster than the
    others) only in timings made before 2026-12-04 night, when a reference loop judged them."""

    def kept(self, reps: int) -> int:
        """Of `reps` timed calls, those the median and the spread are of."""
        return reps - self.reps if self.left_out else reps

    @property
    def throughout(self) -> bool:
        """Whether every timed call ran slowed (no fast block: the thread's reference loops
        against the host's best judged them), so all are kept and the figure reads high."""
        return self.share >= 1.0 and not self.left_out


class UnprofiledTiming(msgspec.Struct):
    """The same call timed without the profiler (median of reps)."""

    us_per_call: float
    method: str
    reps: int
    warmup_calls: int = 0
    """The calls of the warm-up before the timed ones; 0 before 2026-12-05."""
    samples_us: list[float] = []
    host_us_per_call: float | None = None
    p10_us: float | None = None
    p90_us: float | None = None
    gpu: GpuSample | None = None
    process: str = "profiling worker"
    """Where it was timed: the ``profiling worker`` after its profiler sessions, or a
    ``clean worker`` that never ran the profiler (its host timings are not slowed)."""
    profiling_worker_us_per_call: float | None = None
    """The profiling worker's own median, when a clean worker's replaced it."""
    replayed_from: str = ""
    """For a program's call timed in a clean worker: ``saved capture`` (loaded from the file)
    or ``program run again`` (no capture, or it could not be loaded: ``replay_note`` says)."""
    replay_note: str = ""
    traced: str = ""
    """In place on Python before 3.12, how the tracer that found the steps slowed them."""
    window_s: list[float] = []
    """When the timed calls ran (start, end), in seconds of the worker host's monotonic clock
    (``time.monotonic()``): to line the figure up with other measurements of that host."""
    slowed: SlowedSpells | None = None
    """Calls timed while the host ran this thread's CPU slower, apart from the median."""
    reference_us: float | None = None
    """The fastest reference loop of the timing (µs): the timing thread's CPU speed at its
    best, comparable between processes on one host (~40 µs on the lent H200's)."""
    host_reference_us: float | None = None
    """In the clean worker: the profiling worker's ``reference_us``, the host's best: where
    this thread's own best never came within SLOWED of it, the thread ran slowed for all of
    its timing."""
    threads: list[ThreadUse] = []
    """The process's threads that ran during the timed calls (Linux), busiest first: a
    training step's backward runs on autograd's own thread, and where the host puts it
    beside the calling thread can move the figure (on the lent H200 a checkpointed step, both
    threads pinned to one vCPU or to two: 4.1 or 6.5 ms in one pair of processes)."""
    children_cpu_s: float | None = None
    """CPU seconds the process's child processes (a DataLoader's workers) spent while the
    calls were timed (Linux); None where not read."""
    loader_us_per_call: float | None = None
    """The DataLoader's ``next()`` inside the timed calls, µs per call (the iterators'
    ``__next__`` timed on the timing thread); None where none ran there."""
    loader_share: float | None = None
    """That time's share of the timed calls' summed time: the profiler's range around each
    ``next()`` gives it only as the profiler inflated it."""
    loader_sources: list[str] = []
    """``PATH::QUALNAME`` of what those ``next()`` ran: the dataset's ``__getitem__`` (through
    torch's Subset and ConcatDataset) and a collate_fn not torch's."""
    settling: Settling | None = None
    """In place: how the timed steps settled (None: --skip was given, on ranks, or too few
    steps to judge)."""
    minor_faults_per_call: float | None = None
    """The process's minor page faults per timed call (getrusage; None where unknown)."""
    user_us_per_call: float | None = None
    """Its user CPU time per timed call, all its threads (µs)."""
    system_us_per_call: float | None = None
    """Its system CPU time per timed call (µs): page faults, memory given back to the OS."""
    resident_growth_per_call: float | None = None
    """How much its resident memory grew per timed call (bytes; /proc/self/statm)."""
    page_bytes: int | None = None
    """The host's page size (the faults' unit)."""


class LineStat(msgspec.Struct):
    """Per-step cost of one executed source line in the user's files."""

    path: str
    line: int
    self_cpu_us: float
    cpu_total_us: float
    cuda_us: float = 0.0
    cuda_total_us: float = 0.0
    hits: float = 0.0
    syncs: int = 0
    sync_wait_us: float = 0.0
    top_ops: list[str] = []
    tracer_us: float = 0.0
    """The line tracer's own cost taken out of ``self_cpu_us`` (per call)."""


class LineTracerCost(msgspec.Struct):
    """What ``sys.settrace`` and a range per line cost per line run, measured on a
    calibration loop at the start of the line pass and taken out of the lines' CPU times."""

    in_line_us: float
    """Inside a line's range: out of its self time."""
    between_lines_us: float
    """Between two ranges: out of the calling line's self time."""
    hits: int
    """Line runs the calibration measured."""


class StepSite(msgspec.Struct):
    """In place: a line of the program the function's timed calls came from."""

    path: str
    line: int
    calls: int
    """The figure's timed calls from this line."""
    median_us: float
    """Their median (µs)."""


class CallSite(msgspec.Struct):
    """Which call of which program a run measured."""

    via: str
    """The program as the user wrote it (``train.py config/tiny.py --max_iters=20``)."""
    call: int
    """The call's number (counting only calls from the caller, when one was named)."""
    caller_path: str | None = None
    caller_line: int | None = None
    modes: list[str] = []
    """The state the call ran in and its replays keep: train/eval, no_grad, autocast, ..."""
    captured: bool = True
    """The arguments were captured at the call and the call replayed (not run in place)."""
    entry_s: float = 0.0
    """Seconds the program ran before the call."""
    wrote: list[str] = []
    """Files in the program's folder it created or changed before the call (at most 10)."""
    settled_s: float = 0.0
    """Seconds waited, before timing, for the program's child processes (DataLoader
    workers filling their queues) to stop using the CPU."""
    saved: str | None = None
    """With --save: the file the capture was saved to."""
    save_error: str | None = None
    """With --save: why it could not be saved (the argument named)."""
    reused: bool = False
    """Replayed from the saved capture (`saved`): the program and its files had not changed,
    so it did not run."""
    kept: bool = False
    """`saved` / `save_error` are of the automatic keep (no --save)."""
    step: str = "call"
    """What one step is: a ``call`` of the function, or an ``iteration`` of a loop."""
    sites: list[StepSite] = []
    """In place, where the figure's timed calls came from more than one line of the program
    (the nearest line of the user's code on the stack): each line's; empty otherwise."""
    rerun_why: str = ""
    """Why the program ran again where a capture of this call was kept (what changed)."""

    @property
    def label(self) -> str:
        """``via train.py, call 3 from model.py:181, train mode, captured``."""
        parts = [f"via {self.via}"]
        if self.captured:
            parts.append(f"call {self.call}")
            if self.caller_path and self.caller_line:
                parts[-1] += f" from {Path(self.caller_path).name}:{self.caller_line}"
        parts += self.modes
        parts.append("captured" if self.captured else "in place")
        if self.reused:
            parts.append("from the saved capture (the program did not run)")
        return ", ".join(parts)


#: Nsight Compute's metrics for ``--counters`` (those the GPU lacks are left out: an unknown
#: metric fails the whole run). FLOPs by pipe: the tensor pipe's ``sm__ops_path_tensor_*``
#: count math ops (2 per multiply-add), the SASS counters count thread instructions (an FMA is
#: 2 FLOPs; an HFMA2 on half2 counts once, so FP16 here is a lower bound).
NCU_METRICS = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_sectors_srcunit_tex_op_write.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp16.sum",
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp8.sum",
    "sm__ops_path_tensor_src_fp64.sum",
    "sm__ops_path_tensor_src_int8.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hfma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dfma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dmul_pred_on.sum",
)
#: ``--cache-control all``: ncu flushes the caches before each kernel, so every kernel starts
#: from a cold L2 and DRAM bytes are an upper bound of what it moves in the program.
NCU_CACHE_CONTROL = "all"


class KernelCounters(msgspec.Struct):
    """One kernel's hardware counters, read by Nsight Compute on one warm call."""

    name: str
    duration_us: float
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    l2_write_bytes: float | None = None
    """What the SMs wrote into L2 (32-byte sectors). Under ``--cache-control all`` a kernel's
    reads come from DRAM but an output that fits the L2 stays there, dirty, and reaches DRAM
    only after the kernel ends, charged to no kernel."""
    tensor_flops: float | None = None
    fp32_flops: float | None = None
    fp16_flops: float | None = None
    fp64_flops: float | None = None
    sm_pct: float | None = None
    """sm__throughput: % of the SMs' speed of light."""
    memory_pct: float | None = None
    """gpu__compute_memory_throughput: % of the memory system's speed of light."""
    occupancy_pct: float | None = None
    """sm__warps_active: achieved occupancy, % of the warps an SM can hold."""
    nvtx: str = ""

    @property
    def dram_bytes(self) -> float | None:
        """DRAM bytes read and written."""
        if self.dram_read_bytes is None and self.dram_write_bytes is None:
            return None
        return (self.dram_read_bytes or 0.0) + (self.dram_write_bytes or 0.0)

    @property
    def moved_bytes(self) -> float | None:
        """The kernel's memory traffic: DRAM bytes read, and what it wrote (into L2 where
        measured, which DRAM takes after the kernel ends, else DRAM's own count)."""
        if self.dram_read_bytes is None and self.dram_write_bytes is None:
            return None
        written = max(self.dram_write_bytes or 0.0, self.l2_write_bytes or 0.0)
        return (self.dram_read_bytes or 0.0) + written

    @property
    def flops(self) -> float | None:
        """FLOPs of every pipe together."""
        parts = [self.tensor_flops, self.fp32_flops, self.fp16_flops, self.fp64_flops]
        known = [p for p in parts if p is not None]
        return sum(known) if known else None


class Counters(msgspec.Struct):
    """What ``--counters`` measured: one warm call's kernels under Nsight Compute, or why not."""

    kernels: list[KernelCounters] = []
    error: str = ""
    """One line when nothing was measured (no ncu, no counter access, a CPU run, a timeout)."""
    seconds: float = 0.0
    """Wall time of the run under ncu, its start included."""
    cache_control: str = NCU_CACHE_CONTROL
    launch_count: int = 0
    """At most this many kernels of the call were measured (ncu's --launch-count)."""
    missing_metrics: list[str] = []
    """Metrics of NCU_METRICS this GPU does not have."""
    functions: list[str] = []
    """For a call of more kernels than ``launch_count``: the kernel functions measured, its
    costliest by the profile's own kernel times; empty: its first ``launch_count`` kernels."""
    match: str = ""
    """The pattern the measured functions were chosen by (``--counters-match``); empty: by
    their times alone."""
    left_out: dict[str, int] = {}
    """Functions the pattern matched whose launches (the values) did not fit."""


class MemoryStats(msgspec.Struct):
    """Device memory high-water marks over the warmed steps."""

    peak_allocated_bytes: int
    peak_reserved_bytes: int


class MemoryLine(msgspec.Struct):
    """One line's memory in the memory pass's call: what it holds at the peak (by kind) and
    what it allocated and freed over the call. ``path`` "" is no line of the user's: ``via``
    says what (``autograd engine thread``, ``outside your files``, ``before the call``)."""

    path: str
    line: int
    via: str = ""
    """"backward": made by the backward of this line's forward op (sequence numbers)."""
    live_at_peak_bytes: int = 0
    kinds: dict[str, int] = {}
    """Bytes live at the peak by kind: parameters, gradients, optimizer_state, activations,
    temporaries."""
    allocated_bytes: int = 0
    freed_bytes: int = 0
    allocations: int = 0
    device_allocs: int = 0
    """Allocations that made the caching allocator take memory from the device (cudaMalloc)."""
    device_alloc_bytes: int = 0


class KernelLaunch(msgspec.Struct):
    """A user's Triton kernel as its launches in the cold call were passed tensors: the
    bytes of those tensors bound the bytes one launch can move (each read or written once)."""

    name: str
    launches: int
    bytes_per_launch: float
    tensors: int


class BlockMaskDensity(msgspec.Struct):
    """A flex_attention BlockMask the process held after the cold call: its (B, H, Q_LEN,
    KV_LEN), block size, and the % of blocks it skips (``BlockMask.sparsity()``)."""

    shape: list[int]
    block_size: list[int]
    sparsity: float


class OptimizerList(msgspec.Struct):
    """One tensor list of an optimizer's step, as torch.optim groups them (per parameter
    group, per device and dtype): its trainable parameters, their elements, and the chunks
    of at most 65,536 elements a multi-tensor kernel runs over them (one block each)."""

    optimizer: str
    device: str
    dtype: str
    tensors: int
    elements: int
    chunks: int


class MemoryPass(msgspec.Struct):
    """Where the memory of one warm call went (the memory pass, after the timed steps)."""

    source: str
    """``cuda allocator history`` or ``profiler memory events (CPU)``."""
    peak_allocated_bytes: int
    baseline_bytes: int
    """Allocated before the call (what the warm worker already held)."""
    call_us: float = 0.0
    approximate: list[str] = []
    """Which figures the source can only approximate, and why."""
    peak_reserved_bytes: int | None = None
    reserved_before_bytes: int | None = None
    reserved_at_peak_bytes: int | None = None
    trace_peak_bytes: int = 0
    """The peak of the recorded events' running total (agrees with peak_allocated_bytes
    unless entries were dropped)."""
    peak_at_us: float = 0.0
    baseline_at_peak_bytes: int = 0
    baseline_kinds: dict[str, int] = {}
    """What was held before the call and still at the peak, by kind (``other``: the rest)."""
    kinds_at_peak: dict[str, int] = {}
    """The call's own allocations live at the peak, by kind."""
    kinds_after_call: dict[str, int] = {}
    """Parameters, gradients and optimizer state the live objects hold when the call has
    returned (gradients made in the backward may not exist yet at the peak)."""
    lines: list[MemoryLine] = []
    lines_left_out: int = 0
    timeline: list[tuple[float, int]] = []
    """(µs from the call's start, bytes allocated), at most 200 points."""
    by_run: list[int] = []
    """The highest bytes allocated in each run of allocations and frees made by one line,
    in order (neighbours merged pairwise to at most 512): two batch sizes' calls that run
    the same lines in the same order line up run by run."""
    runs_signature: str = ""
    """A digest of the runs' lines, equal when two calls' runs line up."""
    device_allocs: int | None = None
    """The allocator's own counters over the call (num_device_alloc / num_device_free)."""
    device_frees: int | None = None
    entries: int = 0
    truncated: bool = False
    objects: list[str] = []
    """Types of the modules and optimizers whose storages gave the kinds."""
    free_bytes: int | None = None
    """The room a fresh process like this one has for the call: ``mem_get_info``'s free
    plus this process's own reserve (CUDA), or MemAvailable plus the baseline (CPU)."""
    total_bytes: int | None = None
    error: str = ""
    """Why the pass could not measure (its own failure; the profile stands)."""
    oom_request_bytes: int | None = None
    """At an out-of-memory (ProfileFailed.memory_at_failure): the allocation that failed."""

    @property
    def reserved_unused_at_peak_bytes(self) -> int | None:
        """Reserved but not allocated at the peak (fragmentation and cache)."""
        if self.reserved_at_peak_bytes is None:
            return None
        return max(self.reserved_at_peak_bytes - self.trace_peak_bytes, 0)


class Sidecar(msgspec.Struct):
    """What the trace lacks: FLOPs, memory, cold call, line attribution, device properties."""

    function_line: int
    device_type: str
    device_name: str
    device_index: int | None
    device_properties: dict[str, Any]
    wait: int
    warmup: int
    active: int
    cold: ColdCall
    timing: UnprofiledTiming
    wall_us_per_step: float
    """An active step's wall time, profiled: of a call (in place, each call's own, not the
    program's time between calls), or of a loop's iteration."""
    lines: list[LineStat] = []
    line_tracer: LineTracerCost | None = None
    """The tracer's cost per line run, taken out of ``lines`` (None: left in, or no pass)."""
    memory: MemoryStats | None = None
    torch: str | None = None
    cuda: str | None = None
    python: str = ""
    hostname: str = ""
    path: str = ""
    qualname: str = ""
    stages_s: dict[str, float] = {}
    """Seconds the worker spent in each stage of the job (import, inputs, cold, ...)."""
    call_site: CallSite | None = None
    """Set when an entry point's call was profiled."""
    counters: Counters | None = None
    """Set by ``--counters`` (the server adds it after the job): measured per-kernel figures."""
    inputs_from: str = ""
    """Where the call's inputs came from: ``defaults`` (the function's own), or its input
    provider as ``file::name`` (the file relative to the project root); "" for a program's
    call and for workers before 2026-12-02."""
    memory_pass: MemoryPass | None = None
    """Where the memory of one warm call went; None with --no-memory."""
    launches: list[KernelLaunch] = []
    """The user's Triton kernels launched by the cold call, with their tensors' bytes."""
    block_masks: list[BlockMaskDensity] = []
    """flex_attention's block masks alive after the cold call, with their density."""
    optimizer_lists: list[OptimizerList] = []
    """The tensor lists of the optimizers that stepped in the cold call (worker/program/
    optimizers.py); [] before 2026-12-05."""
    recording_note: str = ""
    """Why the schedule was recorded otherwise than asked (fewer active steps, or without
    shapes, as its events would not have fit in memory); "" when as asked."""
    asked_steps: list[int] | None = None
    """The (wait, warmup, active) steps requested, where the worker profiled fewer (each
    call is long, or its events would not fit; ``wait``/``warmup``/``active`` are those it
    ran); None: as asked."""
    schedule_note: str = ""
    """Why the schedule has fewer steps than asked because each call is long (the profiled
    calls kept within KERNELSCOPE_PROFILED_SECONDS); "" when it is not, and from workers
    before 2026-12-03."""


def inputs_label(inputs_from: str) -> str:
    """How a function called alone got its inputs, for labels: ``inputs from
    kernelscope_inputs.py::Block_forward_inputs``, ``with its default arguments``, or (not
    recorded) ``inputs from a provider or defaults``."""
    if inputs_from == "defaults":
        return "with its default arguments"
    return f"inputs from {inputs_from or 'a provider or defaults'}"


class ProfileFinished(Message, tag="profile_finished"):
    """The job ran; the trace is at trace_path on the worker's host."""

    job_id: str
    trace_path: str
    sidecar: Sidecar
    output: str = ""
    """What the function printed (a program's run: all the program printed)."""
    output_truncated: bool = False
    traces: dict[str, bytes] = {}  # file name -> gzip'd trace (base64 in JSON), when asked
    worker_ends: bool = False
    """The worker ends after this result (it ran a program): the launcher replaces it."""
    setup_output: str = ""
    """What importing the function's module and calling its input provider printed."""
    setup_output_truncated: bool = False


class ProfileFailed(Message, tag="profile_failed"):
    """The job could not run; kind names the cause, path/line point into the user's code."""

    job_id: str
    kind: str
    message: str
    path: str | None = None
    line: int | None = None
    traceback: list[str] = []
    output: str = ""
    """What the function printed (all of it was the import's and the provider's when the
    job stopped before the call: that is in ``setup_output``)."""
    hint: str | None = None
    worker_ends: bool = False
    setup_output: str = ""
    """What importing the function's module and calling its input provider printed."""
    memory_at_failure: MemoryPass | None = None
    """A CUDA out-of-memory run again with the allocator's history on: what was live at the
    highest point before the failure, by line and kind."""


class TimingFinished(Message, tag="timing_finished"):
    """The unprofiled timing of a RunTiming job."""

    job_id: str
    timing: UnprofiledTiming
    output: str = ""
    worker_ends: bool = False


class CountersFinished(Message, tag="counters_finished"):
    """A RunCounters job's ranged call is done (Nsight Compute measured it meanwhile)."""

    job_id: str
    warm_us_per_call: float = 0.0
    """The warm-up's steady time per call before the ranged one (µs)."""
    output: str = ""
    worker_ends: bool = False


class VariantOutcome(msgspec.Struct):
    """One variant of a RunTry: its time per call in each round, what it cost once, and how
    its results compare with the function's."""

    name: str
    status: str
    """ok | failed | skipped."""
    why: str = ""
    path: str | None = None
    line: int | None = None
    rounds_us: list[float] = []
    items: int = 1
    """Items per call relative to the baseline (batch2: 2)."""
    one_time_s: float | None = None
    one_time_what: str = ""
    """compile | first call."""
    results: str = ""
    """equal | changed | not compared: why."""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    """The largest absolute error over the largest magnitude of the reference tensor."""
    tolerance: str = ""
    why_changed: str = ""


class TryFinished(Message, tag="try_finished"):
    """The rounds of a RunTry: the function's own and each variant's."""

    job_id: str
    device_type: str
    device_name: str
    method: str
    baseline_rounds_us: list[float]
    variants: list[VariantOutcome]
    output: str = ""
    worker_ends: bool = False
    slowed_rounds: int = 0
    """Rounds left out: the host slowed the timing thread's CPU during one of their blocks
    (a pure-Python loop after one of their blocks ran more than 1.3x the thread's best, or the
    host's where that was faster)."""
    slowed_kept: int = 0
    """Rounds slowed as `slowed_rounds` says but kept in: too few ran at full speed to leave
    them out (a thread slowed throughout)."""
    reference_us: float | None = None
    """The timing thread's reference loop at its best (µs)."""
    host_reference_us: float | None = None
    """RunTry.host_reference_us, as the job had it."""
    call_site: CallSite | None = None
    """With a program (--via): the call the variants were tried on."""


class CalibrationFinished(Message, tag="calibration_finished"):
    """Measured ceilings of one GPU: TFLOP/s per matmul dtype, copy GB/s."""

    job_id: str
    device_name: str
    total_memory: int
    bf16_tflops: float
    fp16_tflops: float
    tf32_tflops: float
    fp32_tflops: float
    copy_gbps: float
    method: str = ""


ToWorker = RunProfile | RunTiming | RunCounters | RunTry | RunCalibration | Cancel | Shutdown
FromWorker = (
    WorkerReady
    | JobProgress
    | ProfileFinished
    | ProfileFailed
    | CalibrationFinished
    | TimingFinished
    | CountersFinished
    | TryFinished
)
JobOutcome = ProfileFinished | CalibrationFinished | TimingFinished | CountersFinished | TryFinished


def failure(kind: str, message: str, **fields: object) -> ProfileFailed:
    """A failure the launcher (not a worker) reports: no job id, the other fields as given."""
    return msgspec.convert(
        {"job_id": "", "kind": kind, "message": message, **fields}, ProfileFailed
    )


_to_worker_encoder = msgspec.json.Encoder()
_from_worker_decoder = msgspec.json.Decoder(FromWorker)
_to_worker_decoder = msgspec.json.Decoder(ToWorker)


def encode_frame(message: ToWorker) -> bytes:
    """Length-prefixed JSON for one request."""
    body = _to_worker_encoder.encode(message)
    return FRAME_HEADER.pack(len(body)) + body


def decode_from_worker(body: bytes) -> FromWorker:
    """Decode one worker frame's body (raises msgspec.ValidationError on a bad frame)."""
    return _from_worker_decoder.decode(body)


def decode_to_worker(body: bytes) -> ToWorker:
    """Decode one request body (used by tests and tools that speak for the server)."""
    return _to_worker_decoder.decode(body)
