# pyright: basic
"""What torch.compile has done in this process so far, from dynamo's own counters and
caches."""

import dis
import inspect
import sys

from .target import modules_of


def dynamo_frames():
    """Frames torch.compile has compiled in this process so far (0 before dynamo loads)."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    try:
        return int(counters["stats"]["unique_graphs"]) if counters else 0
    except (KeyError, TypeError, ValueError):  # a torch without the counter: no detection
        return 0


def compile_seconds():
    """Seconds torch.compile has spent compiling in this process (0 when dynamo is not
    loaded): the outermost compile frames of dynamo's own timing table."""
    utils = sys.modules.get("torch._dynamo.utils")
    metrics = getattr(utils, "compilation_time_metrics", None)
    if not isinstance(metrics, dict) or not metrics:
        return 0.0
    totals = {k: float(sum(v)) for k, v in metrics.items() if isinstance(v, list)}
    outer = [v for k, v in totals.items() if k.endswith("compile_inner")]
    return sum(outer) if outer else max(totals.values(), default=0.0)


def compiled_around(path, line):
    """The qualified name of a function of the file at `path` whose code holds `line` and
    that torch.compile has compiled in this process (a loop there runs in the graph, not as
    Python: no iteration can be seen); None where none is, or dynamo is not loaded."""
    if "torch._dynamo" not in sys.modules:
        return None
    try:
        from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list as entries
    except Exception:  # a torch without it: no diagnosis
        return None
    for module in modules_of(path):
        for code in _codes(module):
            if any(at == line for _, at in dis.findlinestarts(code)):
                try:
                    if entries(code):
                        return getattr(code, "co_qualname", code.co_name)
                except Exception:
                    continue
    return None


def _codes(module):
    """The code objects of a module's functions and of its classes' methods, nested ones
    too."""
    functions = []
    for obj in list(vars(module).values()):
        if inspect.isclass(obj) and getattr(obj, "__module__", None) == module.__name__:
            for member in list(vars(obj).values()):
                functions.append(getattr(member, "__func__", member))
                functions.append(getattr(member, "fget", None))
        else:
            functions.append(obj)
    codes = [f.__code__ for f in functions if inspect.isfunction(f)]
    for code in codes:  # grows as nested functions' codes are found
        codes += [c for c in code.co_consts if inspect.iscode(c)]
    return codes
