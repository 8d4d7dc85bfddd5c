"""The MCP `memory` tool through the SDK's client: the forecast with its check, the memory
pass in `profile`'s result, and bad batch sizes as a tool error."""

from __future__ import annotations

import shutil
from pathlib import Path

from mcp_types import TextContent

from support import WORKLOADS
from support.mcp import server


async def test_memory_tool_forecasts_and_profile_carries_the_pass(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "agent-memory"\n')
    shutil.copy(WORKLOADS / "memory_train.py", tmp_path / "train.py")
    async with server(tmp_path) as client:
        args = {"path": "train.py", "qualname": "train_step", "device": "cpu"}
        out = await client.call_tool(
            "memory",
            {**args, "batch_sizes": [16, 32], "room_bytes": 24 * 2**20, "will_fit": 8},
        )
        block = out.content[0]
        assert isinstance(block, TextContent)
        assert not out.is_error, block.text
        forecast = out.structured_content
        assert forecast is not None
        assert forecast["model"] == "runs of the call" and forecast["fits"] is True
        assert "forecast     batch" in block.text
        assert forecast["asked_batch"] == 8 and forecast["asked_fits"] is True
        assert "batch 8 fits: predicted peak" in block.text
        bad = await client.call_tool("memory", {**args, "batch_sizes": [4]})
        assert bad.is_error
        profiled = await client.call_tool("profile", {**args, "active": 1})
        assert not profiled.is_error
        memory = (profiled.structured_content or {})["memory_pass"]
        assert memory["baseline_kinds"]["optimizer_state"] > 0


async def test_memory_tool_forecasts_a_programs_call(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "agent-memory-via"\n')
    shutil.copy(WORKLOADS / "memory_train.py", tmp_path / "train.py")
    (tmp_path / "run.py").write_text(
        "from train import train_step, train_step_inputs\n\n"
        "if __name__ == '__main__':\n"
        "    model, opt, x = train_step_inputs(12)\n"
        "    for _ in range(3):\n"
        "        train_step(model, opt, x)\n"
    )
    async with server(tmp_path) as client:
        args = {"path": "train.py", "qualname": "train_step", "device": "cpu", "via": "run.py"}
        out = await client.call_tool("memory", {**args, "batch_sizes": [6, 24], "check": False})
        block = out.content[0]
        assert isinstance(block, TextContent)
        assert not out.is_error, block.text
        forecast = out.structured_content or {}
        assert [p["batch_size"] for p in forecast["points"]] == [6, 24]
        assert any("batch 12 -> 6: dim 0 of args[2], rows cut" in n for n in forecast["notes"])
        bad = await client.call_tool("memory", {**args, "via": "nope.py"})
        assert bad.is_error
