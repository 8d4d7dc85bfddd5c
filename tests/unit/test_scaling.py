"""The batch-doubling test: the classifier on the recorded H200 MLP runs and on hand-made
series, and the PNG and terminal charts (live CPU runs: tests/integration/test_scaling_live.py)."""

from __future__ import annotations

import json

import pytest

from kernelscope.analysis.scaling import ScalePoint, classify, points_from_times
from kernelscope.app.scale import check_factors
from kernelscope.render.plot import IDEAL, KNEE, MEASURED, render_png, text_chart
from kernelscope.units import fmt_us

from support import FIXTURES
from support.png import decode_png


def recorded(width: int, timing: str = "unprofiled") -> list[ScalePoint]:
    """fixtures/mlp_<width>/meta.json's scaling runs (base batch 32, factors 1..128)."""
    runs = json.loads((FIXTURES / f"mlp_{width}" / "meta.json").read_text())["scaling"]
    factors = [int(f) for f in runs]
    if timing == "unprofiled":
        us = [run["timing"]["unprofiled_us_per_call"] for run in runs.values()]
    else:  # the independent CUDA-event timing, a separate process
        us = [run["cuda_events"]["median_us"] for run in runs.values()]
    return points_from_times(factors, us, base_batch=32)


# --- the classifier on real data ----------------------------------------------------------


@pytest.mark.parametrize("timing", ["unprofiled", "cuda_events"])
def test_mlp_width_64_is_flat_at_every_factor(timing: str) -> None:
    verdict = classify(recorded(64, timing))
    assert (verdict.shape, verdict.bound, verdict.knee_factor) == ("flat", "overhead", None)
    assert set(verdict.segment_shapes) == {"flat"}
    assert len(verdict.slopes) == 7
    assert verdict.summary.startswith("flat")


def test_mlp_width_64_defaults_are_flat() -> None:
    verdict = classify(recorded(64)[:4])  # factors 1, 2, 4, 8
    assert (verdict.shape, verdict.knee_factor) == ("flat", None)


@pytest.mark.parametrize("timing", ["unprofiled", "cuda_events"])
def test_mlp_width_8192_is_flat_then_linear(timing: str) -> None:
    points = recorded(8192, timing)
    verdict = classify(points)
    assert verdict.shape == "mixed"
    assert verdict.bound == "overhead"  # at the base batch
    assert verdict.knee_factor in {4, 8}
    k = [p.factor for p in points].index(verdict.knee_factor)
    assert verdict.segment_shapes == ["flat"] * k + ["linear"] * (len(points) - 1 - k)
    before, after = verdict.run_slopes
    assert before < 0.25 <= 0.75 <= after
    assert f"flat to ×{verdict.knee_factor}, then linear" in verdict.summary


def test_mlp_width_8192_unprofiled_knee_is_x4() -> None:
    assert classify(recorded(8192)).knee_factor == 4
    assert classify(recorded(8192)[:4]).knee_factor == 4  # the default factors see it too


# --- the classifier on hand-made series --------------------------------------------------


def series(us: list[float]) -> list[ScalePoint]:
    return points_from_times([2**i for i in range(len(us))], us)


def test_hand_made_flat_linear_sublinear() -> None:
    flat = classify(series([100, 104, 97, 101, 99]))
    assert (flat.shape, flat.bound, flat.knee_factor) == ("flat", "overhead", None)
    linear = classify(series([100, 210, 390, 820, 1600]))
    assert (linear.shape, linear.bound, linear.knee_factor) == ("linear", "compute", 1)
    sublinear = classify(series([100 * 2 ** (0.5 * i) for i in range(5)]))
    assert (sublinear.shape, sublinear.bound, sublinear.knee_factor) == (
        "sublinear",
        "memory",
        None,
    )
    assert sublinear.slopes == pytest.approx([0.5] * 4)


def test_hand_made_knee() -> None:
    verdict = classify(series([100, 100, 100, 200, 400, 800]))
    assert (verdict.shape, verdict.knee_factor) == ("mixed", 4)
    assert verdict.run_slopes == pytest.approx([0.0, 1.0])
    last_pair = classify(series([100, 100, 100, 190]))  # a knee on the last pair still counts
    assert last_pair.knee_factor == 4


