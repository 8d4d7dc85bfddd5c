"""The `kernelscope` command's entry point: `serve` goes straight to the server.

Editors start the server as `kernelscope serve`; start-up time counts there, so the CLI's
imports (reports, rendering, scaling) are not paid for it.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Run the server for `serve`, else the CLI."""
    if sys.argv[1:] == ["serve"]:
        serve()
        return 0
    from kernelscope.cli.main import main as cli

    return cli(serve=serve, mcp=serve_mcp)


def serve() -> None:
    """The language server on stdio (pygls is imported only for it)."""
    from kernelscope.lsp.main import main

    main()


def serve_mcp() -> None:
    """The MCP server on stdio (the MCP SDK is imported only for it)."""
    from kernelscope.agents.server import main

    main()
