"""A host-speed probe running beside sequential timings, for the truth of a host-bound
unprofiled figure (issue 24, item 5).

On the lent H200 host a host-bound call's speed swings ~1.5x for seconds at a time on every
CPU at once (docs/h200-run/timing/cores_2026-12-03.txt: the same CPU read 746 and 1237 µs
in two rounds), so fresh processes run one after another meet other spells than the worker
did. Fresh processes cannot time the call at the same time as the worker: on one GPU their
contexts are time-sliced, and a host-bound call's CUDA events then run back to back
(docs/h200-run/timing/beside_2026-12-03.txt). The probe (tests/support/host_probe.py) never
touches the GPU; its level inside each timing's window (``window_s``) says how fast the host's
CPUs were then. On 2026-12-03 it stayed within 714-780 µs through a whole test while fresh
processes of checkpointed spread 5434-6534 µs (host_timing_probe_2026-12-03.txt): what moves
them is not only the CPUs' speed, so the probe's reading is printed, not asserted on.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from support import REPO_ROOT

PROBE = REPO_ROOT / "tests" / "support" / "host_probe.py"


@dataclass
class Probe:
    """The probe's blocks: [monotonic start, µs, cumulative steal ticks]."""

    blocks: list[list[float]] = field(default_factory=lambda: [])

    def within(self, window: list[float]) -> list[float]:
        """The µs of the blocks that started inside `window` (start, end)."""
        start, end = window
        return [us for t, us, _ in self.blocks if start <= t <= end]

    def level(self, window: list[float]) -> float:
        """The median block inside `window`: how slow the host was then (nan: no block
        started inside it)."""
        inside = self.within(window)
        return statistics.median(inside) if inside else math.nan

    def longest_gap_s(self) -> float:
        """The longest time between two blocks' starts: a stall of the probe itself."""
        starts = [t for t, _, _ in self.blocks]
        return max((b - a for a, b in itertools.pairwise(starts)), default=0.0)


@contextmanager
def probe_beside() -> Iterator[Probe]:
    """Run the probe while the body runs (from its first block on); on exit stop it and fill
    the Probe's blocks."""
    probe = Probe()
    with tempfile.TemporaryDirectory() as tmp:
        stop, out = Path(tmp) / "stop", Path(tmp) / "blocks.json"
        proc = subprocess.Popen(
            [sys.executable, str(PROBE), str(stop), str(out)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        # Not before its first block: importing torch takes seconds, and a warm worker's job
        # can be timed within them (loader_step's was, on the H200 on 2026-12-03).
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the host-speed probe did not start")
        try:
            yield probe
        finally:
            stop.touch()
            proc.wait(timeout=60)
            proc.stdout.close()
        probe.blocks = json.loads(out.read_text())
