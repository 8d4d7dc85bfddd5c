# pyright: basic
"""torch.profiler's start without importing Inductor. ``prepare_trace`` asks
``hasattr(torch, "_inductor")`` to read one flag (``triton.cudagraphs``), and that lazy
import of all of Inductor was the worker's first profile's cost (1.4 s on an H200, 3-4 s on
a busy CPU box) in processes that never compile. Until something else imports Inductor, the
flag has its default, so the answer is the same without the import."""

import sys


def skip_inductor_import(torch):
    """Wrap the profiler's ``prepare_trace`` so the lazy ``torch._inductor`` is not
    imported for it; a torch without that code path is left alone."""
    try:
        from torch.profiler import profiler

        kineto = profiler._KinetoProfile
        original = kineto.prepare_trace
    except Exception:
        return
    if getattr(original, "_ks_no_inductor", False):
        return

    def prepare_trace(self, *args, **kwargs):
        lazy = torch.__dict__.get("__getattr__")
        if "torch._inductor" in sys.modules or lazy is None:
            return original(self, *args, **kwargs)

        def without_inductor(name):
            if name == "_inductor":
                raise AttributeError(name)
            return lazy(name)

        torch.__getattr__ = without_inductor
        try:
            return original(self, *args, **kwargs)
        finally:
            torch.__getattr__ = lazy

    prepare_trace._ks_no_inductor = True
    kineto.prepare_trace = prepare_trace
