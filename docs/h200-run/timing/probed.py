"""Read probed.sh's figures against the probe's level in each one's window.

python3 probed.py probed.jsonl probe.json
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict


def main() -> None:
    with open(sys.argv[1]) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    with open(sys.argv[2]) as f:
        probe = json.load(f)
    by_fn: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        start, end = r["window_s"]
        inside = [p for p in probe if start <= p[0] <= end]
        level = statistics.median(p[1] for p in inside) if inside else float("nan")
        stolen = inside[-1][2] - inside[0][2] if len(inside) > 1 else 0
        print(
            f"{r['fn']:12s} {r['who']:5s} {r['us']:9.1f} us  probe {level:8.1f} us "
            f"({len(inside)} blocks, steal {stolen} ticks)  normalized {r['us'] / level:.4f}"
        )
        by_fn[r["fn"]][r["who"]].append((r["us"], level))
    for fn, who in by_fn.items():
        cli, fresh = who["cli"], who["fresh"]
        raw = statistics.median(u for u, _ in cli) / statistics.median(u for u, _ in fresh)
        norm = statistics.median(u / p for u, p in cli) / statistics.median(u / p for u, p in fresh)
        print(
            f"== {fn}: {len(cli)} CLI, {len(fresh)} fresh; ratio of medians raw {raw:.3f}, "
            f"with each figure over the probe's level in its window {norm:.3f}"
        )


if __name__ == "__main__":
    main()
