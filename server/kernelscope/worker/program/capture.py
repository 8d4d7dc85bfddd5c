# pyright: basic
"""A call taken as the program made it: its arguments (tensors, modules, optimizers by
reference) and the state that changes what runs, replayed the same way on every call."""

import contextlib
import functools
import gc
import inspect
import os
import types

from .errors import JobError

CO_VARARGS, CO_VARKEYWORDS = 0x04, 0x08
AUTOCAST_DEVICES = ("cuda", "cpu")
SDPA_BACKENDS = ("flash", "mem_efficient", "math", "cudnn")


def arguments(frame):
    """The arguments of the call starting in `frame`: (positional, keyword)."""
    code = frame.f_code
    names = code.co_varnames
    local = frame.f_locals
    n, k = code.co_argcount, code.co_kwonlyargcount
    args = [local[name] for name in names[:n]]
    kwargs = {name: local[name] for name in names[n : n + k] if name in local}
    i = n + k
    if code.co_flags & CO_VARARGS:
        args.extend(local[names[i]])
        i += 1
    if code.co_flags & CO_VARKEYWORDS:
        kwargs.update(local[names[i]])
    return args, kwargs


def function_of(code, args):
    """The function object whose code is `code`: the class attribute of the first argument
    for a method, else any function made from that code."""
    if args:
        owner = args[0] if inspect.isclass(args[0]) else type(args[0])
        for klass in getattr(owner, "__mro__", ()):
            found = vars(klass).get(code.co_name)
            found = getattr(found, "__func__", found)
            if found is not None and getattr(inspect.unwrap(found), "__code__", None) is code:
                return found
    for ref in gc.get_referrers(code):
        if isinstance(ref, types.FunctionType) and ref.__code__ is code:
            return ref
    return None


