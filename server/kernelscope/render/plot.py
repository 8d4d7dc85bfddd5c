"""Charts of a scaling run: a dependency-free PNG line chart and a few-row terminal chart.

The PNG is rasterized in pure Python into an RGB bytearray and written with zlib and struct;
its text uses a built-in 3×5 bitmap font (capitals, digits, a little punctuation).
"""

from __future__ import annotations

import itertools
import math
import struct
import zlib
from collections.abc import Sequence
from typing import Literal, Protocol

from kernelscope.analysis.scaling import ScalePoint, ScaleVerdict
from kernelscope.units import fmt_us

Color = tuple[int, int, int]
WHITE: Color = (255, 255, 255)
INK: Color = (40, 40, 40)
GRID: Color = (225, 225, 225)
MEASURED: Color = (31, 119, 180)
IDEAL: Color = (150, 150, 150)
KNEE: Color = (214, 39, 40)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# 3×5 glyphs: five rows of three bits, top row first, high bit on the left.
_FONT: dict[str, int] = {
    " ": 0,
    "0": 0b111_101_101_101_111,
    "1": 0b010_110_010_010_111,
    "2": 0b111_001_111_100_111,
    "3": 0b111_001_111_001_111,
    "4": 0b101_101_111_001_001,
    "5": 0b111_100_111_001_111,
    "6": 0b111_100_111_101_111,
    "7": 0b111_001_001_010_010,
    "8": 0b111_101_111_101_111,
    "9": 0b111_101_111_001_111,
    "A": 0b010_101_111_101_101,
    "B": 0b110_101_110_101_110,
    "C": 0b011_100_100_100_011,
    "D": 0b110_101_101_101_110,
    "E": 0b111_100_110_100_111,
    "F": 0b111_100_110_100_100,
    "G": 0b011_100_101_101_011,
    "H": 0b101_101_111_101_101,
    "I": 0b111_010_010_010_111,
    "J": 0b001_001_001_101_010,
    "K": 0b101_101_110_101_101,
    "L": 0b100_100_100_100_111,
    "M": 0b101_111_111_101_101,
    "N": 0b110_101_101_101_101,
    "O": 0b010_101_101_101_010,
    "P": 0b110_101_110_100_100,
    "Q": 0b010_101_101_111_011,
    "R": 0b110_101_110_101_101,
    "S": 0b011_100_010_001_110,
    "T": 0b111_010_010_010_010,
    "U": 0b101_101_101_101_111,
    "V": 0b101_101_101_101_010,
    "W": 0b101_101_111_111_101,
    "X": 0b101_101_010_101_101,
    "Y": 0b101_101_010_010_010,
    "Z": 0b111_001_010_100_111,
    ".": 0b000_000_000_000_010,
    ",": 0b000_000_000_010_100,
    ":": 0b000_010_000_010_000,
    "-": 0b000_000_111_000_000,
    "_": 0b000_000_000_000_111,
    "+": 0b000_010_111_010_000,
    "/": 0b001_001_010_100_100,
    "%": 0b101_001_010_100_101,
    "(": 0b001_010_010_010_001,
    ")": 0b100_010_010_010_100,
    "µ": 0b000_101_101_110_100,
    "×": 0b000_101_010_101_000,
    "·": 0b000_000_010_000_000,
    "→": 0b000_010_111_010_000,
}


