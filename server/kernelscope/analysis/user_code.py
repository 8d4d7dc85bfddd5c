"""Which ``python_function`` frames are the user's code: not a library's, the standard
library's, a built-in's or generated code's. Only the user's frames place findings on lines,
so they are all the trace model keeps."""

from __future__ import annotations

import re
import sys
from functools import lru_cache

_PY_FRAME = re.compile(r"^(?P<path>.+)\((?P<line>\d{1,9})\): (?P<func>.+)$")

#: Paths of generated code (Inductor's cache, Triton's): never the user's.
GENERATED = ("torchinductor_", "/triton/", "/.triton/")
#: Kineto shortens a frame's path to its module path under sys.path ("torch/cuda/graphs.py"):
#: frames under these top-level names, or the standard library's, are not the user's.
LIBRARIES = frozenset(
    {
        "torch",
        "torchvision",
        "torchaudio",
        "timm",
        "transformers",
        "accelerate",
        "lightning",
        "pytorch_lightning",
        "numpy",
        "triton",
        "einops",
        "deepspeed",
        "apex",
        "xformers",
        "flash_attn",
        "safetensors",
        "tqdm",
        "_pytest",
        "pytest",
        "pluggy",
        "kernelscope_worker.py",
    }
) | frozenset(sys.stdlib_module_names)


def user_frame(name: str) -> tuple[str, int] | None:
    """(path, line) of a python_function frame of the user's code, None for library,
    built-in and generated frames."""
    parts = user_function(name)
    return None if parts is None else parts[:2]


def user_function(name: str) -> tuple[str, int, str] | None:
    """(path, def line, function name) of a python_function frame of the user's code, None
    for library, built-in and generated frames."""
    m = _PY_FRAME.match(name)
    if m is None:
        return None
    path = m["path"]
    top = path.lstrip("/").split("/", 1)[0]
    if (
        "site-packages" in path
        or path.startswith("<")
        or any(g in path for g in GENERATED)
        or top in LIBRARIES
        or top.removesuffix(".py") in LIBRARIES
    ):
        return None
    return path, int(m["line"]), m["func"]


@lru_cache(maxsize=1 << 16)
def is_user_frame(name: str) -> bool:
    """``user_frame(name)`` is not None; remembered per name (traces repeat a few thousand)."""
    return user_frame(name) is not None
