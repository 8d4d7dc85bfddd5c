"""A host-speed probe that never touches the GPU (issue 24, item 5): blocks of a fixed
CPU-only workload (small torch CPU ops and Python, as a host-bound call's host path is)
timed back to back until the file STOP exists (``ready`` printed after the first block);
writes every block's [monotonic start, us] and /proc/stat's cumulative steal (ticks) to OUT.
Run beside sequential measurements, its level inside each one's window says how fast the
host's CPUs were then, without the GPU time-slicing that processes running CUDA work beside
each other cause.

    python3 tests/support/host_probe.py STOP OUT
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch


def steal() -> int:
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])


def main() -> None:
    stop, out = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    x = torch.ones(16)
    samples = []
    ready = False
    while not os.path.exists(stop):
        t = time.monotonic()
        for _ in range(100):
            x = (x + 1.0) * 0.5
            _ = [i * 2 for i in range(20)]
        samples.append([t, (time.monotonic() - t) * 1e6, steal()])
        if not ready:  # torch imported and a first block made: what it times is covered
            print("ready", flush=True)
            ready = True
    with open(out, "w") as f:
        json.dump(samples, f)


if __name__ == "__main__":
    main()
