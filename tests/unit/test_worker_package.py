"""The worker as a package: packed into one deterministic zip inside the loader's text,
imported from memory on the far side, standard library + torch only, Python >= 3.9."""

from __future__ import annotations

import ast
import linecache
import sys
import traceback
from pathlib import Path

import pytest

from kernelscope import worker
from kernelscope.worker import worker_bundle, worker_sources

from support.worker import PACKAGE, worker_modules, worker_texts

PROGRAM = Path(worker.__file__).parent / "program"
#: What the worker may import besides itself: the standard library, torch, NVML's bindings,
#: and pytest (only to run a pytest node id the user names, with the user's own pytest).
ALLOWED_THIRD_PARTY = {"torch", "pynvml", "numpy", "pytest"}  # pytest: only for a pytest entry


def test_every_module_of_the_package_travels_in_the_bundle_as_written() -> None:
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in PROGRAM.glob("*.py")}
    assert len(on_disk) >= 15
    assert worker_texts() == on_disk


def test_the_bundle_is_the_same_bytes_every_time() -> None:
    first = worker_bundle.__wrapped__()
    worker_sources.cache_clear()
    assert worker_bundle.__wrapped__() == first


def test_modules_come_from_memory_with_their_own_origin() -> None:
    modules = worker_modules()
    for name, module in modules.items():
        assert module.__name__ == f"{PACKAGE}.{name}"
        assert module.__file__ == f"<{PACKAGE}>/{name}.py"
        assert not Path(module.__file__).exists()


def test_a_traceback_through_the_worker_shows_its_lines() -> None:
    channel = worker_modules()["channel"].Channel(-1, -1)
    with pytest.raises(OSError) as raised:
        channel.receive()
    last = traceback.extract_tb(raised.value.__traceback__)[-1]
    assert last.filename == f"<{PACKAGE}>/channel.py"
    assert last.line is not None and "os.read" in last.line
    assert linecache.getlines(last.filename) == worker_texts()["channel.py"].splitlines(True)


def _imports(text: str) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("name", sorted(worker_texts()))
def test_a_module_imports_only_the_standard_library_torch_and_its_siblings(name: str) -> None:
    text = worker_texts()[name]
    outside = _imports(text) - set(sys.stdlib_module_names) - ALLOWED_THIRD_PARTY
    assert outside == set(), f"{name} imports {outside}"
    ast.parse(text, feature_version=(3, 9))  # the oldest Python a GPU host may run


def test_the_loader_runs_on_python_39_and_imports_only_the_standard_library() -> None:
    text = (PROGRAM.parent / "loader.py").read_text(encoding="utf-8")
    ast.parse(text, feature_version=(3, 9))
    assert _imports(text) - set(sys.stdlib_module_names) == {PACKAGE}


@pytest.mark.parametrize("name", sorted(worker_texts()))
def test_no_code_object_api_newer_than_python_39(name: str) -> None:
    """`code.co_lines()` (3.10+) and `co_qualname` (3.11+) only through a fallback: the
    worker's loop watch once used co_lines() and would have failed on a 3.9 GPU host."""
    text = worker_texts()[name]
    assert ".co_lines(" not in text
    assert ".co_qualname" not in text  # getattr(code, "co_qualname", None) is how it is read
