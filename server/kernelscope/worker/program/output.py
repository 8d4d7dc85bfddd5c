# pyright: basic
"""What user code prints: fds 1 and 2 point at an unlinked temporary file (in tempfile's
folder), of which the last 64 KiB are read per job.

The file holds what a job prints until the next job (or take()) empties it. Past OUTPUT_CAP
of it on disk, a thread that looks every CAP_POLL_S seconds frees all but its last 64 KiB by
punching a hole (Linux ``fallocate``): the file keeps its size and the writers their
offsets, so nothing is lost or reordered (a program run to its end with --no-stop-after,
printing each step for hours). Where the file system cannot punch holes, it grows as
before."""

import ctypes
import fcntl
import os
import sys
import tempfile
import threading

OUTPUT_KEEP = 64 * 1024
OUTPUT_CAP = 16 * 1024 * 1024
CAP_POLL_S = 2.0
_PUNCH_HOLE = 0x01 | 0x02  # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE
_PAGE = 4096


class OutputCapture:
    """Owns the file behind fds 1 and 2 (``fd``, for the worker to dup2) and reads the last
    64 KiB of each job from it."""

    def __init__(self):
        # A file, not a pipe: a pipe needs a thread to drain it, and that thread took the GIL
        # from the user's loop on every flushed line (a loop printing each step ran 2x slower).
        # O_APPEND: each write goes to the end, also after begin() or take() empties the file
        # under a forked child (a DataLoader worker) that still writes to it.
        self.kept = True
        try:
            fd, path = tempfile.mkstemp(prefix="kernelscope-output-")
            os.unlink(path)
        except OSError:  # no writable temporary folder: run, keeping no output
            fd, self.kept = os.open(os.devnull, os.O_WRONLY), False
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
        self.fd = fd
        self.dropped = ()
        self.dropped_within = ()
        self._lock = threading.Lock()  # the hole against _empty(): not into a new job's bytes
        self._stop = threading.Event()
        # A forked child (a DataLoader worker) has no thread, and may have the lock held.
        os.register_at_fork(after_in_child=self._forked)
        if self.kept:
            # Its own fd: the number the worker uses may be closed and reused (in tests).
            self._own = os.dup(fd)
            # Wakes every CAP_POLL_S for one fstat: no cost a timed loop can see.
            threading.Thread(
                target=self._cap_forever, name="kernelscope-output", daemon=True
            ).start()

    def cap(self):
        """Free all but the file's last OUTPUT_KEEP bytes (and a page) where more than
        OUTPUT_CAP of it is on disk; False where the file system cannot."""
        if not self.kept:
            return True
        with self._lock:
            if self._stop.is_set():
                return False
            st = os.fstat(self._own)
            if st.st_blocks * 512 <= OUTPUT_CAP:
                return True
            end = (st.st_size - OUTPUT_KEEP - 1) // _PAGE * _PAGE
            return end <= 0 or _punch_hole(self._own, end)

    def close(self):
        """Stop the thread and close the file (the worker never does: for tests)."""
        with self._lock:
            self._stop.set()
            if self.kept:
                os.close(self._own)
        os.close(self.fd)

    def _forked(self):
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stop.set()

    def _cap_forever(self):
        while not self._stop.wait(CAP_POLL_S):
            try:
                if not self.cap():
                    return
            except OSError:
                return

    def drop_lines(self, start):
        """Leave out of what user code printed the lines that begin with ``start`` (bytes):
        those printed because the worker set something the user did not."""
        self.dropped = (*self.dropped, start)

    def drop_lines_with(self, text):
        """Leave out the lines that hold ``text`` (bytes) anywhere: a library's warning with
        a prefix of its own (a time stamp), printed because of what the worker did."""
        self.dropped_within = (*self.dropped_within, text)

    def begin(self):
        """Start a job: what was printed before it is not its own."""
        self._flush()
        self._empty()

    def take(self):
        """What was printed since the job began (or the last take), as collect() returns
        it; what comes next is kept apart from it."""
        text, truncated = self.collect()
        self._empty()
        return text, truncated

    def collect(self):
        """What was printed since the job began (or the last take): (text, truncated), the
        last 64 KiB from a whole line on where there was more."""
        self._flush()
        if not self.kept:
            return "", False
        total = os.fstat(self.fd).st_size
        # One byte more than is kept: where it is a newline, the kept bytes begin a line.
        start = max(0, total - OUTPUT_KEEP - 1)
        kept = os.pread(self.fd, total - start, start)
        truncated = total > OUTPUT_KEEP
        if truncated and b"\n" in kept:  # from the first whole line on
            kept = kept[kept.index(b"\n") + 1 :]
        kept = kept[-OUTPUT_KEEP:]
        if self.dropped or self.dropped_within:
            lines = kept.splitlines(keepends=True)
            kept = b"".join(
                line
                for line in lines
                if not line.startswith(self.dropped)
                and not any(text in line for text in self.dropped_within)
            )
        return kept.decode("utf-8", "replace"), truncated

    def _empty(self):
        if self.kept:
            with self._lock:
                os.ftruncate(self.fd, 0)

    @staticmethod
    def _flush():
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except Exception:
                pass


def _punch_hole(fd, length):
    """Free the file's first `length` bytes on disk (they read as zeros); False where the
    system has no fallocate or the file system cannot punch holes."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fallocate = libc.fallocate
    except (OSError, AttributeError):
        return False
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    return fallocate(fd, _PUNCH_HOLE, 0, length) == 0
