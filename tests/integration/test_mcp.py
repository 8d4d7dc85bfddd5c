"""`kernelscope mcp` through the MCP SDK's own client over stdio: the tools and their schemas,
a CPU profile with progress, the stored run and a diff, an analyze of a GPU fixture equal to
the CLI's JSON, bad arguments as tool errors with the server staying up, and a cancel."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types import CallToolResult, TextContent

from support import FIXTURES, REPO_ROOT
from support.mcp import server

WORKLOAD = """
import time

import torch


def matmul(n: int = 128):
    a = torch.randn(n, n)
    return (a @ a).relu().sum()


def matmul_inputs(batch_size: int = 1):
    return (128 * batch_size,)


def sleepy(seconds: float):
    time.sleep(seconds)
    return torch.ones(2).sum()


def sleepy_inputs():
    return (8.0,)


def no_inputs(x):
    return x
"""

TOOLS = {"profile", "analyze", "scale", "memory", "try", "diff", "last_run"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "agent-demo"\n')
    (tmp_path / "work.py").write_text(textwrap.dedent(WORKLOAD))
    return tmp_path


def text(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def call(client: Client, tool: str, **arguments: Any) -> CallToolResult:
    return await client.call_tool(tool, arguments)


async def test_tools_profile_history_and_errors(project: Path) -> None:
    async with server(project) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == TOOLS
        for tool in listed.values():
            assert tool.output_schema is not None and tool.output_schema["type"] == "object"
            assert tool.description
        assert listed["profile"].input_schema["required"] == ["path", "qualname"]
        assert "Report" in listed["analyze"].output_schema["$defs"]  # type: ignore[index]

        seen: list[tuple[float, str | None]] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append((value, message))

        args = {"path": "work.py", "qualname": "matmul", "device": "cpu"}
        first = await client.call_tool("profile", args, progress_callback=progress)
        assert not first.is_error, text(first)
        report = first.structured_content  # the client checked it against the output schema
        assert report is not None
        assert report["function"]["qualname"] == "matmul"
        assert report["function"]["path"] == str((project / "work.py").resolve())
        assert report["device"]["type"] == "cpu"
        assert report["verdict"]["bound"] == "host"
        summary = text(first)
        assert summary.startswith(f"verdict: {report['verdict']['summary']}")
        assert "work.py:" in summary and "run id: " in summary
        assert "; called alone, inputs from work.py::matmul_inputs" in summary
        assert report["inputs_from"] == "work.py::matmul_inputs"
        values = [v for v, _ in seen]
        assert values and values == sorted(values) and len(set(values)) == len(values)
        assert any(m and m.startswith("active") for _, m in seen)

        # The CLI's JSON for the same function has the same shape.
        cli = subprocess.run(
            [sys.executable, "-m", "kernelscope", "profile", "work.py::matmul", "--json"],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=240,
            check=True,
        )
        assert set(json.loads(cli.stdout)) == set(report)

        last = await call(client, "last_run", path="work.py", qualname="matmul")
        assert not last.is_error, text(last)
        stored = last.structured_content
        assert stored is not None and stored["qualname"] == "matmul"
        assert "run " in text(last)  # the CLI's run above is the newest one now

        changed = await call(client, "diff", a="work.py::matmul")
        assert not changed.is_error, text(changed)
        assert changed.structured_content is not None
        assert text(changed).startswith("change: ")

        for tool, arguments, message in [
            ("profile", {"path": "nowhere.py", "qualname": "f"}, "no such file"),
            ("profile", {"path": "work.py", "qualname": "missing"}, "has no function 'missing'"),
            ("profile", {"path": "work.py", "qualname": "no_inputs"}, "def no_inputs_inputs("),
            ("profile", {"path": "work.py", "qualname": "matmul", "active": 0}, "active"),
            ("last_run", {"path": "work.py", "qualname": "sleepy"}, "profile it first"),
            ("try", {"path": "work.py", "qualname": "matmul", "variants": ["fast"]}, "fast"),
            ("scale", {"path": "work.py", "qualname": "matmul", "factors": [2]}, "two"),
            ("diff", {"a": "nothing-here"}, "PATH::QUALNAME"),
        ]:
            failed = await call(client, tool, **arguments)
            assert failed.is_error, (tool, arguments)
            assert message in text(failed), text(failed)
            assert "Traceback" not in text(failed)

        again = await call(client, "profile", **args)  # still up, the same warm worker
        assert not again.is_error, text(again)


async def test_analyze_equals_the_cli(project: Path) -> None:
    trace = FIXTURES / "matmul_add_8192" / "trace.json.gz"
    cli = subprocess.run(
        [sys.executable, "-m", "kernelscope", "analyze", str(trace), "--json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    async with server(REPO_ROOT) as client:
        out = await call(client, "analyze", trace=str(trace.relative_to(REPO_ROOT)))
        assert not out.is_error, text(out)
        expected = json.loads(cli.stdout)
        got = out.structured_content
        assert got is not None
        for when in (expected, got):  # when it was analyzed, and how long that took
            del when["created"], when["stages_s"]
        assert got == expected
        summary = text(out)
        assert summary.startswith("verdict: compute-bound")
        assert "matmul_add.py:" in summary and "on NVIDIA H200" in summary

        bad = project / "bad.json"
        bad.write_text('{"traceEvents": [{"ph": ')
        for trace_arg, message in [(str(bad), "bad.json"), ("missing.json", "no such file")]:
            failed = await call(client, "analyze", trace=trace_arg)
            assert failed.is_error and message in text(failed), text(failed)


async def test_analyze_a_raw_trace_gives_time_per_function() -> None:
    """A raw trace with stacks: the functions of the project the server runs in, at their
    def lines, in the structured result and the summary."""
    trace = FIXTURES / "train_mlp" / "raw.json.gz"
    async with server(FIXTURES / "train_mlp") as client:
        out = await call(client, "analyze", trace=str(trace), trace_only=True)
        assert not out.is_error, text(out)
        got = out.structured_content
        assert got is not None
        rows = {r["qualname"]: r for r in got["functions"]["rows"]}
        assert set(rows) == {"train_step", "MLP.forward"}
        assert rows["MLP.forward"]["local_line"] == 15
        assert "top functions: train_step (" in text(out)
        assert "train_mlp.py:19) 6.64 ms GPU" in text(out)


async def test_try_and_scale_on_cpu(project: Path) -> None:
    async with server(project) as client:
        tried = await call(
            client,
            "try",
            path="work.py",
            qualname="matmul",
            device="cpu",
            variants=["graphs", "bf16"],
            budget=0.3,
        )
        assert not tried.is_error, text(tried)
        variants = {v["name"]: v for v in tried.structured_content["variants"]}  # type: ignore[index]
        assert variants["graphs"]["status"] == "skipped"
        assert variants["bf16"]["speedup"] is not None
        assert text(tried).startswith("best: ")

        scaled = await call(
            client, "scale", path="work.py", qualname="matmul", device="cpu", factors=[1, 2]
        )
        assert not scaled.is_error, text(scaled)
        result = scaled.structured_content
        assert result is not None
        assert [p["factor"] for p in result["points"]] == [1, 2]
        assert Path(result["png"]).is_file()
        assert text(scaled).startswith(f"verdict: {result['verdict']['summary']}")


async def test_cancel_stops_the_job_and_the_server_stays_up(project: Path) -> None:
    async with server(project) as client:
        started = anyio.Event()

        async def progress(value: float, total: float | None, message: str | None) -> None:
            if message and message.startswith("cold"):
                started.set()

        # Each call of `sleepy` takes 8 s; the whole job would run for a minute or more.
        args = {"path": "work.py", "qualname": "sleepy", "device": "cpu"}
        with anyio.move_on_after(120) as scope:
            async with anyio.create_task_group() as group:

                async def slow() -> None:
                    await client.call_tool("profile", args, progress_callback=progress)

                group.start_soon(slow)
                await started.wait()
                group.cancel_scope.cancel()  # the client sends notifications/cancelled
        assert not scope.cancelled_caught, "the job never reached its cold call"

        t0 = time.monotonic()
        fast = await call(client, "profile", path="work.py", qualname="matmul", device="cpu")
        elapsed = time.monotonic() - t0
        assert not fast.is_error, text(fast)
        # Queued behind a job that was not stopped, this would wait out its 40 s and more.
        assert elapsed < 30, f"the next job waited {elapsed:.1f} s"
        stored = await call(client, "last_run", path="work.py", qualname="sleepy")
        assert stored.is_error  # the cancelled job stored nothing
