# pyright: basic
"""RunTry: the function and variants of it (torch.compile, CUDA Graphs, TF32, bf16,
channels_last, batch ×2) on the same inputs, timed in turns, unprofiled; each variant's
results compared with the function's."""

import platform
import sys
import time

from . import timing
from .capture import replay
from .dynamo import compile_seconds, dynamo_frames
from .errors import Cancelled, JobError
from .inputs import find_inputs, provider_of
from .timing import warm_up

TRY_BUDGET_S = 2.0  # of timed calls, all candidates together
TRY_MIN_ROUNDS = 7
TRY_MAX_ROUNDS = 40
TRY_BLOCK_US = 20000.0  # each timed block: about this long, in 5 to 200 calls
TRY_BLOCK_MIN_CALLS = 5
TRY_BLOCK_MAX_CALLS = 200
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


def _drift(comparison, dropout=()):
    """How the function's first two calls differed, for the reader of a "not compared", and
    the modules whose dropout draws new masks each call (random_layers), if any."""
    if "why_changed" in comparison:
        said = "its first two calls: %s" % comparison["why_changed"]
    else:
        said = (
            "its first two calls differ by up to %.3g relative to the result's scale"
            % (comparison["max_rel_err"])
        )
    return said + "".join("; %s" % d for d in dropout)


def random_layers(torch, fn, args, kwargs):
    """The call's modules (by the user's names) in train mode with dropout layers, which draw
    new masks on every call: "RNNModel is in train mode with 1 dropout layer (new masks each
    call)"."""
    dropout = torch.nn.modules.dropout._DropoutNd
    try:
        named, shared = stateful_objects(torch, fn, args, kwargs)
    except Exception:  # the user's objects: a note, never a failure
        return []
    found = []
    for name, obj in list(named.items()) + list(shared.items()):
        if not isinstance(obj, torch.nn.Module):
            continue
        n = sum(1 for m in obj.modules() if isinstance(m, dropout) and m.training and m.p > 0)
        if n:
            who = type(obj).__name__ if name == "self" else "%s (%s)" % (name, type(obj).__name__)
            found.append(
                "%s is in train mode with %d dropout layer%s (new masks each call)"
                % (who, n, "" if n == 1 else "s")
            )
    return found


def channels_last(torch, args, kwargs):
    """Copies of the call's arguments, made together (one ``copy.deepcopy`` memo, so an
    optimizer or a GradScaler among them steps the copied model's parameters), with 4-d
    tensors and the modules holding 4-d weights in channels_last; the originals keep their
    layout for the baseline. Returns (args, kwargs, changed, note): `note` says what could
    not be copied together (then each argument is copied alone, or shared)."""
    import copy

    note = ""
    try:
        new_args, new_kwargs = copy.deepcopy((list(args), dict(kwargs)))
    except Exception as e:
        note = "the arguments could not be copied together (%s: %s)" % (
            type(e).__name__,
            str(e).strip().splitlines()[0][:200] if str(e).strip() else "",
        )
        new_args = [_copied_or_shared(a) for a in args]
        new_kwargs = {k: _copied_or_shared(v) for k, v in kwargs.items()}
    changed = [False]
    seen = set()

    def conv(v, depth=0):
        if isinstance(v, torch.Tensor):
            if v.dim() == 4 and not isinstance(v, torch.nn.Parameter):
                changed[0] = True
                return v.contiguous(memory_format=torch.channels_last)
            return v
        if depth > 4 or id(v) in seen:
            return v
        seen.add(id(v))
        if isinstance(v, torch.nn.Module):
            if any(p.dim() == 4 for p in v.parameters()):
                changed[0] = True
                # in place: the parameters stay the same objects, so the copied optimizer
                # still holds them
                v.to(memory_format=torch.channels_last)
            return v
        if isinstance(v, (list, tuple)):
            return type(v)(conv(x, depth + 1) for x in v)
        if isinstance(v, dict):
            return {k: conv(x, depth + 1) for k, x in v.items()}
        if hasattr(v, "__dict__") and not isinstance(v, type) and not callable(v):
            for x in list(vars(v).values()):  # a trainer object holding the model
                if isinstance(x, torch.nn.Module):
                    conv(x, depth + 1)
        return v

    new_args = [conv(a) for a in new_args]
    new_kwargs = {k: conv(v) for k, v in new_kwargs.items()}
    return new_args, new_kwargs, changed[0], note