class CallState:
    """The state a call ran in: grad and inference mode, autocast, the module's train/eval,
    the current CUDA stream, SDPA's backends, the default dtype; and the RNG's states."""

    def __init__(self, torch, args):
        self.torch = torch
        self.grad = torch.is_grad_enabled()
        self.inference = torch.is_inference_mode_enabled()
        self.autocast = {d: _autocast(torch, d) for d in AUTOCAST_DEVICES}
        module = args[0] if args and isinstance(args[0], torch.nn.Module) else None
        self.training = module.training if module is not None else None
        self.dtype = torch.get_default_dtype()
        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        self.stream = torch.cuda.current_stream() if cuda else None
        if self.stream is not None and self.stream == torch.cuda.default_stream():
            self.stream = None
        self.sdpa = {b: _sdpa_enabled(torch, b) for b in SDPA_BACKENDS}
        self.rng = torch.get_rng_state()
        self.cuda_rng = torch.cuda.get_rng_state() if cuda else None
        self.threads = torch.get_num_threads()  # a DataLoader worker's is 1

    def modes(self):
        """What the report says of it: ``train``, ``no_grad``, ``autocast cuda bfloat16``..."""
        out = []
        if self.training is not None:
            out.append("train mode" if self.training else "eval mode")
        if self.inference:
            out.append("inference_mode")
        elif not self.grad:
            out.append("no_grad")
        for device, (on, dtype) in self.autocast.items():
            if on:
                out.append("autocast %s %s" % (device, str(dtype).replace("torch.", "")))
        if self.stream is not None:
            out.append("stream %s" % getattr(self.stream, "stream_id", "?"))
        off = [b for b, on in self.sdpa.items() if on is False]
        if off:
            out.append("sdpa without %s" % ", ".join(off))
        if self.dtype != self.torch.float32:
            out.append("default dtype %s" % str(self.dtype).replace("torch.", ""))
        return out

    def saved(self):
        """The state as plain values (and the RNG's tensors), for a saved capture."""
        return {
            "grad": self.grad,
            "inference": self.inference,
            "autocast": {d: (on, str(dtype)) for d, (on, dtype) in self.autocast.items()},
            "training": self.training,
            "dtype": str(self.dtype),
            "sdpa": dict(self.sdpa),
            "rng": self.rng,
            "cuda_rng": self.cuda_rng,
            "threads": self.threads,
        }

    @classmethod
    def from_saved(cls, torch, saved):
        """The state a saved capture recorded (the current CUDA stream is not saved)."""
        state = cls.__new__(cls)
        state.torch = torch
        state.grad, state.inference = saved["grad"], saved["inference"]
        state.autocast = {
            d: (on, getattr(torch, dtype.replace("torch.", "")))
            for d, (on, dtype) in saved["autocast"].items()
        }
        state.training = saved["training"]
        state.dtype = getattr(torch, saved["dtype"].replace("torch.", ""))
        state.stream = None
        state.sdpa = dict(saved["sdpa"])
        state.rng, state.cuda_rng = saved["rng"], saved["cuda_rng"]
        state.threads = saved.get("threads")  # None: saved before it was recorded
        return state

    def apply_threads(self):
        """Run torch's CPU ops on as many threads as the call had (set for the rest of the
        job: the worker ends after a program's call)."""
        if self.threads and self.torch.get_num_threads() != self.threads:
            self.torch.set_num_threads(self.threads)

    def restore_rng(self):
        """The RNG as it was at the call, so the first replay draws what the program did."""
        self.torch.set_rng_state(self.rng)
        if self.cuda_rng is not None:
            self.torch.cuda.set_rng_state(self.cuda_rng)

    def differs(self):
        """What of the state is not the thread's now: None (all is: a timing loop's calls,
        one after another, where applying it would only add its cost, ~9 us a call on a
        CPU), ``grad`` (only grad mode), else ``more``."""
        torch = self.torch
        if self.inference or self.stream is not None or self._autocast_on:
            return "more"
        if torch.get_default_dtype() != self.dtype:
            return "more"
        if not all(check() == on for check, on in self._sdpa_checks):
            return "more"
        return "grad" if torch.is_grad_enabled() != self.grad else None

    @functools.cached_property
    def _autocast_on(self):
        return any(on for on, _ in self.autocast.values())

    @functools.cached_property
    def _sdpa_checks(self):
        """(the backend's enabled-check, as captured) for each SDPA backend torch has."""
        checks = []
        for backend, on in self.sdpa.items():
            check = getattr(self.torch.backends.cuda, "%s_sdp_enabled" % backend, None)
            if check is not None and on is not None:
                checks.append((check, on))
        return checks

    @contextlib.contextmanager
    def applied(self):
        torch = self.torch
        grad = not self.inference and torch.is_grad_enabled() != self.grad
        sdpa = {b: on for b, on in self.sdpa.items() if _sdpa_enabled(torch, b) != on}
        dtype = torch.get_default_dtype() != self.dtype
        autocast = self._autocast_on
        with contextlib.ExitStack() as stack:
            if self.inference:
                stack.enter_context(torch.inference_mode())
            elif grad:
                stack.enter_context(torch.set_grad_enabled(self.grad))
            for device, (on, dtype_) in self.autocast.items():
                if on:
                    stack.enter_context(torch.autocast(device, dtype=dtype_))
            if autocast:
                # The replays run inside the program's own autocast region, whose cache of
                # cast weights would outlive each call; the program's calls each left theirs
                # (bf16 Block.forward on an H200: 8 % faster with the cache kept).
                stack.callback(torch.clear_autocast_cache)
            if self.stream is not None:
                stack.enter_context(torch.cuda.stream(self.stream))
            if sdpa:
                saved_sdpa = {b: not on for b, on in sdpa.items()}
                _set_sdpa(torch, sdpa)
                stack.callback(_set_sdpa, torch, saved_sdpa)
            if dtype:
                saved_dtype = torch.get_default_dtype()
                torch.set_default_dtype(self.dtype)
                stack.callback(torch.set_default_dtype, saved_dtype)
            yield


