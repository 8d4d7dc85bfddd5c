"""The language server end to end, through pytest-lsp's real client, on CPU."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from support.lsp import capabilities, open_doc, profile, start, stop


async def test_code_action_offers_profile_inside_a_function(
    client: LanguageClient, project: Path
) -> None:
    uri = open_doc(client, project / "three_lines.py")
    profile_it = "Profile `three_lines`"
    kinds = lsp.CodeActionKind
    for only, kind in [
        (None, kinds.QuickFix),  # Neovim's code_action, VS Code's Ctrl+.
        ([kinds.QuickFix], kinds.QuickFix),
        ([kinds.Source], kinds.Source),  # VS Code's Source Action menu
        ([kinds.QuickFix, kinds.Source], kinds.QuickFix),
        ([kinds.Refactor], None),
    ]:
        result = await client.text_document_code_action_async(
            lsp.CodeActionParams(
                lsp.TextDocumentIdentifier(uri),
                lsp.Range(lsp.Position(5, 4), lsp.Position(5, 4)),
                lsp.CodeActionContext(diagnostics=[], only=only),
            )
        )
        actions = [a for a in result or [] if isinstance(a, lsp.CodeAction)]
        titles = [a.title for a in actions]
        assert len(titles) == len(set(titles)), (only, titles)  # each action once
        expected = [] if kind is None else [(profile_it, kind)]
        assert [(a.title, a.kind) for a in actions if a.title == profile_it] == expected, only
    outside = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri),
            lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)),
            lsp.CodeActionContext(diagnostics=[]),
        )
    )
    assert not outside


async def test_profile_publishes_diagnostics_lenses_hover_and_hints(
    client: LanguageClient, project: Path
) -> None:
    uri = open_doc(client, project / "three_lines.py")
    result = await profile(client, uri, "three_lines")
    assert result["ok"], result
    diags = client.diagnostics[uri]
    codes = {d.code for d in diags}
    assert {"KS100", "KS104", "KS110"} <= codes
    summary = next(d for d in diags if d.code == "KS100")
    assert summary.range.start.line == 3  # the def line
    line_diags = [d for d in diags if d.code == "KS110"]
    assert any(d.range.start.line == 5 for d in line_diags)  # `b = a @ a @ a @ a`
    assert all(d.code_description is not None for d in diags if d.code == "KS104")
    # progress: begin, reports with stages, end
    reports = [r for token in client.progress_reports for r in client.progress_reports[token]]
    kinds = [type(r).__name__ for r in reports]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
    assert any(
        isinstance(r, lsp.WorkDoneProgressReport) and "line attribution" in (r.message or "")
        for r in reports
    )
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri))
    )
    titles = [lens.command.title for lens in lenses or [] if lens.command]
    assert "▶ Profile" in titles
    assert any("host-bound" in t for t in titles), titles
    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(3, 6))
    )
    assert hover is not None
    text = hover.contents.value  # type: ignore[union-attr]
    assert "CPU per step" in text and "aten::mm" in text and "Open trace in Perfetto" in text
    # the op table is a code block, not a markdown table (Neovim shows those as raw pipes)
    assert "```text" in text and "|---" not in text and "| op |" not in text
    hints = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(0, 0), lsp.Position(40, 0))
        )
    )
    labels = {h.position.line: h.label for h in hints or []}
    assert 5 in labels and "CPU" in str(labels[5])


async def test_edit_makes_results_stale(client: LanguageClient, project: Path) -> None:
    path = project / "three_lines.py"
    uri = open_doc(client, path)
    assert (await profile(client, uri, "three_lines"))["ok"]
    assert client.diagnostics[uri]
    edited = path.read_text().replace("c = b.relu().sum()", "c = b.relu().mean()")
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(version=2, uri=uri),
            [lsp.TextDocumentContentChangeWholeDocument(text=edited)],
        )
    )
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert not [d for d in client.diagnostics[uri] if d.code == "KS100"]
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri))
    )
    assert any("stale" in (lens.command.title if lens.command else "") for lens in lenses or [])


async def test_missing_inputs_gets_a_diagnostic_and_a_quick_fix(
    client: LanguageClient, project: Path
) -> None:
    path = project / "three_lines.py"
    uri = open_doc(client, path)
    result = await profile(client, uri, "needs_inputs")
    assert not result["ok"] and result["error"]["kind"] == "missing_inputs"
    diag = next(d for d in client.diagnostics[uri] if d.code == "KS001")
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri), diag.range, lsp.CodeActionContext([diag])
        )
    )
    title = "Create `needs_inputs_inputs()` in kernelscope_inputs.py"
    fix = next(a for a in actions or [] if isinstance(a, lsp.CodeAction) and a.title == title)
    inputs = project / "kernelscope_inputs.py"
    assert fix.edit and fix.edit.document_changes and not fix.edit.changes  # not three_lines.py
    create, text = fix.edit.document_changes
    assert isinstance(create, lsp.CreateFile) and create.uri == inputs.as_uri()
    assert isinstance(text, lsp.TextDocumentEdit) and text.text_document.uri == inputs.as_uri()
    written = "".join(e.new_text for e in text.edits if isinstance(e, lsp.TextEdit))
    assert 'def needs_inputs_inputs(batch_size: int = 1, device: str = "cpu"):' in written
    assert "import torch\n" in written and "x = torch.randn(" in written and "k = 1" in written
    # a module that exists gets the provider appended, with only the imports it lacks
    inputs.write_text("import torch\n")
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri), diag.range, lsp.CodeActionContext([diag])
        )
    )
    fix = next(a for a in actions or [] if isinstance(a, lsp.CodeAction) and a.title == title)
    assert fix.edit and fix.edit.changes and list(fix.edit.changes) == [inputs.as_uri()]
    (appended,) = fix.edit.changes[inputs.as_uri()]
    assert appended.range.start == lsp.Position(1, 0)
    assert appended.new_text.startswith("\n\ndef needs_inputs_inputs(")
    inputs.write_text("import torch\n" + appended.new_text)  # as the client applies it
    result = await profile(client, uri, "needs_inputs")
    assert result["ok"], result  # the worker finds it there, the user's file unchanged
    assert "needs_inputs_inputs" not in (project / "three_lines.py").read_text()


async def test_create_inputs_without_file_creation_edits_the_new_files_uri(
    project: Path,
) -> None:
    client = await start(project, capabilities(create_files=False))
    try:
        uri = open_doc(client, project / "three_lines.py")
        await profile(client, uri, "needs_inputs")
        diag = next(d for d in client.diagnostics[uri] if d.code == "KS001")
        actions = await client.text_document_code_action_async(
            lsp.CodeActionParams(
                lsp.TextDocumentIdentifier(uri), diag.range, lsp.CodeActionContext([diag])
            )
        )
        fix = next(a for a in actions or [] if isinstance(a, lsp.CodeAction) and a.edit)
        assert fix.edit and fix.edit.changes and not fix.edit.document_changes
        assert list(fix.edit.changes) == [(project / "kernelscope_inputs.py").as_uri()]
        compile(
            fix.edit.changes[(project / "kernelscope_inputs.py").as_uri()][0].new_text, "s", "exec"
        )
    finally:
        await stop(client)


async def test_unsaved_buffer_is_profiled_as_the_editor_has_it(
    client: LanguageClient, project: Path
) -> None:
    path = project / "three_lines.py"
    text = path.read_text().replace("b = a @ a @ a @ a", "b = a.cos()")
    uri = open_doc(client, path, text)
    result = await profile(client, uri, "three_lines")
    assert result["ok"]
    report = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams("kernelscope.lastReport", [result["run_id"]])
    )
    ops = {o["name"] for o in report["report"]["ops"]}
    assert "aten::cos" in ops and "aten::mm" not in ops


async def test_open_trace_serves_the_trace_once_for_perfetto(
    client: LanguageClient, project: Path
) -> None:
    uri = open_doc(client, project / "three_lines.py")
    result = await profile(client, uri, "three_lines")
    opened = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams("kernelscope.openTrace", [result["run_id"]])
    )
    assert opened["ok"] and opened["shown"], opened
    shown = client.shown_documents[-1]
    assert shown.external and shown.uri.startswith(
        "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/"
    )
    name = shown.uri.rsplit("/", 1)[1]

    def fetch(url: str) -> tuple[int, bytes, str | None]:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.status, r.read(), r.headers.get("Access-Control-Allow-Origin")
        except urllib.error.HTTPError as e:
            return e.code, b"", e.headers.get("Access-Control-Allow-Origin")

    assert (await asyncio.to_thread(fetch, "http://127.0.0.1:9001/../etc/passwd"))[0] == 404
    assert (await asyncio.to_thread(fetch, "http://127.0.0.1:9001/"))[0] == 404
    status, body, origin = await asyncio.to_thread(fetch, f"http://127.0.0.1:9001/{name}")
    assert status == 200 and body[:2] == b"\x1f\x8b" and origin == "https://ui.perfetto.dev"
    await asyncio.sleep(0.2)
    with pytest.raises(OSError):
        await asyncio.to_thread(fetch, f"http://127.0.0.1:9001/{name}")  # served once, then closed


@pytest.mark.parametrize(
    "arguments",
    [
        [],
        ["not-a-uri", "f"],
        ["file:///tmp/notes.txt", "f"],
        ["FILE", 3],
        ["FILE", "nope"],
        ["FILE", "three_lines", 7],
    ],
)
async def test_bad_command_arguments_are_errors_and_the_server_stays_up(
    client: LanguageClient, project: Path, arguments: list[Any]
) -> None:
    uri = open_doc(client, project / "three_lines.py")
    args = [uri if a == "FILE" else a for a in arguments]
    with pytest.raises(Exception, match=r"."):
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("kernelscope.profile", args)
        )
    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(0, 0))
    )
    assert hover is None  # still answering


async def test_user_exception_is_a_diagnostic_at_its_line(
    client: LanguageClient, project: Path
) -> None:
    uri = open_doc(client, project / "failures.py")
    result = await profile(client, uri, "raises")
    assert result["error"]["kind"] == "user_exception"
    diag = next(d for d in client.diagnostics[uri] if d.code == "KS002")
    assert diag.range.start.line == 9 and "ValueError" in diag.message


async def test_results_survive_a_server_restart(project: Path) -> None:
    client = await start(project)
    uri = open_doc(client, project / "three_lines.py")
    assert (await profile(client, uri, "three_lines"))["ok"]
    await stop(client)
    again = await start(project)
    uri = open_doc(again, project / "three_lines.py")
    await again.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert any(d.code == "KS100" for d in again.diagnostics[uri])
    hover = await again.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(3, 6))
    )
    assert hover is not None
    await stop(again)