def _copied_or_shared(v):
    import copy

    try:
        return copy.deepcopy(v)
    except Exception:
        return v


def _scaler_types(torch):
    found = []
    for where in (getattr(torch, "amp", None), getattr(torch.cuda, "amp", None)):
        scaler = getattr(where, "GradScaler", None)
        if isinstance(scaler, type):
            found.append(scaler)
    return tuple(found)


def stateful_objects(torch, fn, args, kwargs):
    """The call's modules, optimizers and grad scalers by the user's names: ({argument name:
    object}, {global name: object} for those the function reads)."""
    import inspect

    kinds = (torch.nn.Module, torch.optim.Optimizer, *_scaler_types(torch))
    try:
        bound = dict(inspect.signature(fn).bind_partial(*args, **kwargs).arguments)
    except (TypeError, ValueError):
        bound = {"argument %d" % (i + 1): a for i, a in enumerate(args)}
        bound.update(kwargs)
    plain = inspect.unwrap(fn)
    code = getattr(plain, "__code__", None)
    space = getattr(plain, "__globals__", {})
    named = {n: v for n, v in bound.items() if isinstance(v, kinds)}
    used = code.co_names if code is not None else ()
    shared = {n: space[n] for n in used if n in space and isinstance(space[n], kinds)}
    return named, shared


def reset_scalers(torch, fn, args, kwargs):
    """A variant that failed inside ``scaler.step`` left its GradScaler half-way through a
    step (the next ``step`` would fail the same way on the baseline): start it afresh."""
    import collections

    named, shared = stateful_objects(torch, fn, args, kwargs)
    for obj in list(named.values()) + list(shared.values()):
        if not isinstance(obj, _scaler_types(torch)):
            continue
        for cls in type(obj).__mro__:  # torch.cuda.amp's subclasses torch.amp's
            refresh = getattr(sys.modules.get(cls.__module__), "_refresh_per_optimizer_state", None)
            if refresh is not None:
                obj._per_optimizer_states = collections.defaultdict(refresh)
                break


def copy_note(torch, fn, args, kwargs, note):
    """Why a variant that ran on copies may have failed, in terms of the user's objects."""
    named, shared = (
        ["%s (%s)" % (n, type(v).__name__) for n, v in found.items()]
        for found in stateful_objects(torch, fn, args, kwargs)
    )
    parts = []
    if named:
        parts.append("it ran on copies of %s, made together" % ", ".join(named))
    if note:
        parts.append(note)
    if shared:
        parts.append(
            "the function also uses the global %s, which was not copied: it still holds the "
            "original objects (pass it as an argument so the copy takes it along)"
            % ", ".join(shared)
        )
    return "; ".join(parts)


def run_try(job):
    """Time the function and variants of it (torch.compile, CUDA Graphs, TF32, ...) on the
    same inputs, in turns, unprofiled; compare each variant's results with the function's.
    With a program (--via), on its captured call, each variant replayed in the call's state."""
    return job.with_call(lambda fn, base, device, sync: _try(job, fn, base, device, sync))