def without_compiler(torch):
    """Clear the thread's frame-evaluation callback (torch.compile's, while a compiled region
    runs): (setter, the callback it had), or None where torch has no such hook."""
    setter = getattr(
        getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None), "set_eval_frame", None
    )
    if setter is None:
        return None
    try:
        return setter, setter(None)
    except Exception:
        return None


def replay(torch, fn, code, args, kwargs, state, compiled=None, wrap=None):
    """The call as a function of no arguments: a module's ``forward`` through the module's
    ``__call__`` (its hooks run), anything else as it is, each in the captured state and
    under the frame evaluation (torch.compile's) the program's call had; `wrap` (a try
    variant's: torch.compile, autocast) applied to what is called."""
    module = args[0] if args and isinstance(args[0], torch.nn.Module) else None
    if module is not None and code.co_name == "forward":
        target, rest = module, args[1:]
    elif fn is not None:
        target, rest = fn, args
    else:
        raise JobError(
            "internal",
            "found no function object for %s (%s:%d) to call again"
            % (
                getattr(code, "co_qualname", code.co_name),
                code.co_filename,
                code.co_firstlineno,
            ),
        )

    if wrap is not None:
        target = wrap(target)

    def call():
        differs = state.differs()
        if differs is None:
            return target(*rest, **kwargs)
        if differs == "grad":  # an eval pass's no_grad: set and reset, no context stack
            torch.set_grad_enabled(state.grad)
            try:
                return target(*rest, **kwargs)
            finally:
                torch.set_grad_enabled(not state.grad)
        with state.applied():
            return target(*rest, **kwargs)

    if compiled is None or compiled[1] is None:
        return call
    setter, callback = compiled

    def call_compiled():
        setter(callback)
        try:
            return call()
        finally:
            setter(None)

    return call_compiled


def _autocast(torch, device):
    try:
        on = torch.is_autocast_enabled(device)
        dtype = torch.get_autocast_dtype(device)
    except (TypeError, AttributeError):  # torch < 2.4
        if device == "cuda":
            on, dtype = torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype()
        else:
            on, dtype = torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype()
    return bool(on), dtype


def _sdpa_enabled(torch, backend):
    check = getattr(torch.backends.cuda, "%s_sdp_enabled" % backend, None)
    return bool(check()) if check is not None else None


def _set_sdpa(torch, flags):
    for backend, on in flags.items():
        enable = getattr(torch.backends.cuda, "enable_%s_sdp" % backend, None)
        if enable is not None and on is not None:
            enable(on)


def save_capture(torch, path, args, kwargs, state, meta, limit=None, portable=True):
    """Save the call (arguments by value, objects by pickle) and its state to `path`; None,
    or why it cannot be saved, naming the argument and its part (or its size, past `limit`
    bytes: checked before anything is written or copied). Not `portable`: read back by a
    process of the same program only, so objects of its script may be in it."""
    payload = {"args": list(args), "kwargs": kwargs, "state": state.saved(), "meta": meta}
    # kept to replay in another process
    script = script_objects(torch, payload) if limit is not None and portable else []
    if script:
        return (
            "it holds %s, defined in the program's script: another process cannot load "
            "those (pickle finds them by module, and __main__ is not the script there), so "
            "the next profile runs the program again" % ", ".join(script[:3])
        )
    if limit is not None and _storage_bytes(torch, payload) > limit:
        return "%.0f MB of tensors, over the %d MB %s" % (
            _storage_bytes(torch, payload) / 2**20,
            limit // 2**20,
            "kept without --save (keep_captures_mb)" if portable else "handed over without --save",
        )
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    try:
        torch.save(payload, tmp)
    except Exception as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        return _why_unsaveable(torch, args, kwargs, e)
    os.replace(tmp, path)
    return None


