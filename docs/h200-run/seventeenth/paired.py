"""Reads the host-timing test's printed lines (tests/gpu/test_host_timing_gpu.py) and gives,
for each workload, the ratio as the test computed it until 2026-12-06 (the median of the
worker's figures at the host's speed over the median of the fresh processes') and the median
of each round's own ratio (worker over the fresh process timed right after it), over the
rounds where both were at the host's speed.

    python3 paired.py LOG...
"""

import re
import statistics
import sys

FIGURE = re.compile(
    r"(\d+\.\d) \((none slowed|\d+% slowed [\d.]+x(?:, kept in)?), loop ([\d.]+) µs"
)


def figures(text):
    return [(float(us), slowed, float(loop)) for us, slowed, loop in FIGURE.findall(text)]


def fast(figure, best):
    """At the host's speed, as the test's at_speed reads the printed line."""
    return "kept in" not in figure[1] and figure[2] <= 1.3 * best


def main():
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as log:
            lines = log.readlines()
        for line in lines:
            if "; fresh " not in line or "ratio" not in line:
                continue
            name = line.split(":")[0].lstrip(".F")
            mine, theirs = (figures(part) for part in line.split("; fresh ", 1))
            best = min(loop for _, _, loop in mine + theirs)
            a = [f[0] for f in mine if fast(f, best)]
            b = [f[0] for f in theirs if fast(f, best)]
            pairs = [
                m[0] / t[0]
                for m, t in zip(mine, theirs, strict=True)
                if fast(m, best) and fast(t, best)
            ]
            old = statistics.median(a) / statistics.median(b) if a and b else float("nan")
            paired = statistics.median(pairs) if pairs else float("nan")
            where = path.split("/")[-1] + " " + name
            print(
                f"{where:<40} rounds {len(mine):2d}  medians' ratio {old:.3f}  "
                f"paired median {paired:.3f} ({len(pairs)} pairs)"
            )


if __name__ == "__main__":
    main()
