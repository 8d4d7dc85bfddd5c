"""What the editor shows after several runs: the latest run of each function only, each labelled
with which run it was, one diagnostic per code per line where runs of several functions touch
it, and `kernelscope/runFinished` after every run (Neovim refreshes its lenses on it)."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from support.lsp import FAST, arrived, open_doc, profile, start, stop, watch_run_finished

NESTED = """\
import torch


def inner(x):
    y = x @ x @ x
    return y.relu()


def inner_inputs():
    return (torch.randn(384, 384),)


def outer(n: int = 384):
    x = torch.randn(n, n)
    z = inner(x)
    return z.sum()


def broken():
    raise RuntimeError("boom")
"""
INNER_BODY = 4  # `y = x @ x @ x`, 0-based


def nested_project(root: Path) -> Path:
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    (root / "nested.py").write_text(NESTED)
    return root


async def inner_then_outer(client: LanguageClient, project: Path) -> str:
    """Open nested.py, profile inner then outer; the document's uri."""
    uri = open_doc(client, project / "nested.py")
    assert (await profile(client, uri, "inner"))["ok"]
    assert (await profile(client, uri, "outer"))["ok"]
    return uri


async def test_overlapping_runs_give_one_diagnostic_per_code_per_line(tmp_path: Path) -> None:
    project = nested_project(tmp_path / "proj")
    client = await start(project)
    try:
        uri = await inner_then_outer(client, project)
        diags = client.diagnostics[uri]
        per_line: dict[tuple[object, int], list[lsp.Diagnostic]] = {}
        for d in diags:
            per_line.setdefault((d.code, d.range.start.line), []).append(d)
        assert all(len(v) == 1 for v in per_line.values()), per_line
        (line,) = per_line[("KS110", INNER_BODY)]  # both runs measured it: one, naming both
        assert "also on this line: `" in line.message, line.message
        named = ("`inner` run ", "`outer` "), ("`outer` run ", "`inner` ")
        assert any(a in line.message and b in line.message for a, b in named), line.message
        assert line.related_information and len(line.related_information) == 1
        # every diagnostic says which run it comes from
        assert all("run " in d.message and " on cpu" in d.message for d in diags), diags
        # the line's hover shows inner's run, then outer's figures for the same line
        hover = await client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(INNER_BODY, 6))
        )
        assert hover is not None
        text = hover.contents.value  # type: ignore[union-attr]
        assert "kernelscope · inner" in text, text
        assert "in the runs of other functions" in text and "`outer` run " in text, text
        assert "called alone, inputs from nested.py::inner_inputs" in text, text
    finally:
        await stop(client)


async def test_each_label_names_the_input_provider(tmp_path: Path) -> None:
    """A run's diagnostics, hover and lens say where its inputs came from: the provider in
    the function's module, one in kernelscope_inputs.py, or the function's defaults."""
    project = nested_project(tmp_path / "proj")
    client = await start(project)
    try:
        uri = await inner_then_outer(client, project)
        defaults = [d for d in client.diagnostics[uri] if "`outer` run " in d.message]
        assert defaults and all(
            "called alone, with its default arguments" in d.message for d in defaults
        ), defaults
        (project / "kernelscope_inputs.py").write_text(
            "def outer_inputs(batch_size: int = 1):\n    return (128,)\n"
        )
        assert (await profile(client, uri, "outer"))["ok"]
        labels = {
            name: f"called alone, {how}"
            for name, how in [
                ("inner", "inputs from nested.py::inner_inputs"),
                ("outer", "inputs from kernelscope_inputs.py::outer_inputs"),
            ]
        }
        diags = client.diagnostics[uri]
        for name, label in labels.items():
            mine = [d for d in diags if f"`{name}` run " in d.message]
            assert mine and all(label in d.message for d in mine), (name, diags)
        for line, name in ((3, "inner"), (12, "outer")):
            hover = await client.text_document_hover_async(
                lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(line, 5))
            )
            assert hover is not None
            assert labels[name] in hover.contents.value, hover  # type: ignore[union-attr]
        lenses = await client.text_document_code_lens_async(
            lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri))
        )
        titles = [lens.command.title for lens in lenses or [] if lens.command]
        assert any(t.endswith(", inputs from inner_inputs") for t in titles), titles
        assert any(", inputs from outer_inputs" in t for t in titles), titles
    finally:
        await stop(client)


async def test_a_function_profiled_twice_shows_only_its_latest_run(tmp_path: Path) -> None:
    project = nested_project(tmp_path / "proj")
    client = await start(project)
    try:
        uri = open_doc(client, project / "nested.py")
        first = await profile(client, uri, "inner")
        second = await profile(client, uri, "inner", {"active": 2})
        assert first["ok"] and second["ok"]
        diags = client.diagnostics[uri]
        (summary,) = [d for d in diags if d.code == "KS100"]
        codes_lines = [(d.code, d.range.start.line) for d in diags]
        assert len(codes_lines) == len(set(codes_lines)), diags  # nothing from the first run
        assert "also on this line" not in "".join(d.message for d in diags)
        lenses = await client.text_document_code_lens_async(
            lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri))
        )
        runs = [
            lens.command.arguments[0]
            for lens in lenses or []
            if lens.command and lens.command.command == "kernelscope.openTrace"
        ]
        assert runs == [second["run_id"]], (runs, first, second)
        titles = [lens.command.title for lens in lenses or [] if lens.command]
        assert any(" vs " in t and "cpu " in t and " UTC" in t for t in titles), titles
        hover = await client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(3, 5))
        )
        assert hover is not None
        text = hover.contents.value  # type: ignore[union-attr]
        assert "(totals over 2 active steps)" in text, text  # the second run's schedule
        assert summary.message.startswith("inner: ")
    finally:
        await stop(client)


async def test_run_finished_arrives_after_a_run_started_by_execute_command(
    tmp_path: Path,
) -> None:
    project = nested_project(tmp_path / "proj")
    client = await start(project, settings=FAST)
    seen = watch_run_finished(client)
    try:
        uri = open_doc(client, project / "nested.py")
        ok = await profile(client, uri, "inner")
        await arrived(seen, 1)
        assert seen[-1] == {"uri": uri, "qualname": "inner", "outcome": "ok", "runId": ok["run_id"]}
        bad = await profile(client, uri, "broken")  # a failed run ends too
        assert not bad["ok"], bad
        await arrived(seen, 2)
        assert seen[-1] == {"uri": uri, "qualname": "broken", "outcome": "failed", "runId": None}
    finally:
        await stop(client)
