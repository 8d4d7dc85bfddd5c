# pyright: basic
"""What user code prints: fds 1 and 2 drained from a pipe, the last 64 KiB kept per job."""

import os
import sys
import threading

OUTPUT_KEEP = 64 * 1024
SYNC_MARK = b"\x00kernelscope-sync\x00"


class OutputCapture:
    """Drains the pipe behind fds 1 and 2 and keeps the last 64 KiB of each job."""

    def __init__(self, fd):
        self.fd = fd
        self.data = bytearray()
        self.total = 0
        self.lock = threading.Lock()
        self.synced = threading.Event()
        self.dropped = ()
        self.dropped_within = ()
        threading.Thread(target=self._drain, name="ks-output", daemon=True).start()

    def _drain(self):
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            with self.lock:
                self.data += chunk
                self.total += len(chunk)
                mark = self.data.find(
                    SYNC_MARK, max(0, len(self.data) - len(chunk) - len(SYNC_MARK))
                )
                if mark >= 0:
                    self.total -= len(self.data) - mark
                    del self.data[mark:]
                    self.synced.set()
                if len(self.data) > 2 * OUTPUT_KEEP:
                    del self.data[: len(self.data) - OUTPUT_KEEP]

    def drop_lines(self, start):
        """Leave out of what user code printed the lines that begin with ``start`` (bytes):
        those printed because the worker set something the user did not."""
        self.dropped = (*self.dropped, start)

    def drop_lines_with(self, text):
        """Leave out the lines that hold ``text`` (bytes) anywhere: a library's warning with
        a prefix of its own (a time stamp), printed because of what the worker did."""
        self.dropped_within = (*self.dropped_within, text)

    def begin(self):
        self.take()

    def take(self):
        """What was printed since the job began (or the last take), as collect() returns
        it; what comes next is kept apart from it."""
        text, truncated = self.collect()
        with self.lock:
            self.data.clear()
            self.total = 0
        return text, truncated

    def collect(self):
        """Wait until everything written so far has been drained; return (text, truncated)."""
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except Exception:
                pass
        self.synced.clear()
        try:
            os.write(1, SYNC_MARK)
            self.synced.wait(2.0)
        except OSError:
            pass
        with self.lock:
            kept = bytes(self.data[-OUTPUT_KEEP:])
            truncated = self.total > OUTPUT_KEEP
        if truncated and b"\n" in kept:  # from the first whole line on
            kept = kept[kept.index(b"\n") + 1 :]
        if self.dropped or self.dropped_within:
            lines = kept.splitlines(keepends=True)
            kept = b"".join(
                line
                for line in lines
                if not line.startswith(self.dropped)
                and not any(text in line for text in self.dropped_within)
            )
        return kept.decode("utf-8", "replace"), truncated
