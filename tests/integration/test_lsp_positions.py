"""Positions that stay right (issue 25, item 2), through pytest-lsp's real client and real
runs: after lines are added above a profiled method, its findings, hover, hints and lens move
with it, whether the edit came from the editor (incremental or whole-document), from disk
(a watched file, a save, a file opened changed) or before a server restart; and a run made
by `kernelscope profile` outside the editor appears when it finishes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from support.lsp import (
    arrived,
    capabilities,
    open_doc,
    profile,
    start,
    stop,
    watch_run_finished,
)

MODEL = """\
import torch


class Block:
    def __init__(self, n: int = 96):
        self.w = torch.randn(n, n)

    def forward(self, x):
        y = x @ self.w
        z = y @ self.w @ self.w
        return z.relu()


def Block_forward_inputs():
    return (Block(), torch.randn(96, 96))


def broken():
    x = torch.ones(2)
    raise RuntimeError(f"boom {x.sum()}")
"""
#: What the "Create inputs" quick fix inserted above `Block.forward` in the issue: 7 lines.
STUB = """\
    def unrelated(self):
        a = 1
        b = 2
        c = 3
        d = 4
        return a + b + c + d

"""
SHIFTED = MODEL.replace("    def forward", STUB + "    def forward")
FORWARD, INIT = 7, 4  # 0-based def lines before the edit
AT = lsp.Position(FORWARD, 0)


def project_with_model(root: Path, text: str = MODEL) -> Path:
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    (root / "model.py").write_text(text)
    return root


def placed(client: LanguageClient, uri: str) -> set[tuple[object, int]]:
    """Each kernelscope diagnostic as (code, 0-based line)."""
    return {(d.code, d.range.start.line) for d in client.diagnostics.get(uri, [])}


async def published(client: LanguageClient, uri: str, check: Any) -> set[tuple[object, int]]:
    """Wait until the diagnostics of `uri` pass `check`; they are returned."""
    for _ in range(300):
        now = placed(client, uri)
        if uri in client.diagnostics and check(now):
            return now
        await asyncio.sleep(0.05)
    raise AssertionError(f"diagnostics of {uri} never matched: {placed(client, uri)}")


def shifted(found: set[tuple[object, int]], by: int) -> set[tuple[object, int]]:
    return {(code, line + by) for code, line in found}


async def profiled(client: LanguageClient, uri: str) -> set[tuple[object, int]]:
    result = await profile(client, uri, "Block.forward")
    assert result["ok"], result
    found = placed(client, uri)
    assert ("KS100", FORWARD) in found, found
    assert ("KS110", FORWARD + 1) in found or ("KS110", FORWARD + 2) in found, found
    assert all(FORWARD <= line <= FORWARD + 3 for _, line in found), found
    return found


def change(client: LanguageClient, uri: str, version: int, *changes: Any) -> None:
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(version=version, uri=uri), list(changes)
        )
    )


async def views_at(client: LanguageClient, uri: str, def_line: int) -> None:
    """The lens, the hover and the hints of the run sit on the method's lines `def_line`…"""
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri))
    )
    runs = [
        lens.range.start.line
        for lens in lenses or []
        if lens.command and lens.command.command == "kernelscope.openTrace"
    ]
    assert runs == [def_line], runs
    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(def_line, 8))
    )
    assert hover is not None and "kernelscope · Block.forward" in hover.contents.value  # type: ignore[union-attr]
    hints = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(0, 0), lsp.Position(40, 0))
        )
    )
    lines = {h.position.line for h in hints or []}
    assert lines and lines <= {def_line + 1, def_line + 2, def_line + 3}, (lines, def_line)


async def test_an_edit_above_a_method_moves_its_findings_in_the_editor(tmp_path: Path) -> None:
    project = project_with_model(tmp_path / "proj")
    client = await start(project)
    try:
        uri = open_doc(client, project / "model.py")
        before = await profiled(client, uri)
        await views_at(client, uri, FORWARD)
        # the scenario: 7 lines inserted above `Block.forward` (an incremental change)
        client.diagnostics.pop(uri, None)
        change(client, uri, 2, lsp.TextDocumentContentChangePartial(lsp.Range(AT, AT), STUB))
        after = await published(client, uri, bool)
        assert after == shifted(before, 7), (after, before)
        assert not any(line == INIT for _, line in after)  # nothing left on `__init__`
        await views_at(client, uri, FORWARD + 7)
        # a whole-document change taking them out again: back where they were
        client.diagnostics.pop(uri, None)
        change(client, uri, 3, lsp.TextDocumentContentChangeWholeDocument(MODEL))
        assert await published(client, uri, bool) == before
        # the method itself edited: its numbers are stale, dropped (the lens says so)
        client.diagnostics.pop(uri, None)
        edited = MODEL.replace("z.relu()", "z.tanh()")
        change(client, uri, 4, lsp.TextDocumentContentChangeWholeDocument(edited))
        assert await published(client, uri, lambda d: True) == set()
        # a failed run's diagnostic, on the user's line that raised, moves with its function
        assert not (await profile(client, uri, "broken"))["ok"]
        raised = MODEL.splitlines().index('    raise RuntimeError(f"boom {x.sum()}")')
        assert placed(client, uri) == {("KS002", raised)}  # the user's line, not the def line
        client.diagnostics.pop(uri, None)
        top = lsp.Position(0, 0)
        change(client, uri, 5, lsp.TextDocumentContentChangePartial(lsp.Range(top, top), "#\n#\n"))
        assert await published(client, uri, bool) == {("KS002", raised + 2)}
    finally:
        await stop(client)


