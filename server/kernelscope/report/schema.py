"""The report's schema: one Struct with everything the CLI prints and the editor shows, and
the smaller one `analyze` prints for a trace with no sidecar."""

from __future__ import annotations

import msgspec

from kernelscope import __version__
from kernelscope.analysis.collectives import Communication
from kernelscope.analysis.functions import FunctionTime
from kernelscope.analysis.ops import OpStat
from kernelscope.analysis.roofline import OpRoof
from kernelscope.analysis.verdict import Verdict
from kernelscope.findings import Finding
from kernelscope.protocol import (
    CallSite,
    Counters,
    GpuSample,
    LineStat,
    LineTracerCost,
    MemoryPass,
    Settling,
    SlowedSpells,
    ThreadUse,
)


class FunctionRef(msgspec.Struct):
    """The profiled function."""

    path: str
    qualname: str
    line: int


class DeviceRef(msgspec.Struct):
    """Where it ran."""

    type: str
    name: str
    index: int | None = None
    threads: int | None = None
    """On the CPU, torch's intra-op threads (``torch.get_num_threads()``) in the worker."""


class Runner(msgspec.Struct):
    """The worker that ran it."""

    remote: str | None
    host: str
    python: str
    torch: str | None
    cuda: str | None = None
    executable: str = ""


class Steps(msgspec.Struct):
    """The profiler schedule."""

    wait: int
    warmup: int
    active: int
    asked: list[int] | None = None
    """The (wait, warmup, active) requested, where the worker profiled fewer (long calls,
    or events that would not fit in memory); None: as asked."""
    recording: str = ""
    """Why the steps were recorded otherwise than asked (fewer active steps, or without
    shapes, as their events would not have fit in memory); "" when as asked."""
    fitted: str = ""
    """Why the steps are fewer than asked because each call is long (the profiled calls
    kept within KERNELSCOPE_PROFILED_SECONDS); "" when they are not."""


class Timing(msgspec.Struct):
    """Per-step and per-call times; the unprofiled figure is the honest one for small ops."""

    cpu_us_per_step: float
    cuda_us_per_step: float
    wall_us_per_step: float
    unprofiled_us_per_call: float
    unprofiled_method: str
    unprofiled_reps: int
    host_us_per_call: float | None = None
    unprofiled_p10_us: float | None = None
    unprofiled_p90_us: float | None = None
    gpu: GpuSample | None = None
    """NVML's readings over the unprofiled timing (clocks, power, utilization)."""
    unprofiled_process: str = "profiling worker"
    """Where the unprofiled timing ran: a ``clean worker`` never ran the profiler."""
    profiling_worker_us_per_call: float | None = None
    replayed_from: str = ""
    """A program's call timed in the clean worker: ``saved capture`` or ``program run again``."""
    replay_note: str = ""
    unprofiled_traced: str = ""
    """In place on Python before 3.12, how the tracer that found the steps slowed them."""
    unprofiled_window_s: list[float] = []
    """When the timed calls ran (start, end), on the worker host's ``time.monotonic()``."""
    unprofiled_slowed: SlowedSpells | None = None
    """The timed calls the host slowed (this thread's CPU ran slower), kept apart."""
    unprofiled_reference_us: float | None = None
    """The timing thread's pure-Python reference loop at its best (µs): its CPU's speed,
    comparable between processes of one host."""
    unprofiled_threads: list[ThreadUse] = []
    """The threads that ran during the timed calls (Linux): name, last CPU, CPU seconds,
    seconds waiting for a CPU."""
    unprofiled_children_cpu_s: float | None = None
    """CPU seconds the worker's child processes (the program's DataLoader workers) spent
    while the calls were timed (Linux)."""
    unprofiled_loader_us_per_call: float | None = None
    """The DataLoader's ``next()`` inside the timed calls, µs per call; None where none ran."""
    unprofiled_loader_share: float | None = None
    """Its share of the timed calls' time."""
    host_reference_us: float | None = None
    """The host's best reference loop (µs; the launcher's workers' at their start and the
    profiling worker's timing), against which a timing slowed throughout is seen: the clean
    worker's, and in place the steps before the profiler."""
    unprofiled_settling: Settling | None = None
    """In place: the timed steps left out while the program's steps settled."""
    unprofiled_minor_faults_per_call: float | None = None
    """The process's minor page faults per timed call."""
    unprofiled_user_us_per_call: float | None = None
    """Its user CPU time per timed call, all its threads (µs)."""
    unprofiled_system_us_per_call: float | None = None
    """Its system CPU time per timed call (µs)."""
    unprofiled_resident_growth_per_call: float | None = None
    """How much its resident memory grew per timed call (bytes)."""
    host_page_bytes: int | None = None
    """The host's page size."""


