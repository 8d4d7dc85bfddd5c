"""Human units for times and sizes."""

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


def stages_line(stages_s: dict[str, float]) -> str:
    """ "import 0.01 s · inputs 0.52 s · …", in the order the stages ran."""
    return " · ".join(f"{name} {s:.2f} s" for name, s in stages_s.items())
