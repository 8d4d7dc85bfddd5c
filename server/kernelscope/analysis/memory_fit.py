"""Will the next batch fit: the largest batch whose predicted peak stays inside the room the
device has, less a headroom.

The peak is the highest point of the call's memory curve, and which part of the call holds
it can change with the batch (the optimizer's temporaries at a small batch, the activations
at a large one): a line through the peaks misses that. When the calls at each batch size
run the same lines in the same order, each run of their curves (``MemoryPass.by_run``) gets a line
of its own, and the predicted peak is the highest of those lines at the batch; else the
line through the peaks is used, and the forecast says so."""

from __future__ import annotations

import msgspec

#: A point farther than this from the line (relative to its peak) makes the curve not linear.
LINEAR_TOLERANCE = 0.05
#: The share of the room kept free by default (the allocator's rounding, other processes).
DEFAULT_HEADROOM = 0.10


class BatchPoint(msgspec.Struct):
    """The peak one batch size reached (a fresh worker each)."""

    batch_size: int
    peak_bytes: int
    how: str = "measured"
    curve: list[int] = []
    """The call's allocated bytes by run of one line's events (MemoryPass.by_run)."""
    signature: str = ""
    """MemoryPass.runs_signature: equal when the curves line up."""
    allocated_peak_bytes: int = 0
    """The allocated peak (the curve's scale, when peak_bytes is the reserve)."""


class LinearFit(msgspec.Struct):
    """peak ≈ fixed_bytes + per_item_bytes × batch."""

    fixed_bytes: float
    per_item_bytes: float
    max_error: float
    """The largest distance of a point from the line, relative to its peak."""

    def predict(self, batch_size: int) -> int:
        """The predicted peak at a batch size."""
        return int(self.fixed_bytes + self.per_item_bytes * batch_size)


class Forecast(msgspec.Struct):
    """`kernelscope memory`: the points, the fit, the room and the largest batch that fits."""

    qualname: str
    device: str
    measure: str
    """``reserved`` (CUDA: what the allocator took from the device) or ``allocated`` (CPU)."""
    points: list[BatchPoint]
    fit: LinearFit | None = None
    not_linear: str = ""
    free_bytes: int | None = None
    headroom: float = DEFAULT_HEADROOM
    budget_bytes: int | None = None
    largest_batch: int | None = None
    predicted: int | None = None
    model: str = ""
    """``runs of the call`` (a line per run of the memory curve) or ``peaks`` (one line)."""
    check: str | None = None
    """What running the forecast batch showed."""
    checked_peak_bytes: int | None = None
    fits: bool | None = None
    notes: list[str] = []
    asked_batch: int | None = None
    """The batch size the user asked about ("Will batch N fit?"), if any."""
    asked_predicted: int | None = None
    """Its predicted peak (None without a fit)."""
    asked_fits: bool | None = None
    """Whether that prediction is within the room less the headroom."""


def fit_line(points: list[BatchPoint]) -> LinearFit | None:
    """Least squares through the points; None with fewer than two batch sizes."""
    xs = [float(p.batch_size) for p in points]
    ys = [float(p.peak_bytes) for p in points]
    if len(set(xs)) < 2:
        return None
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    fixed = my - slope * mx
    error = max(abs(fixed + slope * x - y) / max(y, 1.0) for x, y in zip(xs, ys, strict=True))
    return LinearFit(fixed, slope, error)


def run_lines(points: list[BatchPoint]) -> list[tuple[float, float]] | None:
    """A line (fixed, per item) per run of the memory curves, when every point has a curve
    of the same length and there are two batch sizes; else None."""
    curves = [p.curve for p in points]
    if len({len(c) for c in curves}) != 1 or not curves[0]:
        return None
    if len({p.signature for p in points}) != 1:
        return None
    if len({p.batch_size for p in points}) < 2:
        return None
    lines: list[tuple[float, float]] = []
    for k in range(len(curves[0])):
        fit = fit_line([BatchPoint(p.batch_size, p.curve[k]) for p in points])
        if fit is None:
            return None
        lines.append((fit.fixed_bytes, fit.per_item_bytes))
    return lines


