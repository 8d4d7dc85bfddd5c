"""Kept captures (`--save`, or a small call's automatic keep): the next profile of the same
call of the same program replays one while the program's files are unchanged, so the program
does not run again; where they changed, it says which."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import cast

from kernelscope.protocol import Entry

#: As the worker's digest.py (its twin): files whose bytes are hashed, up to this size each;
#: any other file counts by its size and modification time; a folder with more than
#: MAX_FILES cannot be told unchanged.
MAX_READ = 2000
MAX_FILE_BYTES = 1 << 20
MAX_FILES = 50000
#: Not the program's inputs: tools' folders, and what training programs write each run (nanoGPT's
#: out/, Hydra's outputs/ and multirun/, Lightning's lightning_logs/, the Lightning-Hydra
#: template's logs/, TensorBoard's runs/, wandb/, mlruns/): a run's new log must not make
#: the next profile run the program again.
SKIP_DIRS = (
    ".git", ".kernelscope", "__pycache__", ".venv", "venv", "node_modules", "out", "outputs",
    "multirun", "lightning_logs", "logs", "runs", "wandb", "mlruns",
)  # fmt: skip
#: Changed files named in the reason a capture was not reused.
NAMED = 3


def capture_name(
    qualname: str, call: int, label: str, caller: str | None, env: dict[str, str] | None = None
) -> str:
    """The file a capture of this call of this program is kept in (one per program, its
    launcher's environment `env` included)."""
    said = "".join(f"\0{k}={v}" for k, v in sorted((env or {}).items()))
    key = hashlib.sha256(f"{label}\0{caller or ''}{said}".encode()).hexdigest()[:8]
    return f"{qualname.replace('.', '_')}-call{call}-{key}.pt"


def program_files(folder: Path, argv: list[str]) -> dict[str, str] | None:
    """The worker's record of what a program may read (its digest.program_files): each file
    under its folder, and each its argv names outside it, to a short hash; None past
    MAX_FILES."""
    files: dict[str, str] = {}
    read = 0
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(names):
            path = os.path.join(root, name)
            mark, was_read = _file_mark(path, read < MAX_READ)
            if mark is None:
                continue
            read += was_read
            files[os.path.relpath(path, folder).replace(os.sep, "/")] = mark
            if len(files) > MAX_FILES:
                return None
    top = os.path.abspath(folder)
    for word in argv:
        for named in {word, word.partition("=")[2]} - {""}:
            path = os.path.abspath(os.path.join(folder, named))
            try:
                rel = os.path.relpath(path, top).replace(os.sep, "/")
            except ValueError:  # another drive (Windows)
                rel = ".."
            key = path if rel.split("/")[0] == ".." else rel
            if key not in files and os.path.isfile(path):
                mark = _file_mark(path, True)[0]
                if mark is not None:
                    files[key] = mark
    return files


def digest_of(files: dict[str, str] | None, argv: list[str]) -> str | None:
    """sha256 over the program's argv and its files' names and marks (None: unknown)."""
    if files is None:
        return None
    h = hashlib.sha256("\0".join(argv).encode("utf-8"))
    for name in sorted(files):
        h.update(name.encode("utf-8") + b"\0" + files[name].encode("ascii") + b"\0")
    return h.hexdigest()


def program_digest(folder: Path, argv: list[str]) -> str | None:
    """digest_of the program's files: None where there are too many to tell."""
    return digest_of(program_files(folder, argv), argv)


def _file_mark(path: str, may_read: bool) -> tuple[str | None, bool]:
    try:
        st = os.stat(path)
        if may_read and st.st_size <= MAX_FILE_BYTES:
            return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:32], True
    except OSError:
        return None, False
    return f"{st.st_size}@{st.st_mtime_ns}", False


def reusable(root: Path, qualname: str, entry: Entry) -> tuple[Path | None, str]:
    """The kept capture of this call of this program, where its record matches (program,
    call, caller) and the program's files are as they were when it was kept; else None and
    why not where a capture was kept ("" where none was)."""
    path = root / ".kernelscope" / "captures"
    path /= capture_name(qualname, entry.call, entry.label, entry.caller, entry.env)
    try:
        loaded: object = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, ""
    if not path.is_file() or not isinstance(loaded, dict):
        return None, ""
    meta = cast(dict[str, object], loaded)
    if meta.get("label") != entry.label or meta.get("caller") != entry.caller:
        return None, ""
    argv = [entry.target, *entry.args]
    files = program_files(Path(entry.cwd), argv)
    digest = digest_of(files, argv)
    if digest is not None and meta.get("digest") == digest:
        return path, ""
    if files is None:
        return None, f"its folder holds more than {MAX_FILES} files: too many to tell a change"
    return None, _changed(meta.get("files"), files)


def _changed(kept: object, now: dict[str, str]) -> str:
    """Which of the program's files changed since the capture was kept."""
    if not isinstance(kept, dict):
        return "the program's files changed since the capture was kept"
    before = cast(dict[str, object], kept)
    names = sorted(n for n in before.keys() | now.keys() if before.get(n) != now.get(n))
    if not names:
        return "the program's files changed since the capture was kept"
    shown = ", ".join(Path(n).name if os.path.isabs(n) else n for n in names[:NAMED])
    more = f" and {len(names) - NAMED} more" if len(names) > NAMED else ""
    return f"{shown}{more} changed since the capture was kept"
