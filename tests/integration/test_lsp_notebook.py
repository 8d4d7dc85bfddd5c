"""A function in a Jupyter notebook's cell, through pytest-lsp's real client and LSP 3.17's
notebook messages: the code action on the cell, a profile of the cells up to it as one
module (magics stripped, later cells not run), results on the right cells and lines,
edits that make them stale, and a failing earlier cell reported on its own line."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from support.lsp import open_notebook, profile

CELLS: list[tuple[lsp.NotebookCellKind, str]] = [
    (
        lsp.NotebookCellKind.Code,
        "import torch\n%matplotlib inline\n!echo never\n\n"
        "def helper(n):\n    return torch.randn(n, n)",
    ),
    (lsp.NotebookCellKind.Markup, "# The model\nNot Python: `def nope():`"),
    (
        lsp.NotebookCellKind.Code,
        "def matmul(n: int = 256):\n"
        "    a = helper(n)\n"
        "    b = a @ a @ a @ a\n"
        "    return b.relu().sum()\n"
        "\n"
        "\n"
        "def matmul_inputs():\n"
        "    return (256,)\n"
        "\n"
        'if __name__ == "__main__":\n'
        '    raise SystemExit("a guard runs only as a script")',
    ),
    (lsp.NotebookCellKind.Code, 'raise RuntimeError("after the function: never runs")'),
]


async def actions_at(client: LanguageClient, uri: str, line: int) -> list[Any]:
    result = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri),
            lsp.Range(lsp.Position(line, 4), lsp.Position(line, 4)),
            lsp.CodeActionContext(diagnostics=[]),
        )
    )
    return list(result or [])


async def test_a_function_in_a_cell_profiles_and_shows_on_its_cell(
    client: LanguageClient, project: Path
) -> None:
    notebook = project / "analysis.ipynb"
    uris = open_notebook(client, notebook, CELLS)

    actions = await actions_at(client, uris[2], 2)
    profile_action = next(a for a in actions if a.title == "Profile `matmul`")
    assert list(profile_action.command.arguments) == [uris[2], "matmul"]
    assert not await actions_at(client, uris[1], 1)  # a markdown cell has no functions
    helper = [a.title for a in await actions_at(client, uris[0], 5)]
    assert "Profile `helper`" in helper

    result = await profile(client, uris[2], "matmul")
    assert result["ok"], result  # the last cell would raise: it did not run

    diags = client.diagnostics[uris[2]]
    codes = {d.code for d in diags}
    assert {"KS100", "KS104", "KS110"} <= codes, codes
    summary = next(d for d in diags if d.code == "KS100")
    assert summary.range.start.line == 0  # the def line, in the cell's own lines
    assert any(d.code == "KS110" and d.range.start.line == 2 for d in diags)  # a @ a @ a @ a
    first = client.diagnostics.get(uris[0], [])
    notes = [d for d in first if d.severity == lsp.DiagnosticSeverity.Hint and not d.code]
    assert [d.range.start.line for d in notes] == [1, 2]  # %matplotlib, !echo
    assert "stripped" in notes[0].message
    assert all(d.range.start.line < 6 for d in first)
    assert not client.diagnostics.get(uris[3])

    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uris[2]), lsp.Position(0, 5))
    )
    assert hover is not None and "CPU per step" in hover.contents.value  # type: ignore[union-attr]
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(lsp.TextDocumentIdentifier(uris[2]))
    )
    by_line: dict[int, list[str]] = {}
    for lens in lenses or []:
        assert lens.command is not None
        by_line.setdefault(lens.range.start.line, []).append(lens.command.title)
    assert "▶ Profile" in by_line[0] and any("host-bound" in t for t in by_line[0])
    assert 6 not in by_line  # matmul_inputs (line 6 of the cell) is an input provider: no lens
    other = await client.text_document_code_lens_async(
        lsp.CodeLensParams(lsp.TextDocumentIdentifier(uris[0]))
    )
    assert [(c.range.start.line, c.command.title) for c in other or [] if c.command] == [
        (4, "▶ Profile")
    ]
    hints = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            lsp.TextDocumentIdentifier(uris[2]), lsp.Range(lsp.Position(0, 0), lsp.Position(11, 0))
        )
    )
    assert hints and all(0 < h.position.line < 4 for h in hints)

    # The trace opens in Perfetto as a file's does: served once, fetched as Perfetto would.
    opened = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams("kernelscope.openTrace", [uris[2], "matmul"])
    )
    assert opened["ok"] and opened["shown"], opened
    url = client.shown_documents[-1].uri.split("?url=", 1)[1]

    def fetch() -> tuple[int, bytes]:
        request = urllib.request.Request(url, headers={"Origin": "https://ui.perfetto.dev"})
        with urllib.request.urlopen(request, timeout=5) as r:
            return r.status, r.read()

    status, body = await asyncio.to_thread(fetch)
    assert status == 200 and body[:2] == b"\x1f\x8b"  # the run's gzip'd trace

    module = project / ".kernelscope" / "notebooks"
    (written,) = module.glob("analysis_ipynb_*.py")
    text = written.read_text()
    assert "def matmul(" in text and "pass  # kernelscope: stripped" in text

    # A line added to an earlier cell moves the function in the module (its text is the same):
    # its findings move with it and stay on the same lines of its own cell.
    async def edited(cell: int, version: int, text: str, line: int = 0) -> list[lsp.Diagnostic]:
        client.diagnostics.pop(uris[2], None)
        client.notebook_document_did_change(
            lsp.DidChangeNotebookDocumentParams(
                notebook_document=lsp.VersionedNotebookDocumentIdentifier(
                    version=version, uri=notebook.as_uri()
                ),
                change=lsp.NotebookDocumentChangeEvent(
                    cells=lsp.NotebookDocumentCellChanges(
                        text_content=[
                            lsp.NotebookDocumentCellContentChanges(
                                document=lsp.VersionedTextDocumentIdentifier(
                                    version=version, uri=uris[cell]
                                ),
                                changes=[
                                    lsp.TextDocumentContentChangePartial(
                                        range=lsp.Range(
                                            lsp.Position(line, 0), lsp.Position(line, 0)
                                        ),
                                        text=text,
                                    )
                                ],
                            )
                        ]
                    )
                ),
            )
        )
        for _ in range(200):  # the cells are published one by one
            if uris[2] in client.diagnostics:
                return client.diagnostics[uris[2]]
            await asyncio.sleep(0.05)
        raise AssertionError("the function's cell was not published again")

    def placed(diags: list[lsp.Diagnostic]) -> set[tuple[object, int]]:
        return {(d.code, d.range.start.line) for d in diags if d.code in ("KS100", "KS110")}

    before = placed(diags)
    assert ("KS100", 0) in before and ("KS110", 2) in before, before
    assert placed(await edited(0, 2, "import math\n")) == before
    # Lines added in the function's own cell, above it: everything moves down by two.
    moved = placed(await edited(2, 3, "x = 1\ny = 2\n"))
    assert moved == {(code, line + 2) for code, line in before}, (moved, before)
    # The function edited (a line in its body): its numbers are stale and go.
    assert not placed(await edited(2, 4, "    n = n + 0\n", line=3))


async def test_a_redefined_decorated_function_and_a_missing_provider(
    client: LanguageClient, project: Path
) -> None:
    notebook = project / "again.ipynb"
    step = (
        "@torch.no_grad()\ndef step(n: int = 64):\n"
        "    return (torch.ones(n, n) @ torch.ones(n, n)).sum()"
    )
    cells = [
        (
            lsp.NotebookCellKind.Code,
            f"import torch\n\n{step}\n\n\ndef step_inputs():\n    return ()",
        ),
        (lsp.NotebookCellKind.Code, f"# edited\n{step.replace('64', '128')}"),
        (lsp.NotebookCellKind.Code, "def bare(x):\n    return x"),
    ]
    uris = open_notebook(client, notebook, cells)
    result = await profile(client, uris[1], "step")  # the later, decorated definition
    assert result["ok"], result
    summary = [d for d in client.diagnostics[uris[1]] if d.code == "KS100"]
    assert summary and summary[0].range.start.line == 1  # its first line (the decorator), cell 2
    assert not [d for d in client.diagnostics.get(uris[0], []) if d.code == "KS100"]

    result = await profile(client, uris[2], "bare")
    assert not result["ok"] and result["error"]["kind"] == "missing_inputs"
    (missing,) = [d for d in client.diagnostics[uris[2]] if d.code == "KS001"]
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uris[2]),
            missing.range,
            lsp.CodeActionContext(diagnostics=[missing]),
        )
    )
    create = next(a for a in actions or [] if a.title == "Create `bare_inputs()`")
    assert create.edit is not None and create.edit.changes is not None
    (edit,) = create.edit.changes[uris[2]]  # in the cell, after its last line
    assert edit.range.start == lsp.Position(1, len("    return x"))
    assert edit.new_text.startswith("\n\n\ndef bare_inputs(")  # two blank lines, then the stub


async def test_a_failing_earlier_cell_is_reported_on_its_line(
    client: LanguageClient, project: Path
) -> None:
    notebook = project / "broken.ipynb"
    cells = [
        (lsp.NotebookCellKind.Code, "import torch\nweights = torch.load('missing.pt')"),
        (
            lsp.NotebookCellKind.Code,
            "def f():\n    return torch.ones(2)\n\ndef f_inputs():\n    return ()",
        ),
    ]
    uris = open_notebook(client, notebook, cells)
    result = await profile(client, uris[1], "f")
    assert not result["ok"] and result["error"]["kind"] == "import_error", result
    (diag,) = [d for d in client.diagnostics[uris[0]] if d.code == "KS002"]
    assert diag.range.start.line == 1 and "missing.pt" in diag.message