class DeadWindow(msgspec.Struct):
    """The cold first call, kept out of the warmed numbers."""

    first_call_us: float
    entry_to_first_kernel_us: float | None
    process_fresh: bool = False
    cuda_init_us: float | None = None
    compile_us: float | None = None
    """torch.compile's compile time inside the first call."""


OpRow = OpStat  # one op over the active steps (totals, like key_averages)


#: A line's CPU time with the tracer's cost taken out is known to within this share of that
#: cost: on pure-Python lines run thousands of times a call, what was left over the line
#: timed directly was 0-3.6 % of the cost taken out (docs/cpu-run/line_tracer_2026-12-03.txt;
#: README, per-line attribution).
TRACER_NOISE = 0.05


class LineRow(LineStat):
    """One source line's cost per call, with the line's text."""

    code: str = ""
    tracer_noise_us: float = 0.0
    """How far ``self_cpu_us`` may be off: ``TRACER_NOISE`` of the tracer's cost taken out of
    it. A line whose self time is below it is cheaper than the line pass can tell."""

    @property
    def below_noise(self) -> bool:
        """Whether the line's own time is lost in the tracer's (it is at most the noise)."""
        return self.tracer_noise_us > 0 and self.self_cpu_us < self.tracer_noise_us


class TraceRef(msgspec.Struct):
    """Where the traces are."""

    path: str
    cold_path: str | None = None


class Memory(msgspec.Struct):
    """Device memory peaks over the active steps."""

    peak_allocated_bytes: int
    peak_reserved_bytes: int


class Report(msgspec.Struct):
    """A finished profile, as `--json` prints it."""

    function: FunctionRef
    device: DeviceRef
    runner: Runner
    steps: Steps
    timing: Timing
    dead_window: DeadWindow
    ops: list[OpRow]
    lines: list[LineRow]
    trace: TraceRef
    memory: Memory | None = None
    verdict: Verdict | None = None
    findings: list[Finding] = []
    warnings: list[str] = []
    output: str = ""
    """What the function printed (with ``call_site``: what the program printed)."""
    output_truncated: bool = False
    created: str = ""
    kernelscope: str = __version__
    roofline: list[OpRoof] = []
    stages_s: dict[str, float] = {}
    communication: Communication | None = None
    """The collectives the function ran (in a process group), per call."""
    call_site: CallSite | None = None
    """Which call of which program the run measured (``--via``)."""
    line_tracer: LineTracerCost | None = None
    """The line tracer's own cost per line run, taken out of ``lines`` (None: left in)."""
    counters: Counters | None = None
    """``--counters``: Nsight Compute's figures for one warm call, or why there are none."""
    memory_pass: MemoryPass | None = None
    """Where one warm call's memory went, by line and kind (None with --no-memory)."""
    setup_output: str = ""
    """What importing the module and calling the input provider printed, kept apart from
    the function's ``output``."""
    setup_output_truncated: bool = False
    inputs_from: str = ""
    """Where the call's inputs came from (``Sidecar.inputs_from``)."""


class FunctionRow(FunctionTime):
    """A function of the trace's Python frames, with where it is in the local project."""

    local_path: str | None = None
    """The local file the recorded path names (None: no file under the root ends with it)."""
    qualname: str = ""
    """Its qualified name in the local file ("" when the file has no def of that name)."""
    local_line: int | None = None
    """Its def line in the local file."""
    moved: bool = False
    """The local def starts on another line than the recorded one (the file changed)."""
    ties: int = 0
    """How many local files matched the recorded path equally well (the first is taken)."""


class Functions(msgspec.Struct):
    """Time per function from a trace's ``python_function`` frames (``with_stack=True``),
    totals over the trace. Lines inside functions are not in a trace: they need a live run."""

    rows: list[FunctionRow]
    frames_seen: int
    """The trace's Python frames, the user's and the libraries' (0: recorded without stacks)."""
    root: str
    """The local folder the recorded paths were matched under."""
    gpu_us: float = 0.0
    gpu_outside_us: float = 0.0
    """GPU work launched outside every function listed (backward runs on autograd's threads)."""


class TraceAnalysis(msgspec.Struct):
    """`analyze` of a trace with no sidecar: what the trace alone supports."""

    trace: TraceRef
    steps: int
    device: str | None
    verdict: Verdict
    findings: list[Finding]
    dead_window: dict[str, float | None]
    ops: list[OpRow]
    warnings: list[str] = []
    kernelscope: str = __version__
    roofline: list[OpRoof] = []
    calls_found_by: str = ""
    """How the calls were found: ks:call, profiler steps, annotations, or the whole trace."""
    communication: Communication | None = None
    functions: Functions | None = None
    """Time per function of the user's code, from the trace's Python frames."""
