"""The batch-doubling verdict: how the time per call grows with the batch names the bottleneck.

Flat means the call is overhead-bound (more work per call is nearly free), linear means the
device is full (compute-bound, or bandwidth-saturated), sublinear is in between (memory- or
latency-bound, partly saturated). The time per item is the same curve seen another way (its
slope is the call's minus 1), and every summary quotes it as the table prints it.
``classify`` is pure; app/scale.py measures the points."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import msgspec

from kernelscope.units import fmt_us

Shape = Literal["flat", "sublinear", "linear", "mixed"]
Bound = Literal["overhead", "memory", "compute"]
RunShape = Literal["flat", "sublinear", "linear"]
_BOUND: dict[RunShape, Bound] = {"flat": "overhead", "sublinear": "memory", "linear": "compute"}


FLAT_BELOW = 0.25
"""A run is flat when its log-log slope is below this: doubling the batch costs < 19 % more."""
LINEAR_FROM = 0.75
"""A run is linear from this slope up: doubling the batch costs ≥ 68 % more."""
KNEE_RISE = 0.3
"""A knee needs the slope to rise by this much across it (flat to linear always does)."""


class ScalePoint(msgspec.Struct, frozen=True):
    """The function's unprofiled time per call at one batch factor."""

    factor: int
    batch_size: int
    us_per_call: float
    us_per_item: float
    growth: float | None = None
    """us_per_call over the previous factor's (None for the first)."""
    method: str = ""
    reps: int = 0
    trace_path: str | None = None
    device_type: str = ""
    device_name: str = ""
    device_index: int | None = None


class ScaleVerdict(msgspec.Struct, frozen=True):
    """What the growth of the time per call says about the bottleneck."""

    shape: Shape
    bound: Bound
    """The bottleneck at the smallest factor measured (the batch the function runs at now)."""
    knee_factor: int | None
    """The factor from which time grows linearly (the time per item stops falling); None when
    it never does here."""
    summary: str
    slopes: list[float]
    """Log-log slope of each consecutive pair of points, as measured."""
    segment_shapes: list[RunShape]
    """What each consecutive pair is judged to be, from the fitted runs."""
    run_slopes: list[float]
    """Least-squares slope of each run: the whole series, or before and after the knee."""


def points_from_times(
    factors: Sequence[int], us_per_call: Sequence[float], base_batch: int = 1
) -> list[ScalePoint]:
    """Scale points from bare timings (recorded fixtures, tests)."""
    points: list[ScalePoint] = []
    for factor, us in zip(factors, us_per_call, strict=True):
        points.append(ScalePoint(factor, base_batch * factor, us, us / factor, growth(us, points)))
    return points


def growth(us: float, earlier: Sequence[ScalePoint]) -> float | None:
    return us / earlier[-1].us_per_call if earlier and earlier[-1].us_per_call > 0 else None