def _try(job, fn, base, device, sync):
    torch = job.torch
    module, owner, args, kwargs = job.loaded
    cuda = device.type == "cuda"
    # Before the warm-up: a training step's loss may settle near zero after many calls and
    # then look steady; its first two calls differ.
    job.progress("cold")
    reference = detach_outputs(torch, base())
    sync()
    again = detach_outputs(torch, base())
    sync()
    first_two = compare_outputs(torch, reference, again)
    steady = first_two["equal"]
    random = () if steady else random_layers(torch, fn, args, kwargs)
    per_call = {"baseline": warm_up(job, base, sync, stage=None)}
    candidates = [("baseline", base, 1)]
    variants = []
    names = list(job.req.get("variants") or [])
    for i, name in enumerate(names):
        job.progress("variants", i + 1, len(names))
        built = build_variant(job, name, module, fn, owner, args, kwargs, device, sync)
        if "call" not in built:
            if built["status"] == "failed":
                _still_runs(base, sync, name)
            variants.append(built)
            continue
        entry = built.pop("call"), built.pop("items"), built.pop("per_call_us")
        if built.get("outputs") is not None and built.pop("comparable", True):
            if steady:
                built.update(compare_outputs(torch, reference, built.pop("outputs")))
            else:
                built.pop("outputs")
                built["results"] = (
                    "not compared: the function's results change from call to call (%s)"
                    % _drift(first_two, random)
                )
        else:
            built.pop("outputs", None)
            built.setdefault("results", "not compared: other inputs")
        candidates.append((name, entry[0], entry[1]))
        per_call[name] = entry[2]
        variants.append(built)
    job.progress("timing")
    host_best = timing.host_best(job)
    by_name = {v["name"]: v for v in variants}
    failed = [v["name"] for v in variants if v["status"] == "failed"]
    while True:
        try:
            rounds, grew, slowed = timed_rounds(job, candidates, per_call, sync, cuda, host_best)
            break
        except TimedCallFailed as e:
            err = e.error
            if e.name == "baseline":
                if failed:
                    raise _left_broken(err, failed, "in the timed calls after") from None
                raise err from None
            by_name[e.name].update(
                status="failed",
                why="failed in the timed calls: " + err.message,
                path=err.path,
                line=err.line,
            )
            candidates = [c for c in candidates if c[0] != e.name]
            failed.append(e.name)
    for name, _call, items in candidates[1:]:
        v = by_name[name]
        v["rounds_us"] = rounds[name]
        v["items"] = items
        again = v.pop("recompiled", 0) + grew.get(name, 0)
        if grew.get(name) or again:
            v["status"] = "failed"
            v["why"] = (
                "torch.compile compiled it again %d times after its first call: it "
                "recompiles (guards fail) on calls like these" % again
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
        "slowed_rounds": slowed["left_out"],
        "slowed_kept": slowed["kept"],
        "reference_us": slowed["reference_us"],
        "host_reference_us": host_best,
        "variants": variants,
        "call_site": job.call_site if job.entry else None,
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
    copies = ""  # what a variant on copies ran on, for its failure message
    try:
        if name == "compile":
            call = variant_call(job, fn, args, kwargs, torch.compile)
        elif name == "graphs":
            call = variant_call(
                job, fn, args, kwargs, lambda f: torch.compile(f, mode="reduce-overhead")
            )
        elif name == "tf32":
            if torch.backends.cuda.matmul.allow_tf32:
                out.update(status="skipped", why="TF32 matmuls are already on")
                return out
            call = _with_tf32(torch, variant_call(job, fn, args, kwargs))
        elif name == "bf16":
            call = variant_call(job, fn, args, kwargs, lambda f: _in_bf16(torch, device, f))
        elif name == "channels_last":
            cl_args, cl_kwargs, changed, note = channels_last(torch, args, kwargs)
            if not changed:
                out.update(status="skipped", why="no 4-d tensor or convolution among the inputs")
                return out
            copies = copy_note(torch, fn, args, kwargs, note)
            call = variant_call(job, fn, cl_args, cl_kwargs)
        elif name == "batch2":
            base = int(job.req.get("batch_size") or 1)
            if job.captured is not None:
                out.update(
                    status="skipped",
                    why="a program's call has no input provider to pass batch_size to",
                )
                return out
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
        frames_before = dynamo_frames()
        t0 = time.perf_counter()
        first = call()
        sync()
        one_time = time.perf_counter() - t0
        frames_first = dynamo_frames()
        # warmed up as the baseline was, as a loop would (graphs record on the first
        # calls after compiling; a compiled function's guards settle)
        per_call_us = warm_up(job, call, sync, stage=None)
        outputs = detach_outputs(torch, call())
        sync()
        settling = dynamo_frames() - frames_first
    except Cancelled:
        raise
    except JobError as e:
        reset_scalers(torch, fn, args, kwargs)
        why = e.message + (" (%s)" % copies if copies else "")
        out.update(status="failed", why=why, path=e.path, line=e.line)
        return out
    except Exception as e:  # a variant that breaks is reported; the others still run
        err = job.user_error("variant", e)
        reset_scalers(torch, fn, args, kwargs)
        why = err.message + (" (%s)" % copies if copies else "")
        out.update(status="failed", why=why, path=err.path, line=err.line)
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
        per_call_us=per_call_us,
    )
    # A frame compiled again once or twice after its first call is settling (an
    # optimizer's state made on that call); more is a recompile on every call, which may
    # spend dynamo's recompile limit before the timed blocks and leave them running eager.
    if settling > 2 * max(frames_first - frames_before, 1):
        out["recompiled"] = settling
    return out


