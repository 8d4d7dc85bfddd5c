# pyright: basic
"""What a user's Triton kernels were passed: the bytes of the tensors on each launch, a
bound on the bytes the kernel can move (the trace records no shapes for them)."""

import contextlib
import sys

#: Where a ``@triton.jit`` function's launch goes: compiled, or under TRITON_INTERPRET=1.
RUNNERS = (
    ("triton.runtime.jit", "JITFunction"),
    ("triton.runtime.interpreter", "InterpretedFunction"),
)


@contextlib.contextmanager
def watch_triton_launches(job):
    """While open, each launch of a ``@triton.jit`` function (``kernel[grid](...)``, also
    through an autotuner) adds its tensors' bytes to ``job.launches``. Only where the user's
    code imported Triton: Inductor launches its own kernels without ``JITFunction.run``."""
    patched = []
    for module_name, cls_name in RUNNERS:
        cls = getattr(sys.modules.get(module_name), cls_name, None)
        run = cls.__dict__.get("run") if cls is not None else None
        if cls is not None and callable(run):
            patched.append((cls, run))
            cls.run = _watched(job, run)
    try:
        yield
    finally:
        for cls, run in patched:
            cls.run = run


def _watched(job, run):
    def watched(self, *args, **kwargs):
        if not kwargs.get("warmup"):
            # never let the watch break the user's launch
            with contextlib.suppress(Exception):
                _record(job.launches, self, args, kwargs)
        return run(self, *args, **kwargs)

    return watched


def _record(launches, kernel, args, kwargs):
    fn = getattr(kernel, "fn", None)
    name = getattr(fn, "__name__", None) or getattr(kernel, "__name__", None)
    if not name:
        return
    seen = set()
    total = 0
    for v in list(args) + list(kwargs.values()):
        t = _tensor_of(v)
        if t is None:
            continue
        size = int(t.numel()) * int(t.element_size())
        key = (int(t.data_ptr()), size)
        if key in seen:
            continue
        seen.add(key)
        total += size
    entry = launches.setdefault(name, {"name": name, "launches": 0, "bytes": 0, "tensors": 0})
    entry["launches"] += 1
    entry["bytes"] += total
    entry["tensors"] = max(entry["tensors"], len(seen))


def _tensor_of(v):
    """A torch tensor, or the one a Triton tensor descriptor (TMA) describes."""
    for candidate in (v, getattr(v, "base", None)):
        if all(hasattr(candidate, a) for a in ("data_ptr", "element_size", "numel")):
            return candidate
    return None


def launch_report(job):
    """The sidecar's ``launches``: per kernel, its launches in the cold call and the mean
    bytes of tensors it was passed."""
    return [
        {
            "name": e["name"],
            "launches": e["launches"],
            "bytes_per_launch": e["bytes"] / e["launches"],
            "tensors": e["tensors"],
        }
        for e in job.launches.values()
        if e["launches"]
    ]
