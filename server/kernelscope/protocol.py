"""The server <-> worker contract: msgspec Structs, 4-byte length-prefixed JSON frames.

The worker (stdlib + torch only) writes the same JSON with ``json``; every message is a
tagged Struct (``"type"`` field). Changes are additive: new fields get defaults.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

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
    loop_line: int = 0
    """In place: the `for`/`while` statement whose iterations are the steps (0: calls)."""
    body_line: int = 0
    """The first line of that loop's body: each time it runs an iteration begins."""
    save: bool = False
    """Save the captured call under the project's .kernelscope/captures/ (local runs)."""
    capture: str | None = None
    """A saved capture to replay instead of running the program (the clean worker's)."""

    @property
    def label(self) -> str:
        """How the user wrote it: ``train.py --max_iters 20``."""
        head = {"module": ["-m", self.target], "pytest": ["pytest", self.target]}.get(
            self.kind, [self.target]
        )
        return " ".join([*head, *self.args])


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


class RunTiming(RunProfile, tag="run_timing"):
    """Only the unprofiled timing of the same call, for a worker that never profiles."""


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
    "clean_timing": "timing in a worker that never profiled",
    "analysis": "analysis",
}


#: A rank of a distributed job: torchrun's variables, set by engine/ranks.py for each worker.
DIST_RANK, DIST_WORLD_SIZE, DIST_LOCAL_RANK = "RANK", "WORLD_SIZE", "LOCAL_RANK"
DIST_MASTER_ADDR, DIST_MASTER_PORT = "MASTER_ADDR", "MASTER_PORT"
#: Seconds a collective waits before it fails (on its line) instead of hanging.
DIST_TIMEOUT_ENV = "KERNELSCOPE_DIST_TIMEOUT"


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
    "clean_timing": 90,
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


class UnprofiledTiming(msgspec.Struct):
    """The same call timed without the profiler (median of reps)."""

    us_per_call: float
    method: str
    reps: int
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


class MemoryStats(msgspec.Struct):
    """Device memory high-water marks over the warmed steps."""

    peak_allocated_bytes: int
    peak_reserved_bytes: int


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


class ProfileFinished(Message, tag="profile_finished"):
    """The job ran; the trace is at trace_path on the worker's host."""

    job_id: str
    trace_path: str
    sidecar: Sidecar
    output: str = ""
    output_truncated: bool = False
    traces: dict[str, bytes] = {}  # file name -> gzip'd trace (base64 in JSON), when asked
    worker_ends: bool = False
    """The worker ends after this result (it ran a program): the launcher replaces it."""


class ProfileFailed(Message, tag="profile_failed"):
    """The job could not run; kind names the cause, path/line point into the user's code."""

    job_id: str
    kind: str
    message: str
    path: str | None = None
    line: int | None = None
    traceback: list[str] = []
    output: str = ""
    hint: str | None = None
    worker_ends: bool = False


class TimingFinished(Message, tag="timing_finished"):
    """The unprofiled timing of a RunTiming job."""

    job_id: str
    timing: UnprofiledTiming
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


ToWorker = RunProfile | RunTiming | RunTry | RunCalibration | Cancel | Shutdown
FromWorker = (
    WorkerReady
    | JobProgress
    | ProfileFinished
    | ProfileFailed
    | CalibrationFinished
    | TimingFinished
    | TryFinished
)
JobOutcome = ProfileFinished | CalibrationFinished | TimingFinished | TryFinished


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
