"""The memory pass in the editor: the hover's memory figures, inlay hints on the lines that
hold the peak, and the memory findings as diagnostics (pytest-lsp's real client, CPU)."""

from __future__ import annotations

import shutil
from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from support import WORKLOADS
from support.lsp import open_doc, profile


async def test_hover_and_hints_show_what_a_line_holds_at_the_peak(
    client: LanguageClient, project: Path
) -> None:
    shutil.copy(WORKLOADS / "memory_train.py", project / "memory_train.py")
    uri = open_doc(client, project / "memory_train.py")
    result = await profile(client, uri, "train_step")
    assert result["ok"], result
    def_hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(19, 6))
    )
    assert def_hover is not None
    assert "**Memory:** peak" in def_hover.contents.value  # type: ignore[union-attr]
    # `opt.step()` (line 25): AdamW's temporaries hold the peak
    step = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(24, 8))
    )
    assert step is not None
    text = step.contents.value  # type: ignore[union-attr]
    assert "**memory, line 25:** it holds" in text and "temporaries" in text
    hints = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(0, 0), lsp.Position(45, 0))
        )
    )
    labels = {h.position.line + 1: str(h.label) for h in hints or []}
    assert "of memory peak" in labels[25]
    # self.down (line 17) is inside Mlp.forward, not train_step: no hint of train_step there
    assert 17 not in labels
    # the run's memory timeline, kept beside its trace: a PNG and a Perfetto counter track
    traces = project / ".kernelscope" / "traces"
    assert [p.suffix for p in sorted(traces.glob("train_step-*.memory.*"))] == [".json", ".png"]