def classify(points: Sequence[ScalePoint]) -> ScaleVerdict:
    """Name the shape of time per call against batch factor, its bound and its knee.

    Slopes are taken in log-log space (log time against log factor): 0 is flat, 1 is linear.
    Single points are noisy: on the recorded H200 runs, MLP width 64 reads 76 -> 122 us from
    x64 to x128 while its GPU time stays at 6 us, and width 8192 reads 162 us at x8 where its
    GPU time is 93 us. So no verdict rests on one consecutive slope; regimes are judged on
    runs of points by their least-squares slope:

    - flat: slope < ``FLAT_BELOW`` (0.25) -> overhead-bound;
    - linear: slope >= ``LINEAR_FROM`` (0.75) -> compute-bound (or bandwidth-saturated);
    - sublinear: in between -> memory- or latency-bound, partly saturated.

    The knee splits the points at a measured factor into a flat or sublinear run and a
    linear run (both include the knee's point; the slope rises by ``KNEE_RISE`` or more);
    of all such splits the one with the largest change of slope wins (a flat first run
    before a sublinear one), and the shape is "mixed", its bound the first run's. With no
    such split the whole series is one run. So a time per item that falls to ×4 and then
    grows (185, 138, 109, 124 ms at ×1..×8: one fitted slope of 0.79) is sublinear to ×4,
    then linear, not compute-bound from ×1.

    On the recorded MLP runs (fixtures/mlp_*), width 64 fits 0.03 over x1..x128 and its
    steepest run, the last pair, is 0.68; width 8192 splits at x4 into -0.06 and 0.80 (at x8
    into 0.23 and 0.84). LINEAR_FROM is 0.75 rather than 0.8 because that 0.80 is 0.799.
    """
    pts = sorted(points, key=lambda p: p.factor)
    if len(pts) < 2 or len({p.factor for p in pts}) != len(pts):
        raise ValueError("classify needs at least two points with different factors")
    xs = [math.log2(p.factor) for p in pts]
    ys = [math.log2(max(p.us_per_call, 1e-3)) for p in pts]
    slopes = [(ys[i] - ys[i - 1]) / (xs[i] - xs[i - 1]) for i in range(1, len(pts))]
    knees: list[tuple[bool, float, int, float, float]] = []
    for k in range(1, len(pts) - 1):
        before, after = _fit_slope(xs[: k + 1], ys[: k + 1]), _fit_slope(xs[k:], ys[k:])
        if before < LINEAR_FROM <= after and after - before >= KNEE_RISE:
            knees.append((before < FLAT_BELOW, after - before, k, before, after))
    if knees:
        _, _, k, before, after = max(knees)
        first = _run_shape(before)
        shapes: list[RunShape] = [first if i < k else "linear" for i in range(len(pts) - 1)]
        return ScaleVerdict(
            shape="mixed",
            bound=_BOUND[first],
            knee_factor=pts[k].factor,
            summary=_mixed_summary(pts, k, first, before, after),
            slopes=slopes,
            segment_shapes=shapes,
            run_slopes=[before, after],
        )
    slope = _fit_slope(xs, ys)
    shape = _run_shape(slope)
    return ScaleVerdict(
        shape=shape,
        bound=_BOUND[shape],
        knee_factor=pts[0].factor if shape == "linear" else None,
        summary=_summary(pts, shape, slope),
        slopes=slopes,
        segment_shapes=[shape] * (len(pts) - 1),
        run_slopes=[slope],
    )


def _run_shape(slope: float) -> RunShape:
    if slope < FLAT_BELOW:
        return "flat"
    return "linear" if slope >= LINEAR_FROM else "sublinear"


def _fit_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys on xs."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0


def _span(pts: Sequence[ScalePoint]) -> str:
    first, last = pts[0], pts[-1]
    return (
        f"×{last.factor / first.factor:g} the batch, "
        f"×{last.us_per_call / first.us_per_call:.2f} the time per call "
        f"(per item {_item(first)} → {_item(last)})"
    )


def _item(p: ScalePoint) -> str:
    """ "109 ms at ×4": the time per item at a factor, as the table prints it."""
    return f"{fmt_us(p.us_per_item)} at ×{p.factor}"


def _summary(pts: Sequence[ScalePoint], shape: RunShape, slope: float) -> str:
    if shape == "flat":
        return (
            f"flat (slope {slope:.2f}): {_span(pts)} — overhead-bound: more work per call is "
            "nearly free; batch more, or cut overhead (CUDA Graphs, torch.compile)"
        )
    if shape == "sublinear":
        return (
            f"sublinear (slope {slope:.2f}): {_span(pts)} — memory- or latency-bound, partly "
            "saturated: batching still pays; fusion cuts memory traffic"
        )
    return (
        f"linear (slope {slope:.2f}): {_span(pts)} — compute-bound (or bandwidth-saturated) "
        f"from ×{pts[0].factor}: the device is full"
    )


def _mixed_summary(
    pts: Sequence[ScalePoint], k: int, first: RunShape, before: float, after: float
) -> str:
    knee, last = pts[k], pts[-1]
    cheaper = pts[0].us_per_item / knee.us_per_item
    if first == "flat":
        at_first = "overhead-bound"
        pays = f"the batch is nearly free (×{cheaper:.1f} cheaper per item)"
    else:
        at_first = "memory- or latency-bound"
        pays = f"batching pays (×{cheaper:.1f} cheaper per item)"
    change = last.us_per_item / knee.us_per_item
    trend = "grows" if change > 1.05 else "falls slowly" if change < 0.95 else "stays"
    return (
        f"{first} to ×{knee.factor}, then linear (slopes {before:.2f} → {after:.2f}) — "
        f"{at_first} at ×{pts[0].factor}: up to ×{knee.factor} {pays}; beyond it the device "
        f"is full (compute-bound) and the time per item {trend} (per item {_item(pts[0])}, "
        f"{_item(knee)}, {_item(last)})"
    )
