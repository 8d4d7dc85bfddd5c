"""Replay: recorded H200 runs fed through the whole server path, so GPU views are tested in CI."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from support import FIXTURES
from support.lsp import open_doc


async def replay(
    client: LanguageClient, project: Path, scenario: str, qualname: str
) -> tuple[str, dict]:
    source = next((FIXTURES / scenario).glob("*.py"))
    target = project / source.name
    shutil.copy(source, target)
    uri = open_doc(client, target)
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(
            "kernelscope.importTrace", [uri, qualname, str(FIXTURES / scenario / "trace.json.gz")]
        )
    )
    return uri, result


async def test_compute_bound_run_shows_on_the_def_line(
    client: LanguageClient, project: Path
) -> None:
    uri, result = await replay(client, project, "matmul_add_8192", "matmul_add")
    assert result["bound"] == "compute"
    diags = client.diagnostics[uri]
    verdict = next(d for d in diags if d.code == "KS103")
    assert verdict.range.start.line == 9  # `def matmul_add` (0-based)
    assert verdict.severity == lsp.DiagnosticSeverity.Information
    assert "TFLOP/s" in verdict.message
    assert verdict.code_description and verdict.code_description.href.endswith("findings.md#ks103")
    dead = next(d for d in diags if d.code == "KS201")
    assert dead.severity == lsp.DiagnosticSeverity.Hint and "cuBLAS" in dead.message
    line = next(d for d in diags if d.code == "KS110")
    assert line.range.start.line == 10 and "CUDA" in line.message
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri))
    )
    titles = [x.command.title for x in lenses or [] if x.command]
    assert any(
        t.startswith("1.45 ms CUDA/step · compute-bound · ") and "of peak" in t for t in titles
    ), titles
    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(9, 5))
    )
    text = hover.contents.value  # type: ignore[union-attr]
    assert "**1.45 ms CUDA**" in text and "NVIDIA H200" in text and "aten::mm" in text
    assert "entry → first kernel 101" in text
    hints = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(0, 0), lsp.Position(30, 0))
        )
    )
    assert any(h.position.line == 10 and "100% CUDA" in str(h.label) for h in hints or [])


async def test_overhead_bound_run_is_a_warning_with_what_to_try(
    client: LanguageClient, project: Path
) -> None:
    uri, result = await replay(client, project, "matmul_add_64", "matmul_add")
    assert result["bound"] == "overhead"
    verdict = next(d for d in client.diagnostics[uri] if d.code == "KS101")
    assert verdict.severity == lsp.DiagnosticSeverity.Warning
    assert "CUDA Graph" in verdict.message and "batch" in verdict.message


async def test_sync_points_and_fusion_chains_land_on_their_lines(
    client: LanguageClient, project: Path
) -> None:
    uri, _ = await replay(client, project, "syncs", "syncs")
    syncs = sorted(d.range.start.line for d in client.diagnostics[uri] if d.code == "KS301")
    assert syncs == [7, 8, 9, 10]
    uri, result = await replay(client, project, "cos_cos", "cos_cos")
    assert result["bound"] == "memory"
    chain = next(d for d in client.diagnostics[uri] if d.code == "KS501")
    assert chain.range.start.line == 10 and "aten::cos ×2" in chain.message


@pytest.mark.parametrize(
    "arguments",
    [
        ["FILE", "matmul_add"],
        ["FILE", "matmul_add", "/no/such/trace.json"],
        ["FILE", "nope", "TRACE"],
    ],
)
async def test_bad_imports_are_errors(
    client: LanguageClient, project: Path, arguments: list[str]
) -> None:
    source = FIXTURES / "matmul_add_64" / "matmul_add.py"
    shutil.copy(source, project / "matmul_add.py")
    uri = open_doc(client, project / "matmul_add.py")
    trace = str(FIXTURES / "matmul_add_64" / "trace.json.gz")
    args = [uri if a == "FILE" else trace if a == "TRACE" else a for a in arguments]
    with pytest.raises(Exception, match=r"takes|no such file|has no function"):
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("kernelscope.importTrace", args)
        )


async def test_an_import_shows_its_reading_and_ends(client: LanguageClient, project: Path) -> None:
    source = FIXTURES / "resnet50" / "cnn.py"
    shutil.copy(source, project / "cnn.py")
    uri = open_doc(client, project / "cnn.py")
    plain = project / "resnet50.pt.trace.json"  # a plain-JSON trace, read in pieces
    plain.write_bytes(gzip.decompress((FIXTURES / "resnet50" / "trace.json.gz").read_bytes()))
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams("kernelscope.importTrace", [uri, "resnet_forward", str(plain)])
    )
    assert result["ok"] and result["bound"]
    reports = next(
        r
        for r in client.progress_reports.values()
        if isinstance(r[0], lsp.WorkDoneProgressBegin)
        and r[0].title == "Importing resnet50.pt.trace.json"
    )
    assert isinstance(reports[-1], lsp.WorkDoneProgressEnd) and reports[-1].message == "imported"
    middle = reports[1:-1]
    assert middle, "no progress between begin and end"  # ~0.5 s of import, polled every 0.1 s
    for report in middle:
        assert isinstance(report, lsp.WorkDoneProgressReport)
        assert report.message and report.message.startswith(("reading the trace: ", "analyzing"))


async def test_a_trace_bigger_than_memory_is_refused_and_the_server_stays(
    client: LanguageClient, project: Path
) -> None:
    shutil.copy(FIXTURES / "matmul_add_64" / "matmul_add.py", project / "matmul_add.py")
    uri = open_doc(client, project / "matmul_add.py")
    huge = project / "huge.pt.trace.json"
    with huge.open("wb") as f:  # sparse: never read
        f.truncate(1 << 40)  # 1 TiB
    with pytest.raises(Exception, match=r"cannot import huge.pt.trace.json: .*of memory"):
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("kernelscope.importTrace", [uri, "matmul_add", str(huge)])
        )
    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(9, 5))
    )
    assert hover is None or hover.contents  # answered: the server is up
