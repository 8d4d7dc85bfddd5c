"""An ``accelerate launch`` command line as `--via` takes it: what starts it, and the words
accelerate's own parser is given."""

from __future__ import annotations

import shlex

import pytest

from kernelscope.engine.accelerate_launch import is_accelerate, launch_args


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("accelerate launch train.py --lr 3", ["train.py", "--lr", "3"]),
        ("/opt/venv/bin/accelerate launch --cpu t.py", ["--cpu", "t.py"]),
        ("-m accelerate.commands.launch --num_processes 2 t.py", ["--num_processes", "2", "t.py"]),
        ("-m accelerate.commands.accelerate_cli launch -m pkg.t", ["-m", "pkg.t"]),
    ],
)  # fmt: skip
def test_accelerate_launch_and_its_arguments(command: str, args: list[str]) -> None:
    words = shlex.split(command)
    assert is_accelerate(words)
    assert launch_args(words) == args


@pytest.mark.parametrize(
    "command", ["accelerate config", "accelerate", "train.py launch", "torchrun launch t.py"]
)
def test_other_commands_are_not_accelerate_launch(command: str) -> None:
    assert not is_accelerate(shlex.split(command))
