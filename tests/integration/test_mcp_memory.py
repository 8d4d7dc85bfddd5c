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
