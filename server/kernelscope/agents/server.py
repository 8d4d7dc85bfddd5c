"""``kernelscope mcp``: the MCP server on stdio, its tools over the language server's job
service (warm workers between calls; stopped when the client goes)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp_types import ToolAnnotations

from kernelscope import __version__
from kernelscope.agents.schemas import output_schema
from kernelscope.agents.tools import Tools
from kernelscope.analysis.experiments import Experiments
from kernelscope.analysis.memory_fit import Forecast
from kernelscope.app.jobs import ProfileService
from kernelscope.app.scale import ScaleResult
from kernelscope.app.store import RunRecord
from kernelscope.report.compare import Comparison
from kernelscope.report.schema import Report, TraceAnalysis

INSTRUCTIONS = (
    "kernelscope profiles PyTorch functions and explains why they are slow. `profile` a "
    "function (file path and qualname) to get its verdict (overhead-, memory- or "
    "compute-bound), its costly ops and lines and findings at file:line; `try` measures "
    "torch.compile, CUDA Graphs, TF32, bf16 … on it in place; `diff` compares runs; "
    "`last_run` reads the stored result without running; `analyze` diagnoses any "
    "torch.profiler trace; `scale` times it at growing batch sizes; `memory` says where the "
    "memory peak goes and the largest batch that fits. A function needs "
    "inputs: a provider `def <fn>_inputs(): return args` (or `(args, kwargs)`) in its "
    "module or in kernelscope_inputs.py beside it."
)


def create_server(root: Path | None = None, service: ProfileService | None = None) -> MCPServer:
    """The server and its tools; `root` resolves relative paths (default: the cwd)."""
    tools = Tools(service or ProfileService(), root)

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncGenerator[None]:
        try:
            yield None
        finally:
            await tools.service.close()

    return MCPServer(
        name="kernelscope",
        title="kernelscope",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        lifespan=lifespan,
        tools=[
            _tool(tools.profile, "profile", "Profile a function", output_schema(Report)),
            _tool(
                tools.analyze,
                "analyze",
                "Analyze a trace",
                output_schema(Report, TraceAnalysis),
                read_only=True,
            ),
            _tool(tools.scale, "scale", "Time at growing batch sizes", output_schema(ScaleResult)),
            _tool(tools.try_, "try", "Try the suggested variants", output_schema(Experiments)),
            _tool(tools.memory, "memory", "Will the next batch fit", output_schema(Forecast)),
            _tool(tools.diff, "diff", "Compare two runs", output_schema(Comparison), True),
            _tool(
                tools.last_run,
                "last_run",
                "A function's last run",
                output_schema(RunRecord),
                read_only=True,
            ),
        ],
    )


def _tool(
    fn: Callable[..., Awaitable[Any]],
    name: str,
    title: str,
    schema: dict[str, Any],
    read_only: bool = False,
) -> Tool:
    """A tool whose structured result is described by `schema` (the Structs' own schema,
    where the SDK would derive one from pydantic types)."""
    tool = Tool.from_function(
        fn,
        name=name,
        title=title,
        annotations=ToolAnnotations(
            read_only_hint=read_only, destructive_hint=False, open_world_hint=False
        ),
        structured_output=False,
    )
    tool.fn_metadata.output_schema = schema
    return tool


def main() -> None:
    """Serve on stdio until the client closes it."""
    create_server().run("stdio")
