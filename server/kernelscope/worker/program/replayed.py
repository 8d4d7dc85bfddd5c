# pyright: basic
"""A saved capture replayed without its program (the clean worker's timing): the target's
module imported as a provider's would be, the arguments and state loaded from the file."""

from .capture import load_capture
from .child_call import as_worker
from .entry import in_script, prepared_call
from .target import load_module, resolve


def saved_call(job, path):
    """((fn, call, device, sync), the capture's record, None), or (None, None, why the
    program must run again)."""
    torch = job.torch
    if in_script(job):
        return None, None, "the function is defined in the program's script (importing it runs it)"
    try:
        args, kwargs, state, meta = load_capture(torch, path)
    except Exception as e:  # classes in the script's __main__, a file gone, another torch
        return None, None, "the saved capture could not be loaded: %s: %s" % (type(e).__name__, e)
    try:
        module = load_module(job)
        fn, _owner = resolve(job, module)
    except Exception as e:
        return None, None, "the function's module could not be imported: %s" % (e,)
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        return None, None, "%s has no code object to replay" % job.req["qualname"]
    meta = meta or {}
    as_worker(torch, state, (meta.get("worker_info"), meta.get("worker_dataset")), args, kwargs)
    prepared, resized = prepared_call(job, fn, code, args, kwargs, state)
    if resized:
        meta = dict(meta or {})
        site = dict(meta.get("site") or {})
        site["modes"] = [*(site.get("modes") or []), resized]
        meta["site"] = site
    return prepared, meta, None
