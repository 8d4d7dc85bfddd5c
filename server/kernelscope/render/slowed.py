"""Try's rounds the host slowed, in one clause: the summary and the editor's hover both say
it so. Loaded by the language server after a try (no analysis imports at start)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelscope.analysis.experiments import Experiments


def slowed_rounds_note(e: Experiments) -> str:
    """The rounds left out (or kept in) because the host slowed the timing thread's CPU, in
    one clause; "" where none. The summary and the editor's hover both say it so."""
    if e.slowed_kept:
        loops = (  # only where the host was faster: the thread then ran slowed throughout
            f"; its loop read {e.reference_us:.0f} µs at best against {e.host_reference_us:.0f}"
            " µs in another process of this host"
            if e.reference_us and e.host_reference_us and e.host_reference_us < e.reference_us
            else ""
        )
        return (
            f"in {e.slowed_kept} of them the host ran this thread's CPU slower, by a "
            f"pure-Python loop timed after each block{loops}; too few ran at full speed to "
            "leave them out: host-bound times here may read high, run it again"
        )
    if not e.slowed_rounds:
        return ""
    return (
        f"{e.slowed_rounds} more left out: the host ran this thread's CPU slower during "
        "them, by a pure-Python loop timed after each block"
    )