class Canvas:
    """An RGB raster with the few drawing operations a line chart needs."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(b"\xff" * (width * height * 3))

    def dot(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = (y * self.width + x) * 3
            self.pixels[i : i + 3] = bytes(color)

    def box(self, x: int, y: int, w: int, h: int, color: Color) -> None:
        for yy in range(y, y + h):
            for xx in range(x, x + w):
                self.dot(xx, yy, color)

    def line(
        self,
        start: tuple[float, float],
        end: tuple[float, float],
        color: Color,
        width: int = 1,
        dash: int = 0,
    ) -> None:
        """A straight line `width` pixels thick; `dash` > 0 draws dashes of that many steps."""
        (x0, y0), (x1, y1) = start, end
        steps = max(1, round(max(abs(x1 - x0), abs(y1 - y0))))
        for i in range(steps + 1):
            if dash and (i // dash) % 2:
                continue
            x = round(x0 + (x1 - x0) * i / steps) - width // 2
            y = round(y0 + (y1 - y0) * i / steps) - width // 2
            self.box(x, y, width, width, color)

    def disc(self, cx: float, cy: float, r: int, color: Color) -> None:
        for dy in range(-r, r + 1):
            for dx in range(-r, r + 1):
                if dx * dx + dy * dy <= r * r + r:
                    self.dot(round(cx) + dx, round(cy) + dy, color)

    def text(
        self,
        x: float,
        y: float,
        text: str,
        color: Color,
        scale: int = 2,
        align: Literal["left", "center", "right"] = "left",
    ) -> None:
        """`text` with its top at `y`; letters in capitals, unknown characters as blanks."""
        advance = 4 * scale
        width = len(text) * advance - scale
        left = round(x - {"left": 0, "center": width / 2, "right": width}[align])
        top = round(y)
        for n, ch in enumerate(text):
            bits = _FONT.get(ch, _FONT.get(ch.upper(), 0))
            for row in range(5):
                for col in range(3):
                    if bits >> (14 - 3 * row - col) & 1:
                        self.box(
                            left + n * advance + col * scale, top + row * scale, scale, scale, color
                        )

    def png(self) -> bytes:
        """The raster as an 8-bit RGB PNG."""
        stride = self.width * 3
        raw = b"".join(
            b"\x00" + self.pixels[y * stride : (y + 1) * stride] for y in range(self.height)
        )
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (
            PNG_SIGNATURE
            + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(raw, 9))
            + _chunk(b"IEND", b"")
        )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 values between lo and hi (decades only when that gives too many)."""
    ticks = [
        m * 10.0**e
        for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        for m in (1, 2, 5)
        if lo <= m * 10.0**e <= hi
    ]
    return ticks if len(ticks) <= 10 else [t for t in ticks if math.log10(t).is_integer()]


def _tick_label(us: float) -> str:
    if us < 1_000:
        return f"{us:g}µs"
    if us < 1_000_000:
        return f"{us / 1_000:g}ms"
    return f"{us / 1_000_000:g}s"


def _y_range(us: Sequence[float]) -> tuple[float, float]:
    """Log axis bounds: at least a ×20 span, so that noise on flat data looks flat."""
    lo = min(us) * 0.7
    return lo, max(max(us) * 1.5, lo * 20)


