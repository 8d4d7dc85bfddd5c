"""Names cut to a width end in "…" where they are cut (one helper, units.cut)."""

from __future__ import annotations

from kernelscope.analysis.ops import OpStat
from kernelscope.render.text import _ops_table  # pyright: ignore[reportPrivateUsage]
from kernelscope.units import cut

FLASH = "aten::_scaled_dot_product_flash_attention_for_cpu"


def test_cut_marks_the_cut_and_keeps_the_width() -> None:
    assert cut("aten::mm", 48) == "aten::mm"
    assert cut("x" * 48, 48) == "x" * 48
    cut_name = cut(FLASH, 48)
    assert cut_name == FLASH[:47] + "…" and len(cut_name) == 48
    assert cut("abc", 1) == "…"


def test_the_op_table_cuts_a_long_op_name_with_an_ellipsis() -> None:
    rows = _ops_table(
        [OpStat(FLASH, 5, 1.0, 2.0, 3.0, 4.0), OpStat("aten::mm", 5, 1, 2, 3, 4)], True, 5
    )
    text = "\n".join(rows)
    assert "aten::_scaled_dot_product_flash_attention_for_c…" in text
    assert "for_cp " not in text
    assert "aten::mm" in text
