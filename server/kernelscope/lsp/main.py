"""`kernelscope serve`: the language server (pygls 2, LSP over stdio). Never imports torch.

Handlers are thin: find the document and the function, ask the job service (app/jobs.py) or
the store, and turn results into lsprotocol types with views.py. lifecycle.py, features.py,
commands.py and watch.py each register theirs on the one server built here.
"""

from __future__ import annotations

import logging

from kernelscope.lsp import commands, features, lifecycle, memory_fit, watch
from kernelscope.lsp.server import KernelscopeServer


def create_server() -> KernelscopeServer:
    """A server with every handler registered."""
    server = KernelscopeServer()
    for module in (lifecycle, features, commands, memory_fit, watch):
        module.register(server)
    return server


def main() -> None:
    """Serve LSP on stdio."""
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    # pygls logs every JSON-RPC message, bodies included, at INFO: too much for an output channel
    logging.getLogger("pygls").setLevel(logging.WARNING)
    create_server().start_io()