def render_png(
    points: Sequence[ScalePoint],
    verdict: ScaleVerdict | None = None,
    title: str = "",
    width: int = 720,
    height: int = 440,
) -> bytes:
    """Time per call against batch factor (log2 x, log y), with the ideal-linear line."""
    pts = sorted(points, key=lambda p: p.factor)
    if not pts:
        raise ValueError("no points to plot")
    canvas = Canvas(width, height)
    left, right, top, bottom = 84, width - 24, 48, height - 56
    x_lo, x_hi = math.log2(pts[0].factor) - 0.35, math.log2(pts[-1].factor) + 0.35
    y_lo, y_hi = _y_range([p.us_per_call for p in pts])

    def px(factor: float) -> float:
        return left + (math.log2(factor) - x_lo) / (x_hi - x_lo) * (right - left)

    def py(us: float) -> float:
        return bottom - math.log(us / y_lo) / math.log(y_hi / y_lo) * (bottom - top)

    for tick in _log_ticks(y_lo, y_hi):
        canvas.line((left, py(tick)), (right, py(tick)), GRID)
        canvas.text(left - 8, py(tick) - 5, _tick_label(tick), INK, align="right")
    for p in pts:
        canvas.line((px(p.factor), top), (px(p.factor), bottom), GRID)
        canvas.text(px(p.factor), bottom + 8, f"×{p.factor}", INK, align="center")
    canvas.line((left, top), (left, bottom), INK)
    canvas.line((left, bottom), (right, bottom), INK)

    first = pts[0]
    end = min(2.0**x_hi, first.factor * y_hi / first.us_per_call)
    if end > first.factor:
        ideal_end = (px(end), py(first.us_per_call * end / first.factor))
        canvas.line((px(first.factor), py(first.us_per_call)), ideal_end, IDEAL, 2, dash=8)
    if verdict is not None and verdict.shape == "mixed" and verdict.knee_factor is not None:
        x = px(verdict.knee_factor)
        canvas.line((x, top), (x, bottom), KNEE, dash=4)
        canvas.text(x + 6, top + 6, f"knee ×{verdict.knee_factor}", KNEE)
    for a, b in itertools.pairwise(pts):
        canvas.line(
            (px(a.factor), py(a.us_per_call)), (px(b.factor), py(b.us_per_call)), MEASURED, 2
        )
    for p in pts:
        canvas.disc(px(p.factor), py(p.us_per_call), 4, MEASURED)

    canvas.text(left, 12, title, INK)
    canvas.text(left - 40, top - 20, "time per call", INK)
    canvas.text((left + right) / 2, bottom + 32, "batch factor", INK, align="center")
    legend_y = top - 20
    canvas.text(right, legend_y, "ideal linear", INK, align="right")
    canvas.line((right - 136, legend_y + 5), (right - 108, legend_y + 5), IDEAL, 2, dash=8)
    canvas.text(right - 148, legend_y, "measured", INK, align="right")
    canvas.line((right - 244, legend_y + 5), (right - 216, legend_y + 5), MEASURED, 2)
    return canvas.png()


BLOCKS = " ▁▂▃▄▅▆▇█"


class Timed(Protocol):
    """A factor and its time per call (a ScalePoint, or a row of a scale result)."""

    @property
    def factor(self) -> int: ...
    @property
    def us_per_call(self) -> float: ...


def text_chart(points: Sequence[Timed], rows: int = 5) -> str:
    """Time per call per factor as columns of block characters on a log scale. The rows are
    labelled with measured times only: the longest where its bar ends (the top row when the
    times span ×20 or more), the shortest where its bar ends, when that is another row."""
    pts = sorted(points, key=lambda p: p.factor)
    if not pts:
        return ""
    us = [p.us_per_call for p in pts]
    lo = min(us) * 0.7  # the shortest bar still shows
    hi = max(*us, lo * 20)  # at least a ×20 span, so that noise on flat data looks flat
    levels = [max(1, round(rows * 8 * math.log(u / lo) / math.log(hi / lo))) for u in us]
    marks = {
        _bar_top_row(levels[us.index(min(us))]): fmt_us(min(us)),
        _bar_top_row(levels[us.index(max(us))]): fmt_us(max(us)),  # wins a shared row
    }
    labels = [f"×{p.factor}" for p in pts]
    cell = max(2, *(len(label) for label in labels))
    pad = max(len(m) for m in marks.values())
    lines: list[str] = []
    for row in range(rows - 1, -1, -1):
        mark = marks.get(row, "")
        bars = " ".join(BLOCKS[min(8, max(0, level - 8 * row))] * cell for level in levels)
        lines.append(f"  {mark:>{pad}} {'┤' if mark else '│'} {bars}")
    names = " ".join(label.ljust(cell) for label in labels)
    lines.append(f"  {'':>{pad}}   {names}  (log scale)")
    return "\n".join(line.rstrip() for line in lines)


def _bar_top_row(level: int) -> int:
    """The row (0 at the bottom) where a bar of `level` eighths ends."""
    return (level - 1) // 8
