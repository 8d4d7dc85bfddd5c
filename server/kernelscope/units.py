"""Human units for times and sizes, and text cut to a width."""

from __future__ import annotations


def fmt_us(us: float | None) -> str:
    """12.3 µs, 4.56 ms, 1.20 s; a dash for nothing."""
    if us is None:
        return "-"
    if us < 1_000:
        return f"{us:.1f} µs"
    if us < 1_000_000:
        return f"{us / 1_000:.2f} ms"
    return f"{us / 1_000_000:.2f} s"


def fmt_bytes(n: float) -> str:
    """1.0 GiB, 12.0 MiB, 512 B."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_rate(gbps: float) -> str:
    """A bandwidth given in GB/s (10⁹ bytes): 12.3 GB/s, 80.5 MB/s, 150 kB/s."""
    for unit, scale in (("GB/s", 1.0), ("MB/s", 1e-3), ("kB/s", 1e-6)):
        if gbps >= scale:
            return (
                f"{gbps / scale:.1f} {unit}" if unit != "GB/s" or gbps < 100 else f"{gbps:.0f} GB/s"
            )
    return f"{gbps * 1e9:.0f} B/s"


def stages_line(stages_s: dict[str, float]) -> str:
    """ "import 0.01 s · inputs 0.52 s · …", in the order the stages ran."""
    return " · ".join(f"{name} {s:.2f} s" for name, s in stages_s.items())


def cut(text: str, width: int) -> str:
    """`text` in at most `width` characters; where it is cut, its last one is "…"."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"
