"""The worker package as shipped, loaded in the test process from the bundle's own bytes
(the loader's finder, as a GPU host runs it), not from the server's copies of its files."""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType
from typing import Any

from kernelscope.worker import worker_source

PACKAGE = "kernelscope_worker"


@cache
def _finder() -> Any:
    namespace: dict[str, Any] = {"__name__": "kernelscope_worker_test"}
    exec(compile(worker_source(), "kernelscope_worker.py", "exec"), namespace)
    return namespace["install"]()


def worker_texts() -> dict[str, str]:
    """The package's sources as shipped: name in the zip -> text."""
    return dict(_finder().sources)


@cache
def worker_modules() -> dict[str, ModuleType]:
    """Every module of the shipped package by its name in the zip (``lines``, ...)."""
    names = sorted(n[: -len(".py")] for n in worker_texts() if n != "__init__.py")
    return {n: importlib.import_module(f"{PACKAGE}.{n}") for n in names}


def worker_namespace() -> dict[str, Any]:
    """The public names of every module of the package, in one namespace (they are unique)."""
    out: dict[str, Any] = {}
    for module in worker_modules().values():
        for key, value in vars(module).items():
            if not key.startswith("__"):
                out.setdefault(key, value)
    return out
