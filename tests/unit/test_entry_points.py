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


def test_a_ddp_script_is_offered_through_torchrun(tmp_path: Path) -> None:
    """A script that sets up its process group whatever its environment fails without
    torchrun's variables: it is offered as torchrun runs it, one rank. One that asks for
    them first (nanoGPT's `int(os.environ.get("RANK", -1)) != -1`) runs alone too."""
    (tmp_path / "model.py").write_text("def f():\n    return 1\n")
    (tmp_path / "ddp.py").write_text(
        "import torch.distributed as dist\nfrom model import f\n\n"
        "if __name__ == '__main__':\n    dist.init_process_group('nccl')\n    f()\n"
    )
    (tmp_path / "nano.py").write_text(
        "import os\nfrom torch.distributed import init_process_group\nfrom model import f\n"
        "ddp = int(os.environ.get('RANK', -1)) != -1\nif ddp:\n    init_process_group('nccl')\n"
        "while True:\n    f()\n"
    )
    (tmp_path / "asks.py").write_text(
        "import os, torch.distributed as dist\nimport model\n\nif __name__ == '__main__':\n"
        "    if 'LOCAL_RANK' in os.environ:\n        dist.init_process_group('gloo')\n"
        "    model.f()\n"
    )
    found = [e.via for e in entry_points(tmp_path, "model", "f")]
    assert found == ["asks.py", "nano.py", "torchrun --nproc-per-node 1 ddp.py"]


def test_a_script_that_uses_accelerate_is_offered_through_its_launcher(tmp_path: Path) -> None:
    """Its Accelerator reads the user's accelerate config (mixed precision, processes) only
    through `accelerate launch`; `python train.py` runs it without."""
    (tmp_path / "model.py").write_text("def f():\n    return 1\n")
    (tmp_path / "train.py").write_text(
        "from accelerate import Accelerator\nfrom model import f\n\n"
        "if __name__ == '__main__':\n    Accelerator()\n    f()\n"
    )
    (tmp_path / "plain.py").write_text(
        "import accelerated\nimport model\nwhile True:\n    model.f()\n"
    )
    found = [e.via for e in entry_points(tmp_path, "model", "f")]
    assert found == ["accelerate launch train.py", "plain.py"]
