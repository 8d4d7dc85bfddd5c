"""Start, settings, shutdown, and open or changed documents (their diagnostics republished)."""

from __future__ import annotations

import contextlib
import logging
from typing import cast

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from kernelscope.app.settings import parse_settings
from kernelscope.lsp import watch
from kernelscope.lsp.server import KernelscopeServer, uri_to_path

log = logging.getLogger(__name__)


async def initialized(ls: KernelscopeServer, params: lsp.InitializedParams) -> None:
    """Read the settings, warm a worker so the first profile is fast, and watch for runs
    saved by other processes and files changed on disk."""
    del params
    await load_settings(ls)
    ls.service.launcher(ls.settings.worker_python)
    await watch.start(ls)


async def did_change_configuration(
    ls: KernelscopeServer, params: lsp.DidChangeConfigurationParams
) -> None:
    """Settings changed: re-read them (pushed settings are used when the client cannot pull)."""
    raw: object = params.settings
    pushed = cast(dict[str, object], raw).get("kernelscope") if isinstance(raw, dict) else None
    await load_settings(ls, pushed)


async def load_settings(ls: KernelscopeServer, pushed: object = None) -> None:
    """Pull the `kernelscope` section (or take the pushed one); bad values fall back."""
    raw: object = pushed
    if raw is None and ls.supports_configuration():
        try:
            result = await ls.workspace_configuration_async(
                lsp.ConfigurationParams(items=[lsp.ConfigurationItem(section="kernelscope")])
            )
            raw = result[0] if result else None
        except Exception as e:  # the client failed the request: keep the defaults
            log.warning("workspace/configuration failed: %s", e)
    settings, problems = parse_settings(raw)
    lens_moved = settings.profile_lens != ls.settings.profile_lens
    ls.settings = settings
    ls.service.settings = settings
    if lens_moved:
        ls.refresh_views()
    for problem in problems:
        ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, problem))


async def shutdown(ls: KernelscopeServer, params: None) -> None:
    """Stop workers, the trace servers and the watch."""
    del params
    await watch.stop(ls)
    if ls.trace_server is not None:
        await ls.trace_server.close()
    if ls.ui_server is not None:
        await ls.ui_server.close()
    await ls.service.close()


def did_open(ls: KernelscopeServer, params: lsp.DidOpenTextDocumentParams) -> None:
    """Show the last runs of the file's functions (they survive restarts)."""
    _republish(ls, params.text_document.uri)


def did_change(ls: KernelscopeServer, params: lsp.DidChangeTextDocumentParams) -> None:
    """Find every run's lines again in the text now: a moved function's findings move with
    it; those of a function edited since are dropped."""
    _republish(ls, params.text_document.uri)


def did_save(ls: KernelscopeServer, params: lsp.DidSaveTextDocumentParams) -> None:
    """Saved: publish again (a client may have changed the text without a didChange)."""
    _republish(ls, params.text_document.uri)


def _republish(ls: KernelscopeServer, uri: str) -> None:
    with contextlib.suppress(JsonRpcInvalidParams):
        ls.publish(uri_to_path(uri))


def notebook_opened(ls: KernelscopeServer, params: lsp.DidOpenNotebookDocumentParams) -> None:
    """A notebook opened: its cells' diagnostics of earlier runs in this session."""
    _republish_notebook(ls, params.notebook_document.uri)


def notebook_changed(ls: KernelscopeServer, params: lsp.DidChangeNotebookDocumentParams) -> None:
    """Cells edited, added, moved or removed: drop what is stale, move what moved."""
    _republish_notebook(ls, params.notebook_document.uri)


def notebook_closed(ls: KernelscopeServer, params: lsp.DidCloseNotebookDocumentParams) -> None:
    """Forget the notebook's module (its runs stay in the store)."""
    uri = params.notebook_document.uri
    for module, notebook in list(ls.notebooks.items()):
        if notebook == uri:
            del ls.notebooks[module]


def _republish_notebook(ls: KernelscopeServer, uri: str) -> None:
    notebook = ls.notebook(uri)
    if notebook is not None:
        ls.publish(notebook.module_path)


def register(server: KernelscopeServer) -> None:
    """Register this module's handlers on `server`."""
    server.feature(lsp.INITIALIZED)(initialized)
    server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    server.feature(lsp.SHUTDOWN)(shutdown)
    server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)(did_open)
    server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)(did_save)
    server.feature(lsp.NOTEBOOK_DOCUMENT_DID_OPEN)(notebook_opened)
    server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CHANGE)(notebook_changed)
    server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CLOSE)(notebook_closed)
