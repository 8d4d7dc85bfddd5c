# pyright: basic
"""What a program depends on, as one hash: the text files under its folder (its scripts,
configs it execs, small data), so a saved capture is reused only while none changed.

Twin of kernelscope.engine.captures.program_digest (tests/unit/test_worker_twins.py)."""

import hashlib
import os

MAX_FILES = 2000
MAX_FILE_BYTES = 1 << 20
#: Not the program's inputs: tools' folders, and what training programs write each run (nanoGPT's
#: out/, Hydra's outputs/ and multirun/, Lightning's lightning_logs/, the Lightning-Hydra
#: template's logs/, TensorBoard's runs/, wandb/, mlruns/): a run's new log must not make
#: the next profile run the program again.
SKIP_DIRS = (
    ".git", ".kernelscope", "__pycache__", ".venv", "venv", "node_modules", "out", "outputs",
    "multirun", "lightning_logs", "logs", "runs", "wandb", "mlruns",
)  # fmt: skip


def program_digest(folder, argv):
    """sha256 over the program's argv and each file's relative path and bytes (sorted)."""
    h = hashlib.sha256("\0".join(argv).encode("utf-8"))
    seen = 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            path = os.path.join(root, name)
            try:
                if os.path.getsize(path) > MAX_FILE_BYTES:
                    continue
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            rel = os.path.relpath(path, folder).replace(os.sep, "/")
            h.update(rel.encode("utf-8") + b"\0" + hashlib.sha256(data).digest())
            seen += 1
            if seen >= MAX_FILES:
                return h.hexdigest()
    return h.hexdigest()
