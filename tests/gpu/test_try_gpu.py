"""`kernelscope try` agrees with the same variants written by hand and timed in a fresh
process, within 10 % (issue 24, item 6): compile, CUDA graphs, bf16 autocast, channels_last,
a GradScaler training step among them."""

from __future__ import annotations

import pytest

from support.gpu import NEEDS_GPU
from support.hand_variants import CASES, compare

pytestmark = NEEDS_GPU


@pytest.mark.parametrize("name", list(CASES))
def test_try_agrees_with_hand_written_variants(name: str) -> None:
    got = compare(name, CASES[name])
    assert "error" not in got, got.get("error")
    hand, tried = got["hand"], got["try"]
    for v in tried["variants"]:
        assert v["status"] == "ok", v
        ratio = v["speedup"] / hand["speedup"][v["name"]]
        print(f"{name} {v['name']}: try {v['speedup']:.2f}x, hand "
              f"{hand['speedup'][v['name']]:.2f}x, ratio {ratio:.3f}")  # fmt: skip
        assert abs(ratio - 1) <= 0.10
