# pyright: basic
"""RunTry: the function and variants of it (torch.compile, CUDA Graphs, TF32, bf16,
channels_last, batch ×2) on the same inputs, timed in turns, unprofiled; each variant's
results compared with the function's."""

import platform
import time

from .dynamo import compile_seconds, dynamo_frames
from .errors import Cancelled, JobError
from .inputs import find_inputs, provider_of
from .timing import warm_up

TRY_BUDGET_S = 2.0  # of timed calls, all candidates together
TRY_MIN_ROUNDS = 7
TRY_MAX_ROUNDS = 40
TRY_BLOCK_US = 5000.0  # each timed block: this long, in up to 50 calls
#: Tolerances by the reference's dtype (rtol, atol): torch.testing's defaults for half types,
#: looser than its 1.3e-6 for float32 because a fused or reordered reduction (torch.compile)
#: legitimately differs there in the last digits.
TOLERANCES = {
    "torch.float64": (1e-7, 1e-7),
    "torch.float32": (1e-4, 1e-5),
    "torch.float16": (1e-3, 1e-5),
    "torch.bfloat16": (1.6e-2, 1e-5),
}


def detach_outputs(torch, value):
    """The tensors in a result (nested tuples, lists, dicts, dataclass-like objects), detached
    copies in call order, so later calls cannot change them."""
    found = []

    def walk(v, depth=0):
        if depth > 6:
            return
        if isinstance(v, torch.Tensor):
            found.append(v.detach().clone())
        elif isinstance(v, dict):
            for x in v.values():
                walk(x, depth + 1)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x, depth + 1)
        elif hasattr(v, "__dict__") and not isinstance(v, type) and not callable(v):
            for x in vars(v).values():
                walk(x, depth + 1)

    walk(value)
    return found


def compare_outputs(torch, reference, outputs):
    """Whether `outputs` equal `reference` within the tolerances of each tensor's dtype, and
    the largest absolute and relative errors."""
    if len(reference) != len(outputs):
        return {
            "results": "changed",
            "equal": False,
            "why_changed": "%d tensors, not %d" % (len(outputs), len(reference)),
        }
    max_abs = max_rel = 0.0
    equal = True
    tolerance = ""
    for ref, out in zip(reference, outputs):
        if ref.shape != out.shape:
            return {
                "results": "changed",
                "equal": False,
                "why_changed": "shape %s, not %s" % (tuple(out.shape), tuple(ref.shape)),
            }
        if not (ref.is_floating_point() or ref.is_complex()):
            same = bool(torch.equal(ref.to(out.device), out.to(ref.dtype)))
            equal = equal and same
            continue
        rtol, atol = TOLERANCES.get(str(ref.dtype), (1e-4, 1e-5))
        tolerance = tolerance or "rtol %g, atol %g (%s)" % (
            rtol,
            atol,
            str(ref.dtype).replace("torch.", ""),
        )
        r = ref.float()
        o = out.to(ref.device).float()
        diff = (o - r).abs()
        if diff.numel():
            # Against the tensor's scale, not element by element: a reordered bf16 sum moves
            # values near zero by more than rtol of themselves, and that is not a change.
            worst = float(diff.nan_to_num(float("inf")).max())
            scale = float(r.abs().max())
            max_abs = max(max_abs, worst)
            max_rel = max(max_rel, worst / max(scale, atol))
            equal = equal and worst <= atol + rtol * scale
    return {
        "results": "equal" if equal else "changed",
        "equal": equal,
        "max_abs_err": max_abs,
        "max_rel_err": max_rel,
        "tolerance": tolerance,
    }


