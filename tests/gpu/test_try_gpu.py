"""`kernelscope try` agrees with the same variants written by hand and timed in a fresh
process, within 10 % (issue 24, item 6): compile, CUDA graphs, bf16 autocast, channels_last,
a GradScaler training step among them.

On the H200 the host runs a whole process's thread ~1.7x slower at times (its own loops
slowed alike: docs/h200-run/sixth/try_blocks.txt), which moves a host-bound variant's time
and not a GPU-bound baseline's. Where one side ran so (try kept slowed rounds in, or the two
processes' loops at their best differ by more than SLOWED) the two measured different hosts:
the case is an expected failure that prints both loops, not a pass."""

from __future__ import annotations

import pytest

from support.gpu import NEEDS_GPU
from support.hand_variants import CASES, compare

pytestmark = NEEDS_GPU
SLOWED = 1.3  # the worker's timing.SLOWED


@pytest.mark.parametrize("name", list(CASES))
def test_try_agrees_with_hand_written_variants(name: str) -> None:
    got = compare(name, CASES[name])
    assert "error" not in got, got.get("error")
    hand, tried = got["hand"], got["try"]
    loops = (hand["reference_us"], tried["reference_us"])
    print(f"{name}: baseline try {tried['baseline_us']:.1f} µs, hand {hand['us']['baseline']:.1f}; "
          f"loops try {loops[1]:.1f} (host {tried['host_reference_us'] or 0:.1f}, "
          f"{tried['slowed_kept']} slowed rounds kept, {tried['slowed_rounds']} left out), "
          f"hand {loops[0]:.1f} µs ({hand['slowed_rounds']} left out)")  # fmt: skip
    ratios = {}
    for v in tried["variants"]:
        assert v["status"] == "ok", v
        ratios[v["name"]] = v["speedup"] / hand["speedup"][v["name"]]
        print(f"{name} {v['name']}: try {v['speedup']:.2f}x ({v['us_per_call']:.1f} µs), hand "
              f"{hand['speedup'][v['name']]:.2f}x ({hand['us'][v['name']]:.1f} µs), "
              f"ratio {ratios[v['name']]:.3f}")  # fmt: skip
    apart = [r for r in ratios.values() if abs(r - 1) > 0.10]
    if apart and (tried["slowed_kept"] or max(loops) > SLOWED * min(loops)):
        pytest.xfail(f"the host ran one side slowed: loops {loops[0]:.1f} and {loops[1]:.1f} µs")
    assert not apart, ratios
