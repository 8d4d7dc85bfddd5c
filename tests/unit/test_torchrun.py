"""A torchrun command line as `--via` takes it: the ranks, the program, what is refused."""

from __future__ import annotations

import shlex

import pytest

from kernelscope.engine.torchrun import (
    TorchrunError,
    is_torchrun,
    other_launcher,
    ranks_for,
    split_torchrun,
)


@pytest.mark.parametrize(
    ("command", "ranks", "program"),
    [
        ("torchrun --nproc_per_node=2 train.py --lr 3", 2, ["train.py", "--lr", "3"]),
        ("torchrun --nproc-per-node 4 --standalone train.py", 4, ["train.py"]),
        ("/opt/venv/bin/torchrun train.py", 1, ["train.py"]),
        ("-m torch.distributed.run --nnodes=1 --nproc_per_node 2 t.py", 2, ["t.py"]),
        ("torchrun --nproc-per-node 2 -m pkg.train --x", 2, ["-m", "pkg.train", "--x"]),
        ("torchrun --master-port 29501 --rdzv_backend c10d --max_restarts=0 t.py", 1, ["t.py"]),
        ("torchrun --nproc-per-node 2 -- t.py --nproc 9", 2, ["t.py", "--nproc", "9"]),
        ("torchrun --node_rank 0 --nnodes 1:1 t.py", 1, ["t.py"]),
    ],
)  # fmt: skip
def test_the_ranks_and_the_program(command: str, ranks: int, program: list[str]) -> None:
    words = shlex.split(command)
    assert is_torchrun(words)
    assert split_torchrun(words) == (ranks, program)


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("torchrun --nnodes 2 t.py", "ranks of one host"),
        ("torchrun --nnodes=1:4 t.py", "ranks of one host"),
        ("torchrun --node-rank 1 t.py", "node rank 0"),
        ("torchrun --nproc-per-node gpu t.py", "give the number of ranks"),
        ("torchrun --nproc-per-node 0 t.py", "give the number of ranks"),
        ("torchrun --no-python ./a.out", "Python programs only"),
        ("torchrun --frobnicate t.py", "not one kernelscope knows"),
        ("torchrun --nproc-per-node", "needs a value"),
        ("torchrun --standalone", "names no program"),
    ],
)
def test_what_is_refused(command: str, says: str) -> None:
    with pytest.raises(TorchrunError, match=says):
        split_torchrun(shlex.split(command))


def test_other_programs_are_not_torchrun() -> None:
    assert not is_torchrun(["train.py", "torchrun"])
    assert not is_torchrun(["-m", "pkg.train"])
    assert not is_torchrun([])


def test_the_ranks_of_a_job() -> None:
    assert ranks_for(None, 2, None) == 2  # torchrun's
    assert ranks_for(2, 2, 4) == 2
    assert ranks_for(None, 0, 4) == 4  # the project's
    assert ranks_for(None, 0, None) == 1
    assert ranks_for(3, 0, 4) == 3  # --nproc over the project's
    with pytest.raises(TorchrunError, match="--nproc 3 and the torchrun command's 2 ranks"):
        ranks_for(3, 2, None)
    with pytest.raises(TorchrunError, match=r"'s 1 rank \(its --nproc-per-node, 1 when not"):
        ranks_for(2, 1, None)


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("deepspeed --num_gpus 2 train.py", "deepspeed.init_distributed() reads torchrun's"),
        ("-m torch.distributed.launch --nproc_per_node 2 t.py", "not --local-rank"),
        ("mpirun -np 2 python t.py", "mpirun is not followed"),
    ],
)
def test_other_launchers_say_what_to_give_instead(command: str, says: str) -> None:
    found = other_launcher(shlex.split(command))
    assert found is not None and says in found
    assert "torchrun --nproc-per-node N" in found


@pytest.mark.parametrize("command", ["accelerate config", "-m accelerate.commands.env"])
def test_accelerates_other_commands_are_not_followed(command: str) -> None:
    found = other_launcher(shlex.split(command))
    assert (
        found
        == "of accelerate's commands only `accelerate launch [options] script.py ...` is followed"
    )


@pytest.mark.parametrize("command", ["uv run train.py", "/usr/bin/poetry run python t.py"])
def test_an_environment_tools_run_says_to_give_its_interpreter(command: str) -> None:
    found = other_launcher(shlex.split(command))
    assert found is not None and "run` chooses the interpreter" in found
    assert "as --python" in found


def test_programs_are_not_other_launchers() -> None:
    assert other_launcher(["train.py"]) is None
    assert other_launcher(["-m", "pkg.train"]) is None
    assert other_launcher(shlex.split("torchrun --nproc-per-node 2 t.py")) is None


def test_an_epoch_functions_loop_is_its_own_not_a_helpers() -> None:
    from kernelscope import pyfunctions

    source = (
        "def train_epoch(model, loader):\n"
        "    def log(m):\n"
        "        for k, v in m.items():\n"
        "            print(k, v)\n"
        "    with open('x') as f:\n"
        "        for batch in loader:\n"
        "            model(batch)\n"
        "    while False:\n"
        "        pass\n"
    )
    fn = pyfunctions.find(source, "train_epoch")
    assert fn is not None and pyfunctions.first_loop(source, fn) == 6
    plain = "def f():\n    return 1\n"
    found = pyfunctions.find(plain, "f")
    assert found is not None and pyfunctions.first_loop(plain, found) is None