class PeakModel:
    """The predicted peak at a batch: the highest run line, scaled from allocated to the
    measure (the reserve's ratio at the largest batch measured), or the line through the
    peaks."""

    def __init__(self, points: list[BatchPoint], fit: LinearFit) -> None:
        self.fit = fit
        self.lines = run_lines(points)
        top = max(points, key=lambda p: p.batch_size)
        self.scale = top.peak_bytes / top.allocated_peak_bytes if top.allocated_peak_bytes else 1.0

    def __call__(self, batch: int) -> int:
        if self.lines is None:
            return self.fit.predict(batch)
        return int(max(a + b * batch for a, b in self.lines) * self.scale)

    def largest_within(self, budget: int) -> int | None:
        """The largest batch predicted within ``budget`` (None: not even 1, or no limit)."""
        if self(1) > budget:
            return None
        high = 2
        while self(high) <= budget:
            if high > 1 << 40:
                return None  # the peak does not grow with the batch
            high *= 2
        low = high // 2
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if self(mid) <= budget else (low, mid)
        return low


def forecast(
    qualname: str,
    device: str,
    measure: str,
    points: list[BatchPoint],
    free_bytes: int | None,
    headroom: float = DEFAULT_HEADROOM,
    ask: int | None = None,
) -> Forecast:
    """The fit and the largest batch that fits ``free_bytes`` less the headroom; with
    ``ask``, that batch's predicted peak and whether it fits."""
    fit = fit_line(points)
    out = Forecast(qualname, device, measure, points, fit=fit, headroom=headroom, asked_batch=ask)
    if fit is None:
        out.notes.append("two different batch sizes are needed for a fit")
        return out
    model = PeakModel(points, fit)
    if ask is not None:
        out.asked_predicted = model(ask)
        if free_bytes is not None:
            out.asked_fits = out.asked_predicted <= int(free_bytes * (1.0 - headroom))
    out.model = "peaks" if model.lines is None else "runs of the call"
    if model.lines is None:
        out.notes.append(
            "the calls did not run the same lines in the same order at each batch size: the "
            "forecast follows the line through the peaks"
        )
    if fit.max_error > LINEAR_TOLERANCE:
        out.not_linear = (
            f"a point lies {fit.max_error:.0%} off the line: the peak does not grow linearly "
            "with the batch (cuDNN or cuBLAS workspaces chosen per shape, the allocator's "
            "rounding of large blocks, a recompile); the forecast is rough"
        )
    if free_bytes is None:
        return out
    out.free_bytes = free_bytes
    out.budget_bytes = int(free_bytes * (1.0 - headroom))
    out.largest_batch = model.largest_within(out.budget_bytes)
    if out.largest_batch is None:
        out.notes.append(
            "not even batch 1 is predicted to fit the room"
            if model(1) > out.budget_bytes
            else "the peak does not grow with the batch size: no batch limit from memory"
        )
        return out
    out.predicted = model(out.largest_batch)
    along = fit.predict(out.largest_batch)
    if not out.not_linear and abs(along - out.predicted) > LINEAR_TOLERANCE * out.predicted:
        out.not_linear = (
            f"at batch {out.largest_batch} another part of the call holds the peak than at "
            f"the sizes measured: the line through their peaks says {_mib(along)} MiB, the "
            f"call's own curve {_mib(out.predicted)} MiB"
        )
    return out


def check_batch(out: Forecast) -> int | None:
    """The batch to run to check the forecast: the one asked about when it is predicted to
    fit (None when it is not: it would only run out of memory), else the largest that fits."""
    if out.asked_batch is not None:
        return out.asked_batch if out.asked_fits else None
    return out.largest_batch


def checked(out: Forecast, peak: int | None, failure: str | None) -> Forecast:
    """The forecast with the run at its check_batch: its peak, or why it failed."""
    batch = check_batch(out)
    predicted = out.asked_predicted if out.asked_batch is not None else out.predicted
    if failure is not None:
        out.fits = False
        out.check = f"batch {batch} did not run: {failure}"
        return out
    if peak is None or predicted is None or out.budget_bytes is None:
        return out
    out.checked_peak_bytes = peak
    out.fits = peak <= (out.free_bytes or 0)
    off = (peak - predicted) / max(predicted, 1)
    room = "within the room" if out.fits else "over the room"
    out.check = f"batch {batch} ran: peak {_mib(peak)} MiB, {off:+.1%} from the prediction, {room}"
    return out


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f}"
