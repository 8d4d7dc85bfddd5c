"""The `kernelscope` command's entry point: `serve` goes straight to the server.

Editors start the server as `kernelscope serve`; start-up time counts there, so the CLI's
imports (reports, rendering, scaling) are not paid for it.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Run the server for `serve`, else the CLI."""
    if sys.argv[1:] == ["serve"]:
        from kernelscope.server import main as serve

        serve()
        return 0
    from kernelscope.cli import main as cli

    return cli()
