# pyright: basic
"""A shipped project on the worker's host: written once to a content-addressed folder in
this user's private temp folder, the newest few kept."""

import hashlib
import os
import shutil
import tempfile

from .errors import JobError

SHIP_KEEP = 16  # shipped project folders kept on this host, newest first


def private_dir():
    """This user's kernelscope folder in the host's temp dir (0700, refused if not ours)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    path = os.path.join(tempfile.gettempdir(), "kernelscope-%d" % uid)
    os.makedirs(path, mode=0o700, exist_ok=True)
    if hasattr(os, "getuid") and os.stat(path).st_uid != uid:
        raise JobError("internal", "%s belongs to another user; set TMPDIR on this host" % path)
    return path


def materialize(files):
    """Write shipped files (relative path -> text) into a content-addressed folder; return it.

    The same files give the same folder, so a warm worker writes them once; the newest
    SHIP_KEEP folders are kept."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode("utf-8") + b"\0" + files[rel].encode("utf-8") + b"\0")
    base = os.path.join(private_dir(), "ship")
    final = os.path.join(base, digest.hexdigest()[:24])
    if not os.path.isdir(final):
        tmp = "%s.tmp-%d" % (final, os.getpid())
        shutil.rmtree(tmp, ignore_errors=True)
        for rel, text in files.items():
            parts = rel.split("/")
            if not rel or rel.startswith("/") or ".." in parts:
                raise JobError("internal", "refusing to write shipped file %r" % rel)
            dest = os.path.join(tmp, *parts)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "w", encoding="utf-8", newline="") as f:
                f.write(text)
        try:
            os.rename(tmp, final)
        except OSError:  # another worker wrote the same files first
            shutil.rmtree(tmp, ignore_errors=True)
    os.utime(final)
    prune(base, SHIP_KEEP)
    return final


def prune(base, keep):
    """Remove all but the `keep` most recently used folders in `base`."""
    try:
        entries = [os.path.join(base, n) for n in os.listdir(base) if ".tmp-" not in n]
        entries.sort(key=os.path.getmtime, reverse=True)
    except OSError:
        return
    for old in entries[keep:]:
        shutil.rmtree(old, ignore_errors=True)