@pytest.mark.parametrize(
    ("slope", "shape"), [(0.2, "flat"), (0.3, "sublinear"), (0.7, "sublinear"), (0.8, "linear")]
)
def test_thresholds(slope: float, shape: str) -> None:
    assert classify(series([50 * 2 ** (slope * i) for i in range(4)])).shape == shape


def test_points_and_factors() -> None:
    points = points_from_times([1, 2, 4], [10.0, 15.0, 30.0], base_batch=32)
    assert [p.batch_size for p in points] == [32, 64, 128]
    assert [p.us_per_item for p in points] == [10.0, 7.5, 7.5]
    assert [p.growth for p in points] == [None, 1.5, 2.0]
    assert check_factors([8, 1, 2, 2, 4]) == [1, 2, 4, 8]
    with pytest.raises(ValueError, match="two"):
        check_factors([4, 4])
    with pytest.raises(ValueError, match=">= 1"):
        check_factors([0, 1])
    with pytest.raises(ValueError, match="two points"):
        classify(points[:1])


# --- charts ---------------------------------------------------------------------------------


def count(rgb: bytes, color: tuple[int, int, int]) -> int:
    return sum(1 for i in range(0, len(rgb), 3) if tuple(rgb[i : i + 3]) == color)


def test_png_is_a_valid_chart() -> None:
    points = recorded(8192)
    data = render_png(points, classify(points), title="MLP.forward · NVIDIA H200", width=500)
    width, height, rgb = decode_png(data)
    assert (width, height) == (500, 440)
    assert count(rgb, MEASURED) > 500  # line, points and legend
    assert count(rgb, IDEAL) > 100  # the dashed ideal-linear reference
    assert count(rgb, KNEE) > 50  # the knee marker
    assert count(rgb, (255, 255, 255)) > width * height // 2


def test_png_of_flat_data_has_no_knee() -> None:
    points = recorded(64)
    _, _, rgb = decode_png(render_png(points, classify(points)))
    assert count(rgb, MEASURED) > 500
    assert count(rgb, KNEE) == 0


def test_text_chart() -> None:
    chart = text_chart(recorded(8192)).splitlines()
    assert len(chart) == 6  # five rows and the factor labels
    assert chart[-1].split()[:8] == ["×1", "×2", "×4", "×8", "×16", "×32", "×64", "×128"]
    assert chart[0].rstrip().endswith(" ████")  # only the largest factor reaches the top row
    assert chart[0].split()[:2] == ["1.51", "ms"]  # labelled with its measured time
    flat = text_chart(recorded(64)[:4]).splitlines()
    assert all(set(row.split()[-1]) <= {"│"} for row in flat[1:4])  # empty upper rows


# --- what a report says agrees with the curve it prints -----------------------------------

# per item 185 → 138 → 109 → 124 ms at ×1..×8: one fitted slope of 0.79 over the four
REPORTED = points_from_times([1, 2, 4, 8], [185e3, 2 * 138e3, 4 * 109e3, 8 * 124e3])


def test_a_curve_cheaper_per_item_to_x4_is_not_compute_bound_from_x1() -> None:
    verdict = classify(REPORTED)
    assert (verdict.shape, verdict.bound, verdict.knee_factor) == ("mixed", "memory", 4)
    assert verdict.segment_shapes == ["sublinear", "sublinear", "linear"]
    summary = verdict.summary
    assert summary.startswith("sublinear to ×4, then linear"), summary
    assert "from ×1" not in summary and "memory- or latency-bound at ×1" in summary
    # the per-item times it quotes are the table's
    for p in (REPORTED[0], REPORTED[2], REPORTED[3]):
        assert f"{fmt_us(p.us_per_item)} at ×{p.factor}" in summary
    assert "time per item grows" in summary


def test_the_text_chart_is_labelled_with_measured_times_only() -> None:
    for points in (REPORTED, recorded(8192), recorded(64)[:4]):
        rows = text_chart(points).splitlines()
        labels = [row.split("┤")[0].strip() for row in rows if "┤" in row]
        times = [fmt_us(p.us_per_call) for p in points]
        assert labels and set(labels) <= set(times), labels
        assert labels[0] == fmt_us(max(p.us_per_call for p in points))  # the top label
