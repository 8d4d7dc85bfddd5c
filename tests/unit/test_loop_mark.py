"""A loop of the program's script marks its own iterations (worker/program/loop_mark.py):
compiled with one call first in its body, on the body's first line, and nothing else of the
script changed."""

from __future__ import annotations

import builtins
import importlib
import runpy
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelscope.worker.program.loop_mark import MARK, LoopMark, MarkingImport, marked_code

SCRIPT = """\
from __future__ import annotations

seen = []


def work(n: int) -> list[int]:
    out = []
    for i in range(n):
        if i % 2:
            continue
        out.append(i)
    return out


k = 0
while k < 3:
    seen.append(work(k + 1))
    k += 1
"""


def lines(text: str, start: str) -> tuple[int, int]:
    """The line of the loop that starts with `start` and of its body's first statement."""
    rows = text.splitlines()
    loop = next(n for n, row in enumerate(rows, 1) if row.lstrip().startswith(start))
    return loop, loop + 1


class Marks:
    """What a marked script calls: ``MARK()`` each iteration, ``MARK.exit()`` as it ends."""

    def __init__(self, calls: list[object]) -> None:
        self.calls = calls

    def __call__(self) -> None:
        self.calls.append(1)

    def exit(self) -> None:
        self.calls.append("exit")


def run(code: object, calls: list[object]) -> dict[str, object]:
    namespace: dict[str, object] = {"__name__": "__main__", MARK: Marks(calls)}
    exec(code, namespace)  # type: ignore[arg-type]
    return namespace


def test_a_module_level_while_loop_calls_the_mark_once_an_iteration() -> None:
    loop, body = lines(SCRIPT, "while k < 3")
    calls: list[object] = []
    namespace = run(marked_code(SCRIPT, "train.py", loop, body), calls)
    assert calls == [1, 1, 1, "exit"]
    assert namespace["seen"] == [[0], [0], [0, 2]]  # the program's own result, unchanged


def test_a_loop_in_a_function_counts_iterations_that_continue() -> None:
    loop, body = lines(SCRIPT, "for i in range(n)")
    calls: list[object] = []
    run(marked_code(SCRIPT, "train.py", loop, body), calls)
    # work(1), work(2), work(3): every iteration, continued or not, and each run's end
    assert calls == [1, "exit", 1, 1, "exit", 1, 1, 1, "exit"]


def test_the_loop_ends_however_it_is_left() -> None:
    """A break, a return from inside, an exception: each ends the loop's run (its last
    iteration ends there, not at the next run's first)."""
    text = (
        "def f(n):\n"
        "    for i in range(10):\n"
        "        if i == n:\n"
        "            return i\n"
        "        if i == 5:\n"
        "            break\n"
        "        if i == 7:\n"
        "            raise ValueError(i)\n"
        "    return -1\n"
        "out = [f(1), f(7)]\n"
    )
    calls: list[object] = []
    namespace = run(marked_code(text, "train.py", 2, 3), calls)
    assert namespace["out"] == [1, -1]
    assert calls == [1, 1, "exit", 1, 1, 1, 1, 1, 1, "exit"]  # f(7) broke at i == 5
    calls.clear()
    with pytest.raises(ValueError):
        unbroken = text.replace("i == 5", "i == 9").replace("f(7)", "f(9)")
        run(marked_code(unbroken, "train.py", 2, 3), calls)
    assert calls == [1, 1, "exit", 1, 1, 1, 1, 1, 1, 1, 1, "exit"]  # f(9) raised at i == 7


@pytest.mark.parametrize(
    ("loop", "body"),
    [(16, 99), (3, 4), (999, 1000)],  # a body elsewhere; no loop at the line; past the end
)
def test_no_such_loop_leaves_the_script_to_the_tracer(loop: int, body: int) -> None:
    assert marked_code(SCRIPT, "train.py", loop, body) is None


def test_a_script_that_does_not_parse_is_left_to_compile_as_it_is() -> None:
    assert marked_code("while True:\n    x = (\n", "train.py", 1, 2) is None


def test_errors_in_the_loop_keep_their_lines() -> None:
    text = "for i in range(2):\n    y = 1\n    raise ValueError(i)\n"
    code = marked_code(text, "train.py", 1, 2)
    with pytest.raises(ValueError) as caught:
        run(code, [])
    frame = traceback.extract_tb(caught.value.__traceback__)[-1]
    assert (frame.filename, frame.lineno) == ("train.py", 3)


