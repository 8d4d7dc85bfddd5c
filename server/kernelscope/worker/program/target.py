# pyright: basic
"""The target: its file imported fresh as a module, the function found by its qualified
name."""

import inspect
import os
import sys
import types
from typing import Any

from .errors import JobError


def load_module(job):
    source = job.req.get("source")
    if source is None:
        try:
            with open(job.path, "rb") as f:
                source = f.read()
        except FileNotFoundError:
            raise JobError("file_not_found", "no such file: %s" % job.path, job.path) from None
        except OSError as e:
            raise JobError(
                "file_not_found", "cannot read %s: %s" % (job.path, e.strerror), job.path
            ) from None
    try:
        code = compile(source, job.path, "exec", dont_inherit=True)
    except SyntaxError as e:
        raise JobError(
            "syntax_error",
            "SyntaxError: %s" % e.msg,
            job.path,
            e.lineno,
        ) from None
    name = job.req["module_name"]
    module = types.ModuleType(name)
    module.__file__ = job.path
    if "." in name:
        module.__package__ = name.rpartition(".")[0]
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException as e:
        raise job.user_error(
            "import_error", e, "while importing %s: " % os.path.basename(job.path)
        ) from None
    return module


def modules_of(path):
    """The imported modules whose file is the one at `path` (through links)."""
    real = os.path.realpath(path)
    name = os.path.basename(real)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not isinstance(file, str) or os.path.basename(file) != name:
            continue
        if os.path.realpath(file) == real:
            yield module


def resolve(job, module):
    obj: Any = module
    owner = None
    parts = job.req["qualname"].split(".")
    for i, part in enumerate(parts):
        if not hasattr(obj, part):
            where = ".".join(parts[:i]) or os.path.basename(job.path)
            raise JobError(
                "unknown_qualname",
                "%s has no %r%s" % (where, part, _known_names(job, obj)),
                job.path,
                None,
            )
        owner = obj if inspect.isclass(obj) else None
        obj = inspect.getattr_static(obj, part) if inspect.isclass(obj) else getattr(obj, part)
    if isinstance(obj, (staticmethod, classmethod)):
        obj = getattr(owner, parts[-1])
        owner = None
    if not callable(obj):
        raise JobError(
            "not_callable",
            "%s is a %s, not a function" % (job.req["qualname"], type(obj).__name__),
            job.path,
            None,
        )
    return obj, owner


def _known_names(job, obj):
    names = sorted(
        n
        for n, v in vars(obj).items()
        if not n.startswith("_")
        and (inspect.isfunction(v) or inspect.isclass(v))
        and (getattr(v, "__module__", None) == job.req["module_name"] or inspect.isclass(obj))
    )
    return " (defined: %s)" % ", ".join(names[:20]) if names else ""


def def_line(fn):
    """The first line of the function's code (its def), 0 when it has none."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return code.co_firstlineno if code is not None else 0
