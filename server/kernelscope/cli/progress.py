"""One-line progress on stderr: rewritten in place on a terminal, stage lines otherwise."""

from __future__ import annotations

import time
from typing import TextIO

from kernelscope.protocol import STAGE_LABELS, JobProgress
from kernelscope.units import fmt_bytes


class ProgressLine:
    """Shows the current stage of one job."""

    def __init__(self, stream: TextIO, name: str) -> None:
        self.stream = stream
        self.name = name
        self.tty = stream.isatty()
        self.t0 = time.perf_counter()
        self._last_stage = ""
        self._shown = False

    def stage(self, label: str) -> None:
        """Show a stage that has no step count."""
        self._show(label, label)

    def on_progress(self, msg: JobProgress) -> None:
        """Launcher callback for JobProgress frames."""
        label = STAGE_LABELS.get(msg.stage, msg.stage)
        if msg.total:
            label += f" {msg.step}/{msg.total}"
        self._show(msg.stage, label)

    def _show(self, stage: str, label: str) -> None:
        elapsed = time.perf_counter() - self.t0
        text = f"profiling {self.name} · {label} · {elapsed:.1f}s"
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
            self._shown = True
        elif stage != self._last_stage:
            self.stream.write(text + "\n")
        self._last_stage = stage
        self.stream.flush()

    def clear(self) -> None:
        """Erase the line (terminal only)."""
        if self.tty and self._shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._shown = False


class ReadingBar:
    """A bar for reading a big trace file, on a terminal only: ``reading f.json [#### ] 45%
    0.9/2.0 GiB · 3.1 s``, at most ten times a second, then ``· analyzing`` once the file is
    read. A ``trace_stream.Progress``."""

    WIDTH = 30
    #: Files smaller than this read too fast to need a bar.
    MIN_BYTES = 32 << 20

    def __init__(self, stream: TextIO, label: str) -> None:
        self.stream = stream
        self.label = label
        self.tty = stream.isatty()
        self.t0 = time.perf_counter()
        self._shown_at = 0.0
        self._shown = False

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        read = done >= total
        if not self.tty or total < self.MIN_BYTES or (now - self._shown_at < 0.1 and not read):
            return
        self._shown_at = now
        share = min(done / total, 1.0) if total else 1.0
        filled = round(share * self.WIDTH)
        bar = "#" * filled + " " * (self.WIDTH - filled)
        self.stream.write(
            f"\r\x1b[2K{self.label} [{bar}] {share:4.0%} "
            f"{fmt_bytes(done)}/{fmt_bytes(total)} · {now - self.t0:.1f} s"
            + (" · analyzing" if read else "")
        )
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        """Erase the bar."""
        if self._shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._shown = False
