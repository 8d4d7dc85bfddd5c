"""The programs in a project that may call a function, found without running anything: scripts
that import its module and run something (a main guard or a loop at module level), and the
tests in test files that import it and name it. What the editor offers as "Profile `fn` as
called by train.py"."""

from __future__ import annotations

import ast
import os
import time
from dataclasses import dataclass
from pathlib import Path

#: Files read at most per project, and how long a scan is reused.
MAX_FILES = 300
MAX_BYTES = 256 * 1024
CACHE_S = 30.0
SKIP_DIRS = frozenset(
    {".git", ".kernelscope", "__pycache__", ".venv", "venv", "node_modules", "site-packages"}
)


@dataclass(frozen=True)
class EntryPoint:
    """A program as `--via` takes it, relative to the project's root."""

    via: str
    kind: str  # script | test


_cache: dict[tuple[Path, str, str], tuple[float, list[EntryPoint]]] = {}


def entry_points(root: Path, module: str, qualname: str, limit: int = 3) -> list[EntryPoint]:
    """Scripts first, then tests, at most `limit` of each, for `qualname` in `module`."""
    key = (root, module, qualname)
    hit = _cache.get(key)
    now = time.monotonic()
    if hit is not None and now - hit[0] < CACHE_S:
        return hit[1]
    scripts: list[EntryPoint] = []
    tests: list[EntryPoint] = []
    names = {qualname.split(".", maxsplit=1)[0], qualname.rsplit(".", 1)[-1]}
    for path in _python_files(root):
        tree = _parse(path)
        if tree is None or not _imports(tree, module):
            continue
        rel = path.relative_to(root).as_posix()
        if _is_test_file(path):
            tests += [
                EntryPoint(f"{rel}::{fn.name}", "test")
                for fn in tree.body
                if isinstance(fn, ast.FunctionDef)
                and fn.name.startswith("test")
                and names & _names_in(fn)
            ]
        elif _runs_something(tree):
            scripts.append(EntryPoint(_launched(tree, rel), "script"))
    found = sorted(scripts, key=lambda e: e.via)[:limit] + tests[:limit]
    _cache[key] = (now, found)
    return found


def _python_files(root: Path) -> list[Path]:
    out: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                out.append(Path(folder, name))
                if len(out) >= MAX_FILES:
                    return out
    return out


def _parse(path: Path) -> ast.Module | None:
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        return ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None


def _imports(tree: ast.Module, module: str) -> bool:
    """Whether the file imports `module` (by its dotted name, or its last part)."""
    last = module.rsplit(".", 1)[-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            a.name == module or a.name.rsplit(".", 1)[-1] == last for a in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom):
            name = node.module or ""
            if name == module or name.rsplit(".", 1)[-1] == last:
                return True
            if any(a.name == last for a in node.names):  # from pkg import model
                return True
    return False


def _runs_something(tree: ast.Module) -> bool:
    """A main guard, or a loop at module level (a training script without one)."""
    for node in tree.body:
        if isinstance(node, ast.For | ast.While):
            return True
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__"
        ):
            return True
    return False


def _launched(tree: ast.Module, rel: str) -> str:
    """How the script is run: through accelerate's launcher where it imports accelerate (its
    Accelerator reads the launcher's settings, from the user's accelerate config, only
    then), through torchrun where it needs its variables, else by itself."""
    if _imports_accelerate(tree):
        return f"accelerate launch {rel}"
    return f"torchrun --nproc-per-node 1 {rel}" if _needs_torchrun(tree) else rel


def _imports_accelerate(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        if any(name.split(".")[0] == "accelerate" for name in names):
            return True
    return False


#: torchrun's variables: a script that reads them with a default (`os.environ.get("RANK",
#: -1)`) or asks whether they are set runs without torchrun too (nanoGPT's train.py).
_RANK_VARIABLES = frozenset({"RANK", "LOCAL_RANK", "WORLD_SIZE"})


def _needs_torchrun(tree: ast.Module) -> bool:
    """A script that sets up its process group whatever its environment (a DDP program run by
    `torchrun`): offered as `torchrun --nproc-per-node 1 script.py`, one rank (raise it in
    the command)."""
    sets_up = asks = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "init_process_group":
                sets_up = True
            elif name == "get" and node.args and _is_rank_variable(node.args[0]):
                asks = True
        elif isinstance(node, ast.Compare) and _is_rank_variable(node.left):
            asks = asks or any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
    return sets_up and not asks


def _is_rank_variable(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value in _RANK_VARIABLES


def _is_test_file(path: Path) -> bool:
    return path.name.startswith("test_") or path.stem.endswith("_test")


def _names_in(fn: ast.FunctionDef) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
    return out
