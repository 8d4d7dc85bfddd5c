"""`kernelscope profile --nproc N` on the CPU: real ranks under torch.distributed with gloo
(tests/workloads/distributed.py): a DDP training step on 2 and 4 ranks, a straggler made by
the input provider (it takes `rank` and `world_size`), a rank that raises, and a hang in a
collective."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kernelscope.cli.main import main

from support import WORKLOADS


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'dist'\n")
    shutil.copy(WORKLOADS / "distributed.py", tmp_path / "distributed.py")
    return tmp_path


def profile(
    project: Path, qualname: str, nproc: int, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, Any, str]:
    status = main(
        [
            "profile",
            f"{project}/distributed.py::{qualname}",
            "--nproc",
            str(nproc),
            "--device",
            "cpu",
            "--wait",
            "0",
            "--warmup",
            "1",
            "--active",
            "3",
            "--json",
            *extra,
        ]
    )
    out = capsys.readouterr()
    return status, json.loads(out.out), out.err


#: The workload's DDP model: Linear(128, 256), ReLU, Linear(256, 128), weights and biases.
DDP_PARAMETERS = 128 * 256 + 256 + 256 * 128 + 128


@pytest.mark.parametrize("nproc", [2, 4])
def test_a_ddp_step_on_ranks(project: Path, capsys: pytest.CaptureFixture[str], nproc: int) -> None:
    status, report, err = profile(project, "train_step", nproc, capsys)
    assert status == 0, err
    assert report["world_size"] == nproc and report["backend"] == "gloo"
    assert [r["rank"] for r in report["ranks"]] == list(range(nproc))
    assert len(report["reports"]) == nproc
    for row, rank_report in zip(report["ranks"], report["reports"], strict=True):
        assert row["comm_us_per_step"] > 0  # DDP's gradient all-reduce, found by name
        names = {op["name"] for op in rank_report["ops"]}
        assert "gloo:all_reduce" in names and "aten::mm" in names
        reps = rank_report["timing"]["unprofiled_reps"]
        assert reps == report["reports"][0]["timing"]["unprofiled_reps"]  # agreed: lockstep
        comm = rank_report["communication"]
        assert (comm["world_size"], comm["rank"], comm["backend"]) == (nproc, row["rank"], "gloo")
        (grads,) = comm["collectives"]  # one DDP bucket: every gradient in one all-reduce
        assert grads["kind"] == "all_reduce" and grads["dtype"] == "float"
        assert grads["bytes"] == DDP_PARAMETERS * 4 and grads["calls"] == 1
        assert grads["busbw_gbps"] == pytest.approx(grads["algbw_gbps"] * 2 * (nproc - 1) / nproc)
        assert grads["algbw_gbps"] == pytest.approx(grads["bytes"] / grads["us"] / 1e3)
        assert 0 <= comm["overlap_us"] <= comm["comm_us"] <= comm["window_us"]
        assert comm["idle_us"] + comm["comm_us"] + comm["compute_us"] - comm["overlap_us"] == (
            pytest.approx(comm["window_us"])
        )
        assert 0 <= row["overlap_share"] <= 1 and row["busbw_gbps"] > 0
    assert report["collectives"] == report["reports"][0]["communication"]["collectives"]
    assert report["verdict"]["bound"] in {"straggler", "communication", "host"}
    with gzip.open(report["merged_trace"], "rt") as f:
        merged = json.load(f)
    processes = {
        e["args"]["name"] for e in merged["traceEvents"] if e.get("name") == "process_name"
    }
    assert {f"rank {r} · python" for r in range(nproc)} <= processes


def test_the_rank_the_others_wait_for(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, report, err = profile(project, "uneven", 2, capsys)
    assert status == 0, err
    rows = [(r["rank"], r["us_per_call"], r["comm_us_per_step"]) for r in report["ranks"]]
    assert report["straggler"] == 1, rows  # the provider gave the last rank 16x the rows
    assert report["verdict"]["bound"] == "straggler"
    (finding,) = report["findings"]
    assert finding["code"] == "KS902" and finding["evidence"]["rank"] == 1
    assert finding["path"].endswith("distributed.py") and finding["line"] in range(24, 30)
    waits = [r["comm_us_per_step"] for r in report["ranks"]]
    assert waits[0] > waits[1]  # rank 0 waits in all_reduce, rank 1 computes


def test_a_rank_that_raises_stops_all_and_is_named(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = profile(project, "raises", 2, capsys)
    assert status == 1
    error = out["error"]
    assert error["message"].startswith("rank 1 of 2 failed: ")
    assert "rank 1: ValueError: rank 1 has a bad shard" in error["message"]
    assert error["line"] == 42 and error["path"].endswith("distributed.py")  # the raise
    assert "rank 1 of 2 failed" in err and "Traceback" not in err


def test_a_hang_in_a_collective_times_out_naming_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = profile(project, "hangs", 2, capsys, "--timeout", "16")
    assert status == 1, err
    message = out["error"]["message"]
    assert message.startswith("rank 0 of 2 failed: rank 0: ")
    assert "Timed out" in message and "distributed.py:54" in message  # dist.all_reduce(x)
    assert "rank 1: never arrived" in message


def test_the_projects_nproc_is_the_default(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "pyproject.toml").write_text(
        "[project]\nname = 'dist'\n\n[tool.kernelscope]\nnproc = 2\n"
    )
    status = main(["profile", f"{project}/distributed.py::uneven", "--device", "cpu", "--json"])
    out = capsys.readouterr()
    assert status == 0, out.err
    assert json.loads(out.out)["world_size"] == 2


async def test_the_editor_profiles_on_ranks(project: Path) -> None:
    from lsprotocol import types as lsp

    from support.lsp import open_doc, start, stop

    settings = {"device": "cpu", "schedule": {"wait": 0, "warmup": 1, "active": 3}}
    client = await start(project, settings=settings)
    try:
        uri = open_doc(client, project / "distributed.py")
        result = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("kernelscope.profile", [uri, "uneven", {"nproc": 2}])
        )
        assert result["ok"], result
        assert result["summary"].startswith("2 ranks (gloo): straggler-bound")
        diags = client.diagnostics[uri]
        (straggler,) = [d for d in diags if d.code == "KS902"]
        assert straggler.range.start.line + 1 in range(24, 30)
        with pytest.raises(Exception, match=r"options.nproc must be an integer >= 1"):
            await client.workspace_execute_command_async(
                lsp.ExecuteCommandParams("kernelscope.profile", [uri, "uneven", {"nproc": 0}])
            )
    finally:
        await stop(client)


# A program as torchrun runs it (tests/workloads/ddp_program.py): `--via "torchrun ..."`
# starts its ranks; each rank runs the program, which sets up its own process group, and
# the ranks replay their captured calls in lockstep (agreeing through kernelscope's store).
PROGRAM_PARAMETERS = 64 * 128 + 128 + 128 * 64 + 64


@pytest.fixture
def program(project: Path) -> Path:
    shutil.copy(WORKLOADS / "ddp_program.py", project / "ddp_program.py")
    return project


def profile_program(
    project: Path, via: str, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, Any, str]:
    status = main(
        ["profile", f"{project}/ddp_program.py::train_step", "--via", via, "--cwd",
         str(project), "--device", "cpu", "--wait", "0", "--warmup", "1", "--active", "3",
         "--no-memory", "--json", *extra]
    )  # fmt: skip
    out = capsys.readouterr()
    return status, json.loads(out.out), out.err


def test_a_ddp_program_through_torchrun(program: Path, capsys: pytest.CaptureFixture[str]) -> None:
    via = "torchrun --standalone --nproc_per_node=2 ddp_program.py --steps 30"
    status, report, err = profile_program(program, via, capsys)
    assert status == 0, err
    assert report["world_size"] == 2 and report["backend"] == "gloo"
    reps = set()
    for row, rank_report in zip(report["ranks"], report["reports"], strict=True):
        site = rank_report["call_site"]
        assert site["via"] == "torchrun --nproc-per-node 2 ddp_program.py --steps 30"
        assert site["captured"] and site["call"] == 1 and site["saved"] is None
        (grads,) = rank_report["communication"]["collectives"]  # the program's DDP bucket
        assert grads["kind"] == "all_reduce" and grads["bytes"] == PROGRAM_PARAMETERS * 4
        assert row["comm_us_per_step"] > 0
        reps.add(rank_report["timing"]["unprofiled_reps"])
    assert len(reps) == 1  # agreed through kernelscope's store: the ranks in lockstep
    assert not (program / ".kernelscope" / "captures").exists()  # a rank's call is not kept


def test_one_rank_through_torchrun_gets_torchruns_variables(
    program: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    via = "torchrun --nproc-per-node 1 ddp_program.py"
    status, report, err = profile_program(program, via, capsys)
    assert status == 0, err
    assert report["call_site"]["via"].startswith("torchrun --nproc-per-node 1 ddp_program.py")
    assert report["communication"]["world_size"] == 1


def test_a_program_on_ranks_in_place(program: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, report, err = profile_program(
        program, "ddp_program.py --steps 60", capsys, "--nproc", "2", "--in-place"
    )
    assert status == 0, err
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    for rank_report in report["reports"]:
        assert not rank_report["call_site"]["captured"]
        assert "gloo:all_reduce" in {op["name"] for op in rank_report["ops"]}


def test_a_programs_rank_that_fails_is_named(
    program: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    via = "torchrun --nproc-per-node 2 ddp_program.py --bad-rank 1"
    status, out, err = profile_program(program, via, capsys)
    assert status == 1
    message = out["error"]["message"]
    assert message.startswith("rank 1 of 2 failed: ")
    assert (
        "rank 1: torchrun --nproc-per-node 2 ddp_program.py --bad-rank 1 failed before " in message
    )
    assert "OSError: shard 1 of 2 cannot be read" in message
    assert "Traceback" not in err


async def test_the_editor_profiles_a_torchrun_program(program: Path) -> None:
    from lsprotocol import types as lsp

    from support.lsp import open_doc, start, stop

    settings = {"device": "cpu", "schedule": {"wait": 0, "warmup": 1, "active": 3}}
    client = await start(program, settings=settings)
    try:
        uri = open_doc(client, program / "ddp_program.py")
        via = "torchrun --nproc-per-node 2 ddp_program.py --steps 30"
        result = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("kernelscope.profile", [uri, "train_step", {"via": via}])
        )
        assert result["ok"], result
        assert result["summary"].startswith("2 ranks (gloo): ")
        with pytest.raises(Exception, match=r"disagree"):
            await client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(
                    "kernelscope.profile", [uri, "train_step", {"via": via, "nproc": 3}]
                )
            )
    finally:
        await stop(client)


def test_a_function_only_rank_0_calls_fails_naming_the_ranks_that_did_not(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rank 0 reaches `evaluate`, rank 1 never does: rank 0's agreements go through
    kernelscope's own store, not the program's group (where they would have met rank 1's
    all_reduce and hung both until the job's timeout)."""
    shutil.copy(WORKLOADS / "rank0_eval.py", project / "rank0_eval.py")
    status = main(["profile", f"{project}/rank0_eval.py::evaluate", "--via",
                   "torchrun --nproc-per-node 2 rank0_eval.py", "--cwd", str(project),
                   "--device", "cpu", "--timeout", "30", "--json"])  # fmt: skip
    out = capsys.readouterr()
    assert status == 1, out.err
    message = json.loads(out.out)["error"]["message"]
    assert message.startswith(
        "rank 0 of 2 failed: rank 0: rank 0 made call 1 of evaluate, and rank 1 did not "
        "within 15 s (DistStoreError): a function only some ranks call cannot be replayed "
        "in lockstep"
    ), message
