# pyright: basic
"""What a program depends on, as one hash: the files under its folder (its scripts, configs
it execs, small data) and the files its command line names outside it (``-c ../cfg.yaml``),
so a saved capture is reused only while none changed.

Twin of kernelscope.engine.captures (tests/unit/test_worker_twins.py)."""

import hashlib
import os

#: Files whose bytes are hashed (the first ones found, each up to MAX_FILE_BYTES); any other
#: file counts by its size and modification time.
MAX_READ = 2000
MAX_FILE_BYTES = 1 << 20
#: Files looked at in all: a folder holding more cannot be told unchanged (no digest).
MAX_FILES = 50000
#: Not the program's inputs: tools' folders, and what training programs write each run (nanoGPT's
#: out/, Hydra's outputs/ and multirun/, Lightning's lightning_logs/, the Lightning-Hydra
#: template's logs/, TensorBoard's runs/, wandb/, mlruns/): a run's new log must not make
#: the next profile run the program again.
SKIP_DIRS = (
    ".git", ".kernelscope", "__pycache__", ".venv", "venv", "node_modules", "out", "outputs",
    "multirun", "lightning_logs", "logs", "runs", "wandb", "mlruns",
)  # fmt: skip


def program_files(folder, argv):
    """Each file the program may read, by name (relative to its folder; absolute for a file
    its argv names outside it, as a word or after a word's ``=``), to a short hash (of its
    bytes, or of its size and modification time); None past MAX_FILES."""
    files = {}
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


def digest_of(files, argv):
    """sha256 over the program's argv and its files' names and marks (None: unknown)."""
    if files is None:
        return None
    h = hashlib.sha256("\0".join(argv).encode("utf-8"))
    for name in sorted(files):
        h.update(name.encode("utf-8") + b"\0" + files[name].encode("ascii") + b"\0")
    return h.hexdigest()


def program_digest(folder, argv):
    """digest_of the program's files: None where there are too many to tell."""
    return digest_of(program_files(folder, argv), argv)


def capture_name(qualname, call, label, caller, env=None):
    """The file a capture of this call of this program is kept in (one per program, its
    launcher's environment `env` included)."""
    said = "".join("\0%s=%s" % kv for kv in sorted((env or {}).items()))
    key = hashlib.sha256(("%s\0%s%s" % (label, caller or "", said)).encode("utf-8"))
    key = key.hexdigest()[:8]
    return "%s-call%d-%s.pt" % (qualname.replace(".", "_"), call, key)


def _file_mark(path, may_read):
    """(a short hash of the file's bytes, True) when `may_read` and it is small, else (its
    size and modification time, False); (None, False) when it cannot be read."""
    try:
        st = os.stat(path)
        if may_read and st.st_size <= MAX_FILE_BYTES:
            with open(path, "rb") as f:
                return hashlib.sha256(f.read()).hexdigest()[:32], True
    except OSError:
        return None, False
    return "%d@%d" % (st.st_size, st.st_mtime_ns), False
