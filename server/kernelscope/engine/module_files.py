"""A target named by its module (`timm.models.resnet::ResNet.forward`), as installed code is
known to its users, found as a file without importing it: the worker's interpreter finds the
top-level package (``importlib.util.find_spec`` of a top-level name runs none of its code)
and the submodules are looked up in its folders."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: Prints where a top-level module is: its file, then its package's folders.
_FIND = (
    "import importlib.util, sys\n"
    "s = importlib.util.find_spec(sys.argv[1])\n"
    "print(s.origin or '' if s else '')\n"
    "print(*(s.submodule_search_locations or []) if s else [], sep='\\n')\n"
)
FIND_TIMEOUT_S = 30.0


def is_module_name(text: str) -> bool:
    """Whether `text` reads as a dotted module name (``pkg.sub.mod``), not a path (a name
    ending in ``.py`` is a file's)."""
    parts = text.split(".")
    return parts[-1] != "py" and all(part.isidentifier() for part in parts)


def module_file(name: str, python: str | None = None) -> Path | None:
    """The source file of module `name` for the interpreter `python` (this one by default),
    looked up from the current folder as ``python -c`` would; None where it has none."""
    top, _, rest = name.partition(".")
    try:
        proc = subprocess.run(
            [python or sys.executable, "-c", _FIND, top],
            capture_output=True,
            text=True,
            timeout=FIND_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    origin, *folders = proc.stdout.splitlines() or [""]
    if not rest:
        return Path(origin) if origin.endswith(".py") else None
    for folder in filter(None, folders):
        base = Path(folder).joinpath(*rest.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None
