"""The MCP tests' client: `kernelscope mcp` started over stdio by the SDK's own client."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters


def server(cwd: Path) -> Client:
    """A client of a fresh `kernelscope mcp` in `cwd` (enter it with `async with`)."""
    # The SDK passes on only a few variables (PATH, HOME …): PYTHONPATH too, where it is set.
    env = {k: os.environ[k] for k in ("PYTHONPATH", "KINETO_LOG_LEVEL") if k in os.environ}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kernelscope", "mcp"], cwd=str(cwd), env=env
    )
    return Client(params)
