"""`counters` through the editor and the agents' front ends: the LSP setting
`kernelscope.counters` and the profile command's option, and the MCP profile tool's field,
each reach the job (on this CPU-only machine the report says in one line why nothing was
measured); a bad option is an error and the server stays up."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp

from kernelscope.app.counters import NEEDS_CUDA

from support.lsp import FAST, open_doc, profile, start, stop
from support.mcp import server


async def _last_report(client: Any, run_id: str) -> dict[str, Any]:
    reply = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams("kernelscope.lastReport", [run_id])
    )
    return reply["report"]


async def test_the_editor_setting_turns_counters_on(project: Path) -> None:
    client = await start(project, settings={**FAST, "counters": True})
    try:
        result = await profile(client, open_doc(client, project / "three_lines.py"), "three_lines")
        assert result["ok"]  # the profile stands
        report = await _last_report(client, result["run_id"])
        assert report["counters"]["error"] == NEEDS_CUDA
    finally:
        await stop(client)


async def test_the_commands_option_wins_over_the_setting(project: Path) -> None:
    client = await start(project, settings={**FAST, "counters": True})
    try:
        uri = open_doc(client, project / "three_lines.py")
        result = await profile(client, uri, "three_lines", {"counters": False})
        assert (await _last_report(client, result["run_id"]))["counters"] is None
        result = await profile(client, uri, "three_lines", {"counters": True})
        assert (await _last_report(client, result["run_id"]))["counters"]["error"] == NEEDS_CUDA
        with pytest.raises(Exception, match=r"options\.counters must be true or false"):
            await profile(client, uri, "three_lines", {"counters": "yes"})
        again = await profile(client, uri, "three_lines")
        assert again["ok"]  # still up
    finally:
        await stop(client)


async def test_the_commands_counters_match_turns_counters_on(project: Path) -> None:
    """`countersMatch` reaches the job (the report's counters carry it) and turns counters on
    where no setting does; `counters: false` still wins; a pattern that is not a regular
    expression is an invalid-params error, and the server stays up."""
    client = await start(project, settings=FAST)
    try:
        uri = open_doc(client, project / "three_lines.py")
        result = await profile(client, uri, "three_lines", {"countersMatch": "multi_tensor"})
        counters = (await _last_report(client, result["run_id"]))["counters"]
        assert counters["error"] == NEEDS_CUDA and counters["match"] == "multi_tensor"
        off = {"countersMatch": "gemm", "counters": False}
        result = await profile(client, uri, "three_lines", off)
        assert (await _last_report(client, result["run_id"]))["counters"] is None
        with pytest.raises(Exception, match=r"options\.countersMatch '\(' is not a regular"):
            await profile(client, uri, "three_lines", {"countersMatch": "("})
        assert (await profile(client, uri, "three_lines"))["ok"]
    finally:
        await stop(client)


async def test_the_editor_setting_chooses_the_kernels(project: Path) -> None:
    """`kernelscope.countersMatch` reaches the job where counters are on (it does not turn
    them on); the command's option wins; a pattern that is not a regular expression falls
    back to none, with a message."""
    settings = {**FAST, "counters": True, "countersMatch": "multi_tensor"}
    client = await start(project, settings=settings)
    try:
        uri = open_doc(client, project / "three_lines.py")
        result = await profile(client, uri, "three_lines")
        assert (await _last_report(client, result["run_id"]))["counters"]["match"] == "multi_tensor"
        result = await profile(client, uri, "three_lines", {"countersMatch": "gemm"})
        assert (await _last_report(client, result["run_id"]))["counters"]["match"] == "gemm"
    finally:
        await stop(client)
    client = await start(project, settings={**FAST, "countersMatch": "multi_tensor"})
    try:
        result = await profile(client, open_doc(client, project / "three_lines.py"), "three_lines")
        assert (await _last_report(client, result["run_id"]))["counters"] is None
    finally:
        await stop(client)
    client = await start(project, settings={**FAST, "counters": True, "countersMatch": "("})
    try:
        result = await profile(client, open_doc(client, project / "three_lines.py"), "three_lines")
        assert any("kernelscope.countersMatch" in m.message for m in client.messages)
        assert (await _last_report(client, result["run_id"]))["counters"]["match"] == ""
    finally:
        await stop(client)


async def test_a_bad_setting_falls_back_with_a_message(project: Path) -> None:
    client = await start(project, settings={**FAST, "counters": "on"})
    try:
        result = await profile(client, open_doc(client, project / "three_lines.py"), "three_lines")
        assert any("kernelscope.counters" in m.message for m in client.messages)
        assert (await _last_report(client, result["run_id"]))["counters"] is None
    finally:
        await stop(client)


async def test_the_mcp_profile_tool_takes_counters(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "agent-demo"\n')
    (tmp_path / "work.py").write_text(
        textwrap.dedent(
            """
            import torch

            def matmul():
                a = torch.randn(64, 64)
                return (a @ a).sum()
            """
        )
    )
    async with server(tmp_path) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert "counters" in listed["profile"].input_schema["properties"]
        args = {"path": "work.py", "qualname": "matmul", "device": "cpu", "counters": True}
        out = await client.call_tool("profile", args)
        assert not out.is_error
        assert out.structured_content is not None
        assert out.structured_content["counters"]["error"] == NEEDS_CUDA
        bad = await client.call_tool("profile", {**args, "counters_match": "[", "counters": None})
        assert bad.is_error and "counters_match '[' is not a regular expression" in str(bad.content)
        args = {"path": "work.py", "qualname": "matmul", "device": "cpu", "counters_match": "gemm"}
        out = await client.call_tool("profile", args)
        assert out.structured_content is not None
        assert out.structured_content["counters"]["match"] == "gemm"
