"""Shared pieces of the language-server tests: the client's capabilities, a project, helpers."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from support import WORKLOADS

SERVER = [sys.executable, "-m", "kernelscope", "serve"]
FAST = {"device": "cpu", "schedule": {"wait": 0, "warmup": 1, "active": 1}}


def capabilities(
    progress: bool = True,
    show_document: bool = True,
    configuration: bool = True,
    create_files: bool = True,
) -> lsp.ClientCapabilities:
    return lsp.ClientCapabilities(
        window=lsp.WindowClientCapabilities(
            work_done_progress=progress,
            show_document=lsp.ShowDocumentClientCapabilities(support=show_document),
        ),
        workspace=lsp.WorkspaceClientCapabilities(
            configuration=configuration,
            code_lens=lsp.CodeLensWorkspaceClientCapabilities(refresh_support=True),
            inlay_hint=lsp.InlayHintWorkspaceClientCapabilities(refresh_support=True),
            workspace_edit=lsp.WorkspaceEditClientCapabilities(
                document_changes=create_files,
                resource_operations=[lsp.ResourceOperationKind.Create] if create_files else None,
            ),
        ),
        text_document=lsp.TextDocumentClientCapabilities(
            code_action=lsp.CodeActionClientCapabilities(
                code_action_literal_support=lsp.ClientCodeActionLiteralOptions(
                    code_action_kind=lsp.ClientCodeActionKindOptions(
                        value_set=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.Source]
                    )
                )
            ),
            publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(),
        ),
    )


def decode_code_actions_faithfully(client: LanguageClient) -> None:
    """lsprotocol 2025.0.0 decodes a CodeAction that carries a command as a Command (the wire
    JSON is right): pick the type from the fields instead."""
    converter = client.protocol._converter  # pyright: ignore[reportPrivateUsage]
    result_type = attrs.fields(lsp.CodeActionResponse).result.type

    def structure(obj: Any, _: Any) -> Any:
        if obj is None:
            return None
        return [
            converter.structure(o, lsp.CodeAction)
            if "kind" in o or "edit" in o or isinstance(o.get("command"), dict)
            else converter.structure(o, lsp.Command)
            for o in obj
        ]

    converter.register_structure_hook_func(lambda t: t == result_type, structure)

    # the client advertises refreshSupport, so it must answer the server's refresh requests
    client.refreshes = []  # type: ignore[attr-defined]
    for method in (lsp.WORKSPACE_CODE_LENS_REFRESH, lsp.WORKSPACE_INLAY_HINT_REFRESH):
        client.feature(method)(lambda params, m=method: client.refreshes.append(m))  # type: ignore[attr-defined]


def open_doc(client: LanguageClient, path: Path, text: str | None = None) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri, "python", 1, text if text is not None else path.read_text())
        )
    )
    return uri


def cell_uri(notebook: Path, index: int) -> str:
    # As VS Code names cells: the notebook's path, a fragment per cell (percent-encoded).
    return f"vscode-notebook-cell:{notebook}#W{index}sZmlsZQ%3D%3D"


def open_notebook(
    client: LanguageClient, notebook: Path, cells: list[tuple[lsp.NotebookCellKind, str]]
) -> list[str]:
    uris = [cell_uri(notebook, i) for i in range(len(cells))]
    pairs = list(zip(cells, uris, strict=True))
    client.notebook_document_did_open(
        lsp.DidOpenNotebookDocumentParams(
            notebook_document=lsp.NotebookDocument(
                uri=notebook.as_uri(),
                notebook_type="jupyter-notebook",
                version=1,
                cells=[lsp.NotebookCell(kind, uri) for (kind, _), uri in pairs],
            ),
            cell_text_documents=[
                lsp.TextDocumentItem(
                    uri, "python" if kind == lsp.NotebookCellKind.Code else "markdown", 1, text
                )
                for (kind, text), uri in pairs
            ],
        )
    )
    return uris


async def profile(client: LanguageClient, uri: str, qualname: str, *extra: Any) -> Any:
    return await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams("kernelscope.profile", [uri, qualname, *extra])
    )


async def start(
    project: Path, caps: lsp.ClientCapabilities | None = None, settings: Any = None
) -> LanguageClient:
    """A fresh server and client, initialized on `project` (stop it with `stop`)."""
    client = pytest_lsp.make_test_lsp_client()
    decode_code_actions_faithfully(client)
    client.set_configuration(settings if settings is not None else FAST, section="kernelscope")
    await client.start_io(*SERVER)
    await client.initialize_session(
        lsp.InitializeParams(capabilities=caps or capabilities(), root_uri=project.as_uri())
    )
    return client


async def stop(client: LanguageClient) -> None:
    """Shut the server down and close the client."""
    await client.shutdown_session()
    await client.stop()


def make_project(root: Path) -> Path:
    """A throwaway project with the test workloads (results land in its .kernelscope/)."""
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    for name in ("three_lines.py", "failures.py"):
        shutil.copy(WORKLOADS / name, root / name)
    return root


def watch_run_finished(client: LanguageClient) -> list[dict[str, Any]]:
    """Record every kernelscope/runFinished the server sends."""
    seen: list[dict[str, Any]] = []

    @client.feature("kernelscope/runFinished")
    def _(params: Any) -> None:  # pyright: ignore[reportUnusedFunction]
        seen.append({k: getattr(params, k, None) for k in ("uri", "qualname", "outcome", "runId")})

    return seen


async def arrived(seen: list[dict[str, Any]], count: int) -> None:
    for _ in range(100):
        if len(seen) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"expected {count} kernelscope/runFinished, got {seen}")
