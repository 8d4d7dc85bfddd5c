"""The memory pass's reduction (the worker's memory_blocks, as shipped) on hand-built events."""

from __future__ import annotations

from typing import Any

from support.worker import worker_modules

LINE_A = ("/p/train.py", 10, "")
LINE_B = ("/p/train.py", 11, "")
ENGINE = ("", 0, "autograd engine thread (no Python frames)")


def reduce(events: list[tuple[Any, ...]], **kw: Any) -> dict[str, Any]:
    blocks = worker_modules()["memory_blocks"]
    start = {"t0": 0.0, "t1": 100.0, "baseline": kw.pop("baseline", 1000), "reserved": 4096}
    return blocks.reduce_events(
        events, start, kw.pop("before", {}), kw.pop("after", {}), kw.pop("packs", [])
    )


def test_peak_and_the_blocks_live_at_it_by_line_and_kind() -> None:
    out = reduce(
        [
            (1.0, "seg_alloc", 0x9000, 2048, LINE_A),
            (1.0, "alloc", 0x100, 512, LINE_A),  # saved for backward at t=2
            (3.0, "alloc", 0x200, 256, LINE_B),  # a temporary
            (4.0, "alloc", 0x300, 128, ENGINE),  # a gradient (alive at the end)
            (5.0, "free", 0x200, 256, LINE_B),
            (6.0, "free", 0x100, 512, LINE_A),
        ],
        packs=[(0x100, 2.0)],
        after={0x300: ("gradients", 128)},
    )
    assert out["trace_peak_bytes"] == 1000 + 512 + 256 + 128
    assert out["kinds_at_peak"] == {"activations": 512, "temporaries": 256, "gradients": 128}
    assert out["reserved_at_peak_bytes"] == 4096 + 2048
    assert out["peak_at_us"] == 4.0
    rows = {(r["path"], r["line"], r["via"]): r for r in out["lines"]}
    assert rows[LINE_A]["live_at_peak_bytes"] == 512
    assert rows[LINE_A]["device_allocs"] == 1 and rows[LINE_A]["device_alloc_bytes"] == 2048
    assert rows[LINE_B]["allocated_bytes"] == rows[LINE_B]["freed_bytes"] == 256
    assert rows[ENGINE]["kinds"] == {"gradients": 128}
    assert out["timeline"][0] == [0.0, 1000] and out["timeline"][-1] == [6.0, 1128]


def test_a_block_saved_after_its_address_was_reused_is_not_an_activation() -> None:
    out = reduce(
        [
            (1.0, "alloc", 0x100, 512, LINE_A),
            (2.0, "free", 0x100, 512, LINE_A),
            (5.0, "alloc", 0x100, 1024, LINE_B),
        ],
        packs=[(0x100, 1.5)],
    )
    assert out["kinds_at_peak"] == {"temporaries": 1024}


def test_frees_of_blocks_from_before_the_call_lower_the_baseline_held_at_the_peak() -> None:
    out = reduce(
        [
            (1.0, "free", 0x700, 300, LINE_A),  # zero_grad(set_to_none=True)
            (2.0, "alloc", 0x800, 400, LINE_B),
        ],
        before={0x700: ("gradients", 300), 0x600: ("parameters", 500)},
    )
    assert out["trace_peak_bytes"] == 1000 - 300 + 400
    assert out["baseline_at_peak_bytes"] == 700
    assert out["baseline_kinds"] == {"parameters": 500, "other": 200}
    rows = {r["via"]: r for r in out["lines"]}
    assert rows["before the call"]["freed_bytes"] == 300


def test_the_timeline_is_thinned_to_the_highest_point_of_each_slice() -> None:
    blocks = worker_modules()["memory_blocks"]
    points = [(float(t), t % 7) for t in range(1000)]
    thin = blocks.thin_timeline(points, 1000.0, n=10)
    assert len(thin) == 10
    assert all(v == 6 for _t, v in thin)


def test_enclosing_finds_the_innermost_open_interval() -> None:
    blocks = worker_modules()["memory_blocks"]
    spans = [(0.0, 10.0, "outer"), (2.0, 4.0, "inner"), (6.0, 8.0, "second")]
    got = blocks.enclosing(spans, [1.0, 3.0, 5.0, 7.0, 11.0])
    assert got == ["outer", "inner", "outer", "second", None]


def test_without_times_a_saved_address_is_an_activation() -> None:
    events = [(0.001, "alloc", 0x100, 512, LINE_A), (0.002, "alloc", 0x200, 64, LINE_B)]
    blocks = worker_modules()["memory_blocks"]
    start = {"t0": 0.0, "t1": 1.0, "baseline": 0, "reserved": None, "timed": False}
    out = blocks.reduce_events(events, start, {}, {}, [(0x100, 1.7e15)])
    assert out["kinds_at_peak"] == {"activations": 512, "temporaries": 64}
