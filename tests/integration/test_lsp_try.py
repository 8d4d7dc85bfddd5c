"""The what-if loop in the editor, through a real server: profile, the "Try" actions the
verdict offers, the experiment's KS801 diagnostics and hover, and the quick fix that writes
the measured variant into the source only when asked."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from support import WORKLOADS
from support.lsp import open_doc, profile


async def actions_at(client: LanguageClient, uri: str, line: int, diags: list[lsp.Diagnostic]):
    at = lsp.Range(lsp.Position(line, 4), lsp.Position(line, 4))
    found = await client.text_document_code_action_async(
        lsp.CodeActionParams(lsp.TextDocumentIdentifier(uri), at, lsp.CodeActionContext(diags))
    )
    return [a for a in found or [] if isinstance(a, lsp.CodeAction)]


async def test_try_after_a_profile_shows_each_variant_measured(
    client: LanguageClient, project: Path
) -> None:
    path = project / "what_if.py"
    shutil.copy(WORKLOADS / "what_if.py", path)
    uri = open_doc(client, path)
    def_line = next(i for i, t in enumerate(path.read_text().splitlines()) if "def chain" in t)
    before = await actions_at(client, uri, def_line + 1, [])
    assert not [a for a in before if a.title.startswith("Try ")]  # nothing to go on yet
    assert (await profile(client, uri, "chain"))["ok"]
    offered = await actions_at(client, uri, def_line + 1, [])
    tries = {a.title: a for a in offered if a.title.startswith("Try ")}
    assert "Try torch.compile on `chain`" in tries, list(tries)
    assert "Try CUDA Graphs on `chain`" not in tries  # a CPU run: no graphs, no TF32
    command = tries["Try torch.compile on `chain`"].command
    assert command is not None and command.command == "kernelscope.try"
    reply = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command.command, command.arguments)
    )
    assert reply["ok"], reply
    assert reply["summaries"][0].startswith("torch.compile: ")
    assert "results equal" in reply["summaries"][0], reply["summaries"]
    what_if = [d for d in client.diagnostics[uri] if d.code == "KS801"]
    assert len(what_if) == 1 and what_if[0].range.start.line == def_line
    assert what_if[0].message == reply["summaries"][0]
    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(def_line, 5))
    )
    assert hover is not None and "**Tried**" in hover.contents.value  # type: ignore[union-attr]
    assert path.read_text() == (WORKLOADS / "what_if.py").read_text()  # never edited


async def test_the_quick_fix_writes_the_decorator_only_for_a_measured_win(
    client: LanguageClient, project: Path
) -> None:
    path = project / "three_lines.py"
    uri = open_doc(client, path)
    lines = path.read_text().splitlines()
    def_line = next(i for i, t in enumerate(lines) if t.startswith("def three_lines"))
    at = lsp.Range(lsp.Position(def_line, 0), lsp.Position(def_line, len(lines[def_line])))

    def diag(apply: bool) -> lsp.Diagnostic:
        data = {"qualname": "three_lines", "variant": "compile", "apply": apply}
        return lsp.Diagnostic(
            at, "torch.compile: ...", code="KS801", source="kernelscope", data=data
        )

    lost = await actions_at(client, uri, def_line, [diag(False)])
    assert not [a for a in lost if a.title.startswith("Apply ")]
    won = await actions_at(client, uri, def_line, [diag(True)])
    fix = next(a for a in won if a.title == "Apply torch.compile to `three_lines`")
    assert fix.kind == lsp.CodeActionKind.QuickFix and fix.edit and fix.edit.changes
    (edit,) = [e for e in fix.edit.changes[uri] if e.range.start.line == def_line]
    assert edit.new_text == "@torch.compile\n"


async def test_bad_try_and_compare_requests_are_errors_and_the_server_keeps_answering(
    client: LanguageClient, project: Path
) -> None:
    uri = open_doc(client, project / "three_lines.py")
    for command, args, says in [
        ("kernelscope.try", [uri, "three_lines", {"variants": ["warp"]}], "options.variants"),
        ("kernelscope.try", [uri, "no_such_fn"], "has no function"),
        ("kernelscope.compare", [uri, "three_lines"], "no profile of three_lines.py yet"),
    ]:
        with pytest.raises(JsonRpcException, match=says):
            await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command, args))
    assert (await profile(client, uri, "three_lines"))["ok"]
    with pytest.raises(JsonRpcException, match="one run kept"):
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("kernelscope.compare", [uri, "three_lines"])
        )
    assert (await profile(client, uri, "three_lines"))["ok"]
    reply = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams("kernelscope.compare", [uri, "three_lines"])
    )
    assert reply["text"].startswith("kernelscope diff · run ") and reply["previous_run_id"]
