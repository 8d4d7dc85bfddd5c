"""Saved captures (`--save`): reuse one for the next profile of the same call of the same
program while the program's files are unchanged, so the program does not run again."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import cast

from kernelscope.protocol import Entry

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


def capture_path(root: Path, qualname: str, call: int) -> Path:
    """Where `--save` keeps the capture of `qualname`'s `call`-th call."""
    return root / ".kernelscope" / "captures" / f"{qualname.replace('.', '_')}-call{call}.pt"


def program_digest(folder: Path, argv: list[str]) -> str:
    """The worker's digest of a program (worker/program/digest.py): its argv and the text of
    the files under its folder."""
    h = hashlib.sha256("\0".join(argv).encode("utf-8"))
    seen = 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            path = os.path.join(root, name)
            try:
                if os.path.getsize(path) > MAX_FILE_BYTES:
                    continue
                data = Path(path).read_bytes()
            except OSError:
                continue
            rel = os.path.relpath(path, folder).replace(os.sep, "/")
            h.update(rel.encode("utf-8") + b"\0" + hashlib.sha256(data).digest())
            seen += 1
            if seen >= MAX_FILES:
                return h.hexdigest()
    return h.hexdigest()


def reusable(root: Path, qualname: str, entry: Entry) -> Path | None:
    """The saved capture of this call of this program, if its record matches (program, call,
    caller) and the program's files are as they were when it was saved."""
    path = capture_path(root, qualname, entry.call)
    record = path.with_suffix(".json")
    try:
        loaded: object = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not path.is_file() or not isinstance(loaded, dict):
        return None
    meta = cast(dict[str, object], loaded)
    same = (
        meta.get("label") == entry.label
        and meta.get("caller") == entry.caller
        and meta.get("digest") == program_digest(Path(entry.cwd), [entry.target, *entry.args])
    )
    return path if same else None
