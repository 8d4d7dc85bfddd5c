# pyright: basic
"""A function's calls seen without a tracer (Python before 3.12): its code swapped for a
trampoline that runs the original around two callbacks, put back when done.

Before 3.12 the steps of an in-place run are found by ``sys.settrace``, and while a tracer
is set the whole interpreter runs its slow path (no specialized instructions): a pure-Python
loop ran 2.7x slower under it on Python 3.11 here, and host-bound steps with it. Once the
tracer has found the function's code, the one function object that holds it gets the
trampoline's code instead; every caller (its module's name, a bound method, a reference
kept anywhere) then reaches the trampoline, and the tracer can go. What the program may
inspect stays the function's own: ``inspect.signature`` (a trainer reading ``forward``'s
parameters) reads a ``__signature__`` set from the original until the code is put back.

Only a plain function can be swapped: no closure cells (a code object's free variables must
match to be assigned), not a generator or coroutine (the trampoline returns the result), one
function object for the code and not a nested one (a ``def`` inside a function makes a new
object each time it runs, which the swap would not reach), and none of torch.compile's
frames on the stack (Dynamo runs a function's code through its own frames and guards on the
code object). A region torch.compile traces later goes straight to the original code
(``torch.compiler.is_compiling()``, constant while Dynamo traces): the trampoline adds no
graph break, and a call compiled into a graph is no step, as under the tracer.

What else a program may read of the function while it is on is the trampoline's:
``inspect.getsource``, ``__code__`` (torch.jit.script, torch.fx read it), ``__defaults__``.
"""

import gc
import inspect
import sys
import types
from typing import Any

#: Code flags of functions whose calls do not end when they return a value.
_NOT_PLAIN = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_DYNAMO = ("torch/_dynamo/", "torch\\_dynamo\\")


def _trampoline(*args, _kernelscope_call_: Any = None, **kwargs):
    return _kernelscope_call_(args, kwargs)


def swappable(code, frame):
    """The one function object whose code is `code`, when it can be swapped (see above);
    None where it cannot. `frame` is a running call of it."""
    if code.co_freevars or code.co_flags & _NOT_PLAIN:
        return None
    f = frame
    while f is not None:
        if any(mark in f.f_code.co_filename for mark in _DYNAMO):
            return None
        f = f.f_back
    if _compiling():
        return None
    holders = [o for o in gc.get_referrers(code) if isinstance(o, types.FunctionType)]
    if len(holders) != 1 or holders[0].__code__ is not code:
        return None
    if "<locals>" in holders[0].__qualname__:  # made again by each run of its outer function
        return None
    return holders[0]


def _compiling():
    """Whether a torch.compile'd region runs on this thread (its frame-evaluation callback
    is set); True where that cannot be told."""
    torch = sys.modules.get("torch")
    dynamo = getattr(getattr(torch, "_C", None), "_dynamo", None)
    setter = getattr(getattr(dynamo, "eval_frame", None), "set_eval_frame", None)
    if setter is None:
        return False
    try:
        callback = setter(None)
        setter(callback)
    except Exception:
        return True
    return callback is not None


class Trampoline:
    """`fn`'s calls run through `call(original, args, kwargs)` until ``restore``."""

    def __init__(self, fn, call):
        self.fn = fn
        self.saved = (fn.__code__, fn.__defaults__, fn.__kwdefaults__)
        self.had_signature = "__signature__" in fn.__dict__
        if not self.had_signature:  # what a program inspects stays the function's own
            try:
                fn.__signature__ = inspect.signature(fn)
            except (TypeError, ValueError):
                self.had_signature = True  # none to keep: nothing to take off after
        original = types.FunctionType(
            fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
        )
        original.__kwdefaults__ = fn.__kwdefaults__
        original.__qualname__ = fn.__qualname__
        original.__module__ = fn.__module__

        compiler = getattr(sys.modules.get("torch"), "compiler", None)
        tracing = getattr(compiler, "is_compiling", None)

        def enter(args, kwargs):
            if tracing is not None and tracing():  # Dynamo inlines the original instead
                return original(*args, **kwargs)
            return call(original, args, kwargs)

        fn.__code__ = _trampoline.__code__
        fn.__defaults__ = None
        fn.__kwdefaults__ = {"_kernelscope_call_": enter}

    def restore(self):
        code, defaults, kwdefaults = self.saved
        self.fn.__code__ = code
        self.fn.__defaults__ = defaults
        self.fn.__kwdefaults__ = kwdefaults
        if not self.had_signature:
            self.fn.__dict__.pop("__signature__", None)
