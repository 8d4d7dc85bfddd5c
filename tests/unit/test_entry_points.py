"""The programs the editor offers to profile a function through: scripts that import its
module and run something, tests that import and name it (tests/workloads/minigpt)."""

from __future__ import annotations

from pathlib import Path

from kernelscope.engine.entry_points import entry_points

from support import WORKLOADS

MINIGPT = WORKLOADS / "minigpt"


def test_training_scripts_and_the_test_that_names_the_class() -> None:
    found = entry_points(MINIGPT, "model", "GPT.forward")
    assert [(e.via, e.kind) for e in found] == [
        ("train.py", "script"),  # a module-level `while True:`, no main guard
        ("train_main.py", "script"),  # a main guard
        ("tests/test_model.py::test_forward", "test"),
    ]


def test_a_test_that_does_not_name_it_is_not_offered() -> None:
    found = entry_points(MINIGPT, "model", "Block.forward")
    assert [e.via for e in found] == ["train.py", "train_main.py"]


def test_modules_that_only_define_things_are_not_programs(tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text("def f():\n    return 1\n")
    (tmp_path / "helpers.py").write_text("import lib\n\ndef g():\n    return lib.f()\n")
    (tmp_path / "run.py").write_text("from lib import f\n\nif __name__ == '__main__':\n    f()\n")
    (tmp_path / "broken.py").write_text("import lib\nwhile True:\n  (\n")
    assert [e.via for e in entry_points(tmp_path, "lib", "f")] == ["run.py"]