def variant_call(job, fn, args, kwargs, wrap=None):
    """A variant's call of no arguments: `wrap` (torch.compile, autocast) of the function
    called on `args`; for a program's captured call, replayed as the baseline is (through a
    module's ``__call__``, in the call's captured state)."""
    if job.captured is None:
        return job.guarded(wrap(fn) if wrap is not None else fn, args, kwargs)
    captured_fn, code, state, compiled = job.captured
    replayed = replay(job.torch, captured_fn, code, args, kwargs, state, compiled, wrap)
    return job.guarded(replayed, [], {})


def _in_bf16(torch, device, fn):
    """`fn` under bf16 autocast, inside whatever state its call re-enters."""

    def run(*args, **kwargs):
        with torch.autocast(device.type, dtype=torch.bfloat16):
            return fn(*args, **kwargs)

    return run


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


def _still_runs(base, sync, failed):
    """The function called once after the variant `failed` failed: a JobError saying so
    where that failure left it failing (on the H200, LeViT's failed compile left torch
    2.11's eager calls failing: "PythonDispatcherTLS was not set")."""
    try:
        base()
        sync()
    except JobError as e:
        raise _left_broken(e, [failed], "right after") from None


def _left_broken(err, failed, when):
    """`err`, the function's own failure, saying it came after the variants `failed`."""
    one = len(failed) == 1
    err.message = (
        "the function failed %s the %s %s in this process (a failure may leave torch's "
        "state broken: try again without %s): %s"
        % (
            when,
            " and ".join(failed),
            "variant failed" if one else "variants failed",
            "it" if one else "them",
            err.message,
        )
    )
    return err


class TimedCallFailed(Exception):
    """A candidate's call raised in its timed blocks: which one, and the error."""

    def __init__(self, name, error):
        super().__init__(error.message)
        self.name = name
        self.error = error


