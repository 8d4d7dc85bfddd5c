"""Plain-text columns: the terminal's tables and the hover's (a code block reads the same in
VS Code's markdown and Neovim's, where a markdown table shows as raw pipes)."""

from __future__ import annotations

from collections.abc import Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> list[str]:
    """Columns padded to width; `align` has one letter a column, l or r (default: l then r)."""
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        out = [
            c.ljust(w) if a == "l" else c.rjust(w)
            for c, w, a in zip(cells, widths, align, strict=True)
        ]
        return "  " + "  ".join(out).rstrip()

    return [line(headers), *(line(r) for r in rows)]