def _why_unsaveable(torch, args, kwargs, error):
    """Which argument (and which part of it) torch.save could not write."""
    import io

    names = ["argument %d" % i for i in range(len(args))] + ["`%s`" % k for k in kwargs]
    for name, value in zip(names, list(args) + list(kwargs.values())):
        if isinstance(value, torch.Tensor):
            continue
        try:
            torch.save(value, io.BytesIO())
        except Exception as e:
            part = _unsaveable_part(torch, value)
            return "%s (%s)%s cannot be saved: %s" % (
                name,
                type(value).__name__,
                ": its %s (%s)" % (part[0], type(part[1]).__name__) if part else "",
                _said(e),
            )
    return "the call cannot be saved: %s" % _said(error)


def _said(e):
    return "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")


def _unsaveable_part(torch, obj, depth=3):
    """(``.log``, the object) for the innermost attribute or item of `obj` that torch.save
    cannot write while its own parts can (what a user must change), or None."""
    import io

    if isinstance(obj, dict):
        parts = [("[%r]" % k, v) for k, v in obj.items()]
    elif isinstance(obj, (list, tuple)):
        parts = [("[%d]" % i, v) for i, v in enumerate(obj)]
    elif hasattr(obj, "__dict__") and not isinstance(obj, (torch.Tensor, *_OPAQUE)):
        state = vars(obj)
        getstate = getattr(type(obj), "__getstate__", None)
        if getstate is not None and getstate is not getattr(object, "__getstate__", None):
            state = obj.__getstate__()  # what pickling sees (a handle it drops is not)
        parts = [("." + k, v) for k, v in state.items()] if isinstance(state, dict) else []
    else:
        return None
    for label, value in parts:
        if isinstance(value, torch.Tensor):  # saveable, and copying it costs its size
            continue
        try:
            torch.save(value, io.BytesIO())
        except Exception:
            inner = _unsaveable_part(torch, value, depth - 1) if depth > 1 else None
            return (label + inner[0], inner[1]) if inner else (label, value)
    return None


def _storage_bytes(torch, obj):
    """Bytes of the distinct tensor storages reachable from `obj`, as torch.save would write
    them."""
    seen_storages, total = set(), 0
    for o in _reachable(torch, obj):
        if isinstance(o, torch.Tensor):
            storage = o.untyped_storage()
            key = (storage.data_ptr(), o.device)
            if key not in seen_storages:
                seen_storages.add(key)
                total += storage.nbytes()
    return total


def script_objects(torch, obj):
    """The classes and functions of the script run as ``__main__`` reachable from `obj`
    (their qualified names): pickle finds them by module, and in another process
    ``__main__`` is not the script, so a capture that holds them cannot be loaded there."""
    names = []
    for o in _reachable(torch, obj):
        t = o if isinstance(o, (type, types.FunctionType)) else type(o)
        name = "__main__." + getattr(t, "__qualname__", "?")
        if getattr(t, "__module__", None) == "__main__" and name not in names:
            names.append(name)
    return names


def _reachable(torch, obj):
    """Each distinct object reachable from `obj` (containers, modules, optimizers, plain
    objects' attributes), as torch.save walks them."""
    seen = set()
    stack = [obj]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        yield o
        if isinstance(o, torch.Tensor):
            continue
        if isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
        elif isinstance(o, torch.optim.Optimizer):
            stack.extend(o.state.values())
            stack.extend(p for g in o.param_groups for p in g["params"])
        elif hasattr(o, "__dict__") and not isinstance(o, _OPAQUE):
            stack.extend(vars(o).values())  # a module's parameters, buffers and submodules too


#: Objects whose attributes torch.save does not walk into (it pickles them by reference).
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def load_capture(torch, path):
    """(args, kwargs, state, meta) of a saved capture; raises what loading raises."""
    data = torch.load(path, weights_only=False, map_location=None)
    return data["args"], data["kwargs"], CallState.from_saved(torch, data["state"]), data["meta"]
