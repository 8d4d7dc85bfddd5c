"""What a worker SIGKILLed while holding most of the machine's memory is told."""

from __future__ import annotations

import os

from kernelscope.engine.host_memory import memory_total, oom_message, resident_bytes


def test_a_sigkill_is_blamed_on_memory_only_when_the_worker_held_most_of_it() -> None:
    assert oom_message(3_000_000_000, 23_000_000_000, "active") is None
    assert oom_message(19_800_000_000, None, "active") is None  # not Linux: nothing known
    told = oom_message(19_800_000_000, 23_000_000_000, "active")
    assert told is not None and told.startswith(
        "the worker was killed (SIGKILL) during the active stage, holding 19.8 GB of this "
        "machine's 23.0 GB: most likely by the kernel's out-of-memory killer. The profiler"
    )
    cold = oom_message(19_800_000_000, 23_000_000_000, "cold")
    assert cold is not None and "cold call stage" in cold and "profiler" not in cold


def test_this_process_and_machine_are_read_from_proc() -> None:
    total, rss = memory_total(), resident_bytes(os.getpid())
    assert total is not None and rss is not None and 0 < rss < total
    assert resident_bytes(2**22 + 12345) is None  # no such process
