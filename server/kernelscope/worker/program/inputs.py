# pyright: basic
"""The call's inputs: a function's defaults, a provider ``<qualname>_inputs`` (in its module,
in ``kernelscope_inputs.py`` beside its file or at the project root, or in the project's
``inputs_module``) or one mapped in pyproject.toml, placed on the job's device."""

import inspect
import os

from .errors import Cancelled, JobError
from .names import DIST_RANK, DIST_WORLD_SIZE
from .target import def_line


def find_inputs(job, module, fn, owner, device):
    provider = provider_of(job, module)
    job.inputs_from = provider_label(job, provider) if provider is not None else "defaults"
    if provider is not None:
        args, kwargs, takes_device = _call_provider(job, provider, device)
        if takes_device:  # the provider placed its values itself: keep them as returned
            return args, kwargs
    else:
        args, kwargs = [], {}
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        if owner is not None:
            args = [_default_instance(job, owner, fn, params)]
            params = params[1:]
        required = [
            p
            for p in params
            if p.default is inspect.Parameter.empty
            and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        ]
        if required:
            raise missing_inputs(job, fn, params)
    return to_device(job.torch, args, device), to_device(job.torch, kwargs, device)


INPUTS_MODULE = "kernelscope_inputs"


def provider_label(job, provider):
    """``kernelscope_inputs.py::Block_forward_inputs``: the provider's file (relative to the
    project's root when under it) and its name."""
    name = getattr(provider, "__qualname__", None) or getattr(provider, "__name__", "provider")
    code = getattr(inspect.unwrap(provider), "__code__", None)
    file = code.co_filename if code is not None else None
    if not file or file.startswith("<"):
        return name
    file = os.path.abspath(file)
    shown = os.path.relpath(file, job.root) if job.in_project(file) else os.path.basename(file)
    return "%s::%s" % (shown, name)


def provider_of(job, module):
    spec = job.req.get("provider")
    if not spec:
        name = job.req["qualname"].replace(".", "_") + "_inputs"
        found = getattr(module, name, None)
        if found is None:
            for place in _inputs_modules(job):
                found = getattr(place, name, None)
                if found is not None:
                    break
        return found
    mod_name, _, attr = spec.partition(":")
    try:
        if mod_name == job.req["module_name"]:
            target = module
        else:
            import importlib

            target = importlib.import_module(mod_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except BaseException as e:
        raise job.user_error(
            "missing_inputs", e, "input provider %s from pyproject.toml: " % spec
        ) from None
    return target


def _inputs_modules(job):
    """The modules providers are looked for in after the target's, in order, each imported
    when the one before has no provider: kernelscope_inputs.py beside the target's file,
    the one at the project root, then the project's inputs_module."""
    files = []
    for folder in (os.path.dirname(job.path), job.root):
        path = os.path.join(folder, INPUTS_MODULE + ".py")
        if path not in files and os.path.isfile(path):
            files.append(path)
    for path in files:
        loaded = _load_inputs_file(job, path)
        if loaded is not None:
            yield loaded
    name = job.req.get("inputs_module")
    if name:
        import importlib

        try:
            yield importlib.import_module(name)
        except BaseException as e:
            raise job.user_error(
                "import_error", e, "while importing inputs_module %s: " % name
            ) from None


def _load_inputs_file(job, path):
    """kernelscope_inputs.py at `path`, imported fresh for the job (the worker drops it with
    the job's other user modules)."""
    import importlib.util
    import sys

    loaded = sys.modules.get(INPUTS_MODULE)
    if loaded is not None and getattr(loaded, "__file__", None) == path:
        return loaded
    spec = importlib.util.spec_from_file_location(INPUTS_MODULE, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[INPUTS_MODULE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        sys.modules.pop(INPUTS_MODULE, None)
        raise job.user_error("import_error", e, "while importing %s: " % path) from None
    return module


def _call_provider(job, provider, device):
    name = getattr(provider, "__name__", "provider")
    try:
        params = inspect.signature(provider).parameters
    except (TypeError, ValueError):
        params = {}
    kw = {}
    if "batch_size" in params and job.req.get("batch_size") is not None:
        kw["batch_size"] = job.req["batch_size"]
    elif job.req.get("batch_size") is not None:
        raise JobError(
            "missing_inputs",
            "%s() takes no batch_size; add a `batch_size: int = 1` parameter to scale inputs"
            % name,
            job.path,
            def_line(provider),
        )
    if "device" in params:
        kw["device"] = device
    for key, env in (("rank", DIST_RANK), ("world_size", DIST_WORLD_SIZE)):
        if key in params and env in os.environ:
            kw[key] = int(os.environ[env])
    # A provider that does not place its values itself builds them on the job's device:
    # they would be moved there anyway, and a model built on the CPU and copied takes
    # much longer (ResNet-50: 0.73 s against 0.03 s on an H200). One that fails so (a CPU
    # generator, .numpy(), pin_memory) is called again as before, on the CPU.
    result = None
    if "device" not in params and device.type != "cpu":
        try:
            with device:
                result = provider(**kw)
        except Cancelled:
            raise
        except Exception:
            result = None
    try:
        if result is None:
            result = provider(**kw)
    except BaseException as e:
        raise job.user_error("user_exception", e, "in input provider %s(): " % name) from None
    takes_device = "device" in params
    if isinstance(result, dict) and set(result) <= {"args", "kwargs"}:
        return list(result.get("args", ())), dict(result.get("kwargs", {})), takes_device
    if isinstance(result, (tuple, list)):
        return list(result), {}, takes_device
    raise JobError(
        "bad_inputs",
        "%s() returned %s; return a tuple of positional arguments or "
        '{"args": [...], "kwargs": {...}}' % (name, type(result).__name__),
        job.path,
        def_line(provider),
    )


def _default_instance(job, owner, fn, params):
    try:
        sig = inspect.signature(owner)
        if all(
            p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            for p in sig.parameters.values()
        ):
            return owner()
    except BaseException as e:
        if isinstance(e, (TypeError, ValueError)):
            pass
        else:
            raise job.user_error(
                "user_exception", e, "constructing %s(): " % owner.__name__
            ) from None
    raise missing_inputs(job, fn, params, owner=owner)


def missing_inputs(job, fn, params, owner=None):
    """The error for a function with no inputs; the server adds a provider stub to it."""
    qual = job.req["qualname"]
    provider = qual.replace(".", "_") + "_inputs"
    names = [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    values = (["instance"] if owner is not None else []) + names
    return JobError(
        "missing_inputs",
        "%s(%s) needs inputs: define %s(batch_size=1, device=...) in %s.py beside %s (or at "
        'the project root) returning a tuple of arguments (or {"args": [...], "kwargs": '
        "{...}}), or map it in pyproject.toml under [tool.kernelscope.inputs]"
        % (qual, ", ".join(values), provider, INPUTS_MODULE, os.path.basename(job.path)),
        job.path,
        def_line(fn),
    )


def to_device(torch, value, device):
    if isinstance(value, (torch.Tensor, torch.nn.Module)):
        return value.to(device)
    if isinstance(value, list):
        return [to_device(torch, v, device) for v in value]
    if isinstance(value, tuple):
        return tuple(to_device(torch, v, device) for v in value)
    if isinstance(value, dict):
        return {k: to_device(torch, v, device) for k, v in value.items()}
    return value