def test_the_mark_calls_its_step_machine_only_in_its_own_process(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    loop, body = lines(SCRIPT, "while k < 3")
    calls: list[int] = []
    mark = LoopMark(loop, body, lambda: calls.append(1))
    assert mark.prepare(str(script))
    mark()
    mark.pid += 1  # as a forked child sees it
    mark()
    assert calls == [1]
    assert not LoopMark(loop, body, lambda: None).prepare(str(tmp_path / "missing.py"))


def test_the_exit_says_whether_the_loop_was_a_modules_own() -> None:
    """A loop of a module's top-level code never runs again (the job can fail at its end);
    one in a function can."""
    exits: list[bool] = []
    mark = LoopMark(1, 2, lambda: None, exits.append)
    exec("mark.exit()", {"mark": mark})

    def in_a_function() -> None:
        mark.exit()

    in_a_function()
    assert exits == [True, False]


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """`ks_pkg.loops` on sys.path: SCRIPT as a module of a package the program imports."""
    (tmp_path / "ks_pkg").mkdir()
    (tmp_path / "ks_pkg" / "__init__.py").write_text("")
    (tmp_path / "ks_pkg" / "loops.py").write_text(SCRIPT)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    yield tmp_path / "ks_pkg" / "loops.py"
    for name in ("ks_pkg", "ks_pkg.loops"):
        sys.modules.pop(name, None)
    vars(builtins).pop(MARK, None)


def importer_of(path: Path, start: str, calls: list[object]) -> MarkingImport:
    loop, body = lines(SCRIPT, start)
    mark = LoopMark(loop, body, lambda: calls.append(1), lambda once: calls.append("exit"))
    assert mark.prepare(str(path))
    return MarkingImport(str(path), mark, lambda: calls.append("marked"))


def test_a_loop_in_an_imported_module_marks_itself_as_it_is_imported(package: Path) -> None:
    """Before 3.12 the tracer that finds a module's loop slowed Lightning's epoch loop 1.6x;
    the module, imported through the finder, marks its iterations itself and no bytecode of
    the marked code is cached."""
    calls: list[object] = []
    importer = importer_of(package, "for i in range(n)", calls)
    assert not importer.imported()
    importer.install()
    try:
        module = importlib.import_module("ks_pkg.loops")
    finally:
        importer.remove()
    assert importer not in sys.meta_path and importer.imported()
    assert calls[0] == "marked"  # before any of the module's code ran
    calls.clear()
    assert module.work(4) == [0, 2]
    assert calls == [1, 1, 1, 1, "exit"]
    assert module.__file__ == str(package)  # the module as it is, from its own file
    cache = package.parent / "__pycache__"
    assert list(cache.glob("__init__.*.pyc"))  # the package's own import cached it ...
    assert not list(cache.glob("loops.*.pyc"))  # ... the marked module's code was not


def test_a_module_run_with_dash_m_is_marked_too(package: Path) -> None:
    """runpy runs the code in a namespace of its own: the mark is found among the builtins."""
    calls: list[object] = []
    importer = importer_of(package, "while k < 3", calls)
    importer.install()
    try:
        namespace = runpy.run_module("ks_pkg.loops", run_name="__main__")
    finally:
        importer.remove()
    assert calls == ["marked", 1, 1, 1, "exit"]
    assert namespace["seen"] == [[0], [0], [0, 2]]


def test_a_module_imported_already_or_elsewhere_is_left_to_the_tracer(
    package: Path, tmp_path: Path
) -> None:
    calls: list[object] = []
    importer = importer_of(package, "for i in range(n)", calls)
    importlib.import_module("ks_pkg.loops")
    assert importer.imported()  # the job then arms the tracer alone
    other = importer_of(package, "for i in range(n)", calls)
    assert other.find_spec("ks_pkg.other") is None  # another name: not looked up at all
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "loops.py").write_text(SCRIPT)  # the same name, another file
    assert other.find_spec("loops", [str(elsewhere)]) is None
    assert other.find_spec("loops", [str(package.parent)]) is not None  # the file itself
    assert calls == []


def test_every_import_of_the_file_is_marked(package: Path) -> None:
    """Imported again (after a failed import, a reload, under a second name), the file is
    marked again: the tracer went at the first."""
    calls: list[object] = []
    importer = importer_of(package, "for i in range(n)", calls)
    importer.install()
    try:
        first = importlib.import_module("ks_pkg.loops")
        sys.modules.pop("ks_pkg.loops")
        second = importlib.import_module("ks_pkg.loops")
    finally:
        importer.remove()
    assert first is not second and calls.count("marked") == 2  # SCRIPT runs work() too
    calls.clear()
    second.work(2)
    assert calls == [1, 1, "exit"]


def test_a_compiled_loop_keeps_its_graph(package: Path) -> None:
    """Under torch.compile the mark is left out of the graph (Dynamo reads
    is_compiling() as True): one graph, no break, as the program compiles it unmarked."""
    torch = pytest.importorskip("torch")
    (package.parent / "compiled.py").write_text(
        "import torch\n\n\ndef f(x, n):\n    for i in range(n):\n        x = torch.sin(x) + i\n"
        "    return x\n"
    )
    path = package.parent / "compiled.py"
    calls: list[object] = []
    mark = LoopMark(5, 6, lambda: calls.append(1), lambda once: calls.append("exit"),
                    torch.compiler.is_compiling)  # fmt: skip
    assert mark.prepare(str(path))
    importer = MarkingImport(str(path), mark, lambda: None)
    importer.install()
    try:
        module = importlib.import_module("ks_pkg.compiled")
    finally:
        importer.remove()
        sys.modules.pop("ks_pkg.compiled", None)
    module.f(torch.ones(3), 2)
    assert calls == [1, 1, "exit"]  # eager: each iteration
    calls.clear()
    torch._dynamo.reset()
    explained = torch._dynamo.explain(module.f)(torch.ones(3), 3)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    assert calls == []  # compiled: the iterations are the graph's, not seen