def channels_last(torch, args, kwargs):
    """Copies of the inputs with 4-d tensors and modules with 4-d weights in channels_last
    (the originals untouched, so the baseline keeps its layout); whether any changed."""
    import copy

    changed = [False]

    def conv(v):
        if isinstance(v, torch.Tensor) and v.dim() == 4:
            changed[0] = True
            return v.contiguous(memory_format=torch.channels_last)
        if isinstance(v, torch.nn.Module) and any(p.dim() == 4 for p in v.parameters()):
            changed[0] = True
            return copy.deepcopy(v).to(memory_format=torch.channels_last)
        if isinstance(v, (list, tuple)):
            return type(v)(conv(x) for x in v)
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v

    new_args = [conv(a) for a in args]
    new_kwargs = {k: conv(v) for k, v in kwargs.items()}
    return new_args, new_kwargs, changed[0]


def run_try(job):
    """Time the function and variants of it (torch.compile, CUDA Graphs, TF32, ...) on the
    same inputs, in turns, unprofiled; compare each variant's results with the function's."""
    torch = job.torch
    if job.entry:
        raise JobError(
            "bad_entry", "try does not take a program (--via) yet: give the function a provider"
        )
    fn, base, device, sync = job.prepare()
    module, owner, args, kwargs = job.loaded
    cuda = device.type == "cuda"
    job.progress("cold")
    warm_up(job, base, sync)
    reference = detach_outputs(torch, base())
    sync()
    again = detach_outputs(torch, base())
    sync()
    steady = compare_outputs(torch, reference, again)["equal"]
    candidates = [("baseline", base, 1)]
    variants = []
    names = list(job.req.get("variants") or [])
    for i, name in enumerate(names):
        job.progress("variants", i + 1, len(names))
        built = build_variant(job, name, module, fn, owner, args, kwargs, device, sync)
        if "call" not in built:
            variants.append(built)
            continue
        entry = built.pop("call"), built.pop("items")
        if built.get("outputs") is not None and built.pop("comparable", True):
            if steady:
                built.update(compare_outputs(torch, reference, built.pop("outputs")))
            else:
                built.pop("outputs")
                built["results"] = "not compared: the function's results change from call to call"
        else:
            built.pop("outputs", None)
            built.setdefault("results", "not compared: other inputs")
        candidates.append((name, entry[0], entry[1]))
        variants.append(built)
    job.progress("timing")
    rounds, grew = timed_rounds(job, candidates, sync, cuda, device)
    by_name = {v["name"]: v for v in variants}
    for name, _call, items in candidates[1:]:
        v = by_name[name]
        v["rounds_us"] = rounds[name]
        v["items"] = items
        if grew.get(name):
            v["status"] = "failed"
            v["why"] = (
                "torch.compile compiled it again %d times while it was timed: it "
                "recompiles (guards fail) on calls like these" % grew[name]
            )
    job.progress("done")
    return {
        "type": "try_finished",
        "job_id": job.id,
        "device_type": device.type,
        "device_name": torch.cuda.get_device_name(device)
        if cuda
        else platform.processor() or "cpu",
        "method": "cuda_events" if cuda else "perf_counter",
        "baseline_rounds_us": rounds["baseline"],
        "variants": variants,
    }


