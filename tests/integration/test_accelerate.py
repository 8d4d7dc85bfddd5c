"""A program as Hugging Face Accelerate's launcher runs it (tests/workloads/
accelerate_program.py): `--via "accelerate launch [options] script.py ..."` gives the program
what accelerate's own launcher would (its mixed precision, its threads per process, its
processes), asked of the installed accelerate, and names it so on the call line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kernelscope.cli.main import main

from support import WORKLOADS

#: The backward of autocast's casts: in the step only when the launcher's bf16 reached it.
CAST_BACKWARD = "autograd::engine::evaluate_function: ToCopyBackward0"


@pytest.fixture
def program(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'accel'\n")
    shutil.copy(WORKLOADS / "accelerate_program.py", tmp_path / "accelerate_program.py")
    return tmp_path


def profile(project: Path, via: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    status = main(
        ["profile", f"{project}/accelerate_program.py::train_step", "--via", via, "--cwd",
         str(project), "--device", "cpu", "--wait", "0", "--warmup", "1", "--active", "3",
         "--no-memory", "--no-lines", "--json"]
    )  # fmt: skip
    out = capsys.readouterr()
    return status, json.loads(out.out) if out.out else None, out.err


@pytest.mark.parametrize("precision", ["bf16", "no"])
def test_the_launchers_settings_reach_the_program(
    program: Path, capsys: pytest.CaptureFixture[str], precision: str
) -> None:
    via = (
        f"accelerate launch --mixed_precision {precision} --cpu --num_cpu_threads_per_process 1 "
        "accelerate_program.py --steps 30"
    )
    status, report, err = profile(program, via, capsys)
    assert status == 0, err
    assert report["call_site"]["via"] == via and report["call_site"]["captured"]
    assert report["device"]["threads"] == 1  # accelerate's OMP_NUM_THREADS, set in the worker
    casts = CAST_BACKWARD in {op["name"] for op in report["ops"]}
    assert casts is (precision == "bf16")


def test_accelerates_processes_run_as_ranks(
    program: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    via = "accelerate launch --multi_gpu --num_processes 2 accelerate_program.py --steps 30"
    status, report, err = profile(program, via, capsys)
    assert status == 0, err
    assert report["world_size"] == 2
    for rank_report in report["reports"]:
        assert rank_report["call_site"]["via"] == via


@pytest.mark.parametrize(
    ("via", "says"),
    [
        ("accelerate launch --use_deepspeed accelerate_program.py",
         "accelerate launch with DeepSpeed is not followed"),
        ("accelerate launch --bogus 1 accelerate_program.py", "unrecognized arguments: --bogus"),
        ("accelerate launch --num_machines 2 accelerate_program.py",
         "--num_machines 2: kernelscope runs the processes of one host"),
        ("accelerate config", "only `accelerate launch [options] script.py ...` is followed"),
    ],
)  # fmt: skip
def test_what_cannot_be_followed_is_said(
    program: Path, capsys: pytest.CaptureFixture[str], via: str, says: str
) -> None:
    status, _, err = profile(program, via, capsys)
    assert status == 2
    assert says in err and "Traceback" not in err, err


async def test_the_editor_profiles_an_accelerate_program(program: Path) -> None:
    """The profile command follows the launcher; a launch it cannot follow is an LSP error,
    and the server stays up for the next."""
    from lsprotocol import types as lsp

    from support.lsp import open_doc, start, stop

    settings = {"device": "cpu", "schedule": {"wait": 0, "warmup": 1, "active": 3}}
    client = await start(program, settings=settings)
    try:
        uri = open_doc(client, program / "accelerate_program.py")
        via = "accelerate launch --cpu --mixed_precision bf16 accelerate_program.py --steps 30"
        result = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("kernelscope.profile", [uri, "train_step", {"via": via}])
        )
        assert result["ok"], result
        with pytest.raises(Exception, match=r"DeepSpeed is not followed"):
            await client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(
                    "kernelscope.profile",
                    [uri, "train_step", {"via": "accelerate launch --use_deepspeed x.py"}],
                )
            )
        again = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("kernelscope.profile", [uri, "train_step", {"via": via}])
        )
        assert again["ok"], again
    finally:
        await stop(client)