def timed_rounds(job, candidates, per_call_us, sync, cuda, host_best=None):
    """Each candidate's time per call in rounds, in turns (A B C, then C B A, ...), so
    drift (clocks, caches, other jobs) falls on all of them alike. A round is a block of
    calls back to back timed as a user's loop is, from before the first to after the last
    (CUDA events on a GPU, ``perf_counter`` on the CPU), over the number of calls: events
    around each call cost a host-bound call 7-15 us more on the H200 (a compiled function's
    speedup read 0.77-0.90 of the same variant timed by hand). The median over rounds drops
    a block with a recompile or a stall; rounds the host slowed are left out (unslowed_rounds,
    against `host_best` too).
    Returns ({name: [us, ...]}, {name: compiles seen during its timed blocks}, the slowed
    rounds as unslowed_rounds says). TimedCallFailed where a call raised."""
    torch = job.torch
    budget = float(job.req.get("budget_s") or TRY_BUDGET_S)
    min_rounds = int(job.req.get("rounds") or TRY_MIN_ROUNDS)
    probe = {name: max(per_call_us.get(name) or 1.0, 1.0) for name, _, _ in candidates}
    calls = {
        n: int(max(TRY_BLOCK_MIN_CALLS, min(TRY_BLOCK_MAX_CALLS, TRY_BLOCK_US / probe[n])))
        for n in probe
    }
    per_round = sum(probe[n] * calls[n] for n in probe)
    rounds = int(max(min_rounds, min(TRY_MAX_ROUNDS, budget * 1e6 / max(per_round, 1.0))))
    rounds = job.ranks.agree(rounds, what="the rounds of try")
    out = {name: [] for name, _, _ in candidates}
    recompiles = {}  # name -> compiles seen during its timed blocks
    refs = []  # per round, the reference loop after each of its blocks (see timing.SLOWED)
    for r in range(rounds):
        order = candidates if r % 2 == 0 else candidates[::-1]
        refs.append([])
        for name, call, _ in order:
            n = calls[name]
            frames = dynamo_frames()
            try:
                block_us = _block_us(torch, call, n, sync, cuda)
            except JobError as e:
                raise TimedCallFailed(name, e) from None
            except Cancelled:
                raise
            except Exception as e:  # a failure of torch's own, outside the guarded call
                raise TimedCallFailed(name, job.user_error("variant", e)) from None
            out[name].append(block_us / n)
            refs[-1].append(timing.reference_us())
            if dynamo_frames() > frames:
                recompiles[name] = recompiles.get(name, 0) + dynamo_frames() - frames
        job.progress("timing", r + 1, rounds)
    out, slowed = unslowed_rounds(out, refs, host_best)
    return out, recompiles, slowed


def _block_us(torch, call, n, sync, cuda):
    """µs of `n` calls back to back, from before the first to after the last."""
    sync()
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            call()
        end.record()
        sync()
        return start.elapsed_time(end) * 1e3
    t = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - t) * 1e6


def unslowed_rounds(out, refs, host_best=None):
    """The rounds the host did not slow: none of their blocks ran more than timing.SLOWED
    times its candidate's at_speed_anchor (about its fifth-fastest of 20). A block
    is its own probe: on the H200 a host-bound block ran 1.4-1.7x slower in spells that come
    and go within tens of ms, and a reference loop 40 ms before it read fast as often as
    slow (docs/h200-run/tenth/cpu_sweep.txt); a GPU-bound block varies by a few %. Whole
    rounds go, so each variant's rounds stay paired with the baseline's; none unless
    timing.enough_left, nor where the thread's reference loops (`refs`, per round) never ran
    within SLOWED of `host_best` (the host's best, read in another process): a thread
    slowed throughout has no fast block to judge by. Returns (rounds, {"left_out": rounds
    left out, "kept": slowed rounds kept in, "reference_us": the thread's best loop})."""
    readings = [ref for block_refs in refs for ref in block_refs]
    best = timing.thread_best(readings)
    info = {"left_out": 0, "kept": 0, "reference_us": best}
    total = len(refs)
    if total < 3:
        return out, info
    base = timing.best_speed(readings, host_best)
    if best is not None and base is not None and best > timing.SLOWED * base:
        return out, info | {"kept": total}
    fast = {name: timing.at_speed_anchor(us) for name, us in out.items() if len(us) > 1}
    keep = [
        i
        for i in range(total)
        if all(us[i] <= timing.SLOWED * fast[name] for name, us in out.items() if name in fast)
    ]
    slowed = total - len(keep)
    if not slowed:
        return out, info
    if not timing.enough_left(len(keep), total):
        return out, info | {"kept": slowed}
    return {name: [us[i] for i in keep] for name, us in out.items()}, info | {"left_out": slowed}