def build_variant(job, name, module, fn, owner, args, kwargs, device, sync):
    """One variant, built and called once (its one-time cost), or why it cannot run."""
    torch = job.torch
    cuda = device.type == "cuda"
    out = {"name": name, "status": "ok", "why": ""}
    if name in ("graphs", "tf32") and not cuda:
        out.update(status="skipped", why="needs a CUDA device (this job runs on %s)" % device.type)
        return out
    items = 1
    comparable = True
    try:
        if name == "compile":
            compiled = torch.compile(fn)
            call = job.guarded(compiled, args, kwargs)
        elif name == "graphs":
            compiled = torch.compile(fn, mode="reduce-overhead")
            call = job.guarded(compiled, args, kwargs)
        elif name == "tf32":
            if torch.backends.cuda.matmul.allow_tf32:
                out.update(status="skipped", why="TF32 matmuls are already on")
                return out
            call = _with_tf32(torch, job.guarded(fn, args, kwargs))
        elif name == "bf16":
            inner = job.guarded(fn, args, kwargs)

            def call():
                with torch.autocast(device.type, dtype=torch.bfloat16):
                    return inner()
        elif name == "channels_last":
            cl_args, cl_kwargs, changed = channels_last(torch, args, kwargs)
            if not changed:
                out.update(status="skipped", why="no 4-d tensor or convolution among the inputs")
                return out
            call = job.guarded(fn, cl_args, cl_kwargs)
        elif name == "batch2":
            base = int(job.req.get("batch_size") or 1)
            if provider_of(job, module) is None:
                out.update(status="skipped", why="no input provider to pass batch_size to")
                return out
            job.req["batch_size"] = base * 2
            try:
                b_args, b_kwargs = find_inputs(job, module, fn, owner, device)
            finally:
                job.req["batch_size"] = base
            call = job.guarded(fn, b_args, b_kwargs)
            items, comparable = 2, False
        else:
            out.update(status="failed", why="unknown variant %r" % name)
            return out
        compiled_before = compile_seconds()
        t0 = time.perf_counter()
        first = call()
        sync()
        one_time = time.perf_counter() - t0
        for _ in range(2):  # graphs record on the first calls after compiling
            call()
        sync()
        outputs = detach_outputs(torch, call())
        sync()
    except Cancelled:
        raise
    except JobError as e:
        out.update(status="failed", why=e.message, path=e.path, line=e.line)
        return out
    except Exception as e:  # a variant that breaks is reported; the others still run
        err = job.user_error("variant", e)
        out.update(status="failed", why=err.message, path=err.path, line=err.line)
        return out
    del first
    compile_s = compile_seconds() - compiled_before
    out.update(
        call=call,
        items=items,
        outputs=outputs,
        comparable=comparable,
        one_time_s=compile_s if compile_s > 0 else one_time,
        one_time_what="compile" if compile_s > 0 else "first call",
    )
    return out


def _with_tf32(torch, inner):

    def call():
        matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        try:
            return inner()
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = (
                matmul,
                cudnn,
            )

    return call


def timed_rounds(job, candidates, sync, cuda, device):
    """Each candidate's time per call in rounds, in turns (A B C, then C B A, ...), so
    drift (clocks, caches, other jobs) falls on all of them alike: ({name: [us, ...]},
    {name: compiles seen during its timed blocks})."""
    torch = job.torch
    budget = float(job.req.get("budget_s") or TRY_BUDGET_S)
    min_rounds = int(job.req.get("rounds") or TRY_MIN_ROUNDS)
    probe = {}
    for name, call, _ in candidates:
        sync()
        t = time.perf_counter()
        call()
        sync()
        probe[name] = max((time.perf_counter() - t) * 1e6, 1.0)
    per_round = sum(probe.values())
    calls = {n: int(max(1, min(50, TRY_BLOCK_US / probe[n]))) for n in probe}
    rounds = int(
        max(
            min_rounds,
            min(TRY_MAX_ROUNDS, budget * 1e6 / max(per_round * max(calls.values()), 1.0)),
        )
    )
    out = {name: [] for name, _, _ in candidates}
    recompiles = {}  # name -> compiles seen during its timed blocks
    for r in range(rounds):
        order = candidates if r % 2 == 0 else candidates[::-1]
        for name, call, _ in order:
            n = calls[name]
            frames = dynamo_frames()
            sync()
            if cuda:
                start, end = (
                    torch.cuda.Event(enable_timing=True),
                    torch.cuda.Event(enable_timing=True),
                )
                start.record()
                for _ in range(n):
                    call()
                end.record()
                end.synchronize()
                out[name].append(start.elapsed_time(end) * 1e3 / n)
            else:
                t = time.perf_counter()
                for _ in range(n):
                    call()
                out[name].append((time.perf_counter() - t) * 1e6 / n)
            if dynamo_frames() > frames:
                recompiles[name] = recompiles.get(name, 0) + dynamo_frames() - frames
        job.progress("timing", r + 1, rounds)
    return out, recompiles
