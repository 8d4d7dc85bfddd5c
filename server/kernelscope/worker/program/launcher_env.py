# pyright: basic
"""The environment a program's launcher gives it (``accelerate launch``'s settings: its mixed
precision, its threads per process, ...), set before the program runs, or before its kept
capture is replayed, so the call runs as under that launcher."""

import os


def apply_launcher_env(torch, entry):
    """Set `entry`'s launcher variables; OMP_NUM_THREADS also sets torch's intra-op threads,
    which torch read from it when it was imported, before this job."""
    env = entry.get("env") or {}
    os.environ.update(env)
    threads = str(env.get("OMP_NUM_THREADS", ""))
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))