async def test_edits_on_disk_a_save_and_a_restart_move_the_findings(tmp_path: Path) -> None:
    project = project_with_model(tmp_path / "proj")
    model = project / "model.py"
    client = await start(project)
    try:
        uri = open_doc(client, model)
        before = await profiled(client, uri)
        # closed, then changed on disk by another program: the watched file's change
        client.text_document_did_close(
            lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri))
        )
        model.write_text(SHIFTED)
        client.diagnostics.pop(uri, None)
        client.workspace_did_change_watched_files(
            lsp.DidChangeWatchedFilesParams([lsp.FileEvent(uri, lsp.FileChangeType.Changed)])
        )
        assert await published(client, uri, bool) == shifted(before, 7)
        # opened as it is on disk again, then saved after an edit the client did not send
        model.write_text(MODEL)
        client.diagnostics.pop(uri, None)
        open_doc(client, model)
        assert await published(client, uri, bool) == before
        model.write_text(SHIFTED)
        client.diagnostics.pop(uri, None)
        client.text_document_did_save(
            lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri))
        )
        await asyncio.sleep(0.5)  # the open buffer is what counts: unchanged, nothing moves
        assert placed(client, uri) == before
    finally:
        await stop(client)
    # a restart: the run is read from the store against the file as it is now
    model.write_text(SHIFTED)
    client = await start(project)
    try:
        uri = open_doc(client, model)
        assert await published(client, uri, bool) == shifted(before, 7)
        await views_at(client, uri, FORWARD + 7)
    finally:
        await stop(client)


def cli_profile(project: Path) -> None:
    command = "profile model.py::Block.forward --device cpu --wait 0 --warmup 1 --active 1"
    subprocess.run(
        [sys.executable, "-m", "kernelscope", *command.split()],
        cwd=project,
        check=True,
        capture_output=True,
        timeout=240,
    )


async def mcp_profile(project: Path) -> None:
    from support.mcp import server as mcp_server

    async with mcp_server(project) as agent:
        args = {"path": "model.py", "qualname": "Block.forward", "device": "cpu"}
        result = await agent.call_tool("profile", {**args, "warmup": 1, "active": 1})
        assert not result.is_error, result


async def shown_when_it_finishes(project: Path, run: Callable[[Path], Awaitable[None]]) -> None:
    """A run made by another process (`run`) appears in the open file, runFinished sent."""
    client = await start(project)  # a client that cannot watch files: the run folder is polled
    seen = watch_run_finished(client)
    try:
        uri = open_doc(client, project / "model.py")
        await published(client, uri, lambda d: d == set())
        await run(project)
        found = await published(client, uri, lambda d: ("KS100", FORWARD) in d)
        assert ("KS110", FORWARD + 1) in found or ("KS110", FORWARD + 2) in found, found
        await arrived(seen, 1)
        (done,) = seen
        assert done["qualname"] == "Block.forward" and done["outcome"] == "ok" and done["runId"]
        assert done["uri"] == uri
    finally:
        await stop(client)


async def test_a_run_from_the_cli_appears_when_it_finishes(tmp_path: Path) -> None:
    project = project_with_model(tmp_path / "proj")
    await shown_when_it_finishes(project, lambda p: asyncio.to_thread(cli_profile, p))


async def test_a_run_from_the_mcp_server_appears_when_it_finishes(tmp_path: Path) -> None:
    await shown_when_it_finishes(project_with_model(tmp_path / "proj"), mcp_profile)


async def test_a_run_from_the_cli_appears_through_watched_files(tmp_path: Path) -> None:
    """A client that watches files for the server: told of the new run record, it publishes."""
    project = project_with_model(tmp_path / "proj")
    caps = capabilities()
    assert caps.workspace is not None
    caps.workspace.did_change_watched_files = lsp.DidChangeWatchedFilesClientCapabilities(
        dynamic_registration=True
    )
    client = await start(project, caps)
    registered: list[Any] = []

    @client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
    def _(params: lsp.RegistrationParams) -> None:  # pyright: ignore[reportUnusedFunction]
        registered.extend(params.registrations)

    seen = watch_run_finished(client)
    try:
        uri = open_doc(client, project / "model.py")
        await published(client, uri, lambda d: d == set())
        await asyncio.to_thread(cli_profile, project)
        await asyncio.sleep(2.5)  # longer than the poll: nothing comes without the watch
        assert not placed(client, uri) and not seen
        globs = [w["globPattern"] for r in registered for w in r.register_options["watchers"]]
        assert "**/.kernelscope/runs/*.json" in globs, registered
        (record,) = (project / ".kernelscope" / "runs").glob("*.json")
        client.workspace_did_change_watched_files(
            lsp.DidChangeWatchedFilesParams(
                [lsp.FileEvent(record.as_uri(), lsp.FileChangeType.Created)]
            )
        )
        assert ("KS100", FORWARD) in await published(client, uri, bool)
        await arrived(seen, 1)
        assert [s["qualname"] for s in seen] == ["Block.forward"]
    finally:
        await stop(client)
