"""A loop of the program's script marks its own iterations (worker/program/loop_mark.py):
compiled with one call first in its body, on the body's first line, and nothing else of the
script changed."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from kernelscope.worker.program.loop_mark import MARK, LoopMark, marked_code

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
