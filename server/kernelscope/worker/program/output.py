# pyright: basic
"""What user code prints: fds 1 and 2 point at an unlinked temporary file (in tempfile's
folder), of which the last 64 KiB are read per job.

The file holds what a job prints until the next job (or take()) empties it, up to
OUTPUT_CAP: past that a thread that looks every CAP_POLL_S seconds cuts it to its last
64 KiB (a program run to its end with --no-stop-after, printing each step for hours)."""

import fcntl
import os
import sys
import tempfile
import threading
import time

OUTPUT_KEEP = 64 * 1024
OUTPUT_CAP = 16 * 1024 * 1024
CAP_POLL_S = 2.0


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
        self.cut = False  # the file was cut to its tail since the job began
        st = os.fstat(fd)
        self._file = (st.st_dev, st.st_ino)
        if self.kept:
            # Wakes every CAP_POLL_S for one fstat: no cost a timed loop can see.
            threading.Thread(
                target=self._cap_forever, name="kernelscope-output", daemon=True
            ).start()

    def cap(self):
        """Cut the file to its last OUTPUT_KEEP bytes where it grew past OUTPUT_CAP (what
        a child writes between the read and the cut is lost: the output says it was cut)."""
        if not self.kept:
            return
        st = os.fstat(self.fd)
        if (st.st_dev, st.st_ino) != self._file:  # fd closed and its number reused
            raise OSError("the output file is gone")
        size = st.st_size
        if size <= OUTPUT_CAP:
            return
        tail = os.pread(self.fd, OUTPUT_KEEP + 1, size - OUTPUT_KEEP - 1)
        os.ftruncate(self.fd, 0)
        os.write(self.fd, tail)
        self.cut = True

    def _cap_forever(self):
        while True:
            time.sleep(CAP_POLL_S)
            try:
                self.cap()
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
        truncated = total > OUTPUT_KEEP or self.cut
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
            os.ftruncate(self.fd, 0)
        self.cut = False

    @staticmethod
    def _flush():
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except Exception:
                pass
