# pyright: basic
"""Whether the warmed schedule's events fit in this host's memory, judged before it runs.

torch.profiler holds every event of its window in the process until the window closes. The
cold call ran under a light profiler (no shapes, no stacks), so its trace counts the events
one call makes; the active steps make as many each. Recorded with shapes they cost several
times more than without (CPU, torch 2.13: minGPT's ``generate`` alone, 8.5 KB an event with
shapes, 1.7 KB without; its whole ``Trainer.run``, 607,686 events a call, grew the worker by
more than 10.4 GB in one active call with shapes and stacks, over 17 KB an event, and by
2.7 GB without shapes, 4.4 KB an event)."""

from .errors import JobError
from .names import PROFILER_GB_ENV, positive_env

EVENT_BYTES_SHAPED = 20_000
EVENT_BYTES_PLAIN = 5_000
#: The share of the host's available memory the profiled window may plan to take, unless
#: the user set the GB in KERNELSCOPE_PROFILER_GB.
MEMORY_SHARE = 0.5


def available_bytes():
    """The host's available memory (``MemAvailable``), or None off Linux."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def room_bytes(available):
    """The memory the profiled window may take: KERNELSCOPE_PROFILER_GB where set, else
    MEMORY_SHARE of the available memory (None: not known)."""
    gb = positive_env(PROFILER_GB_ENV)
    if gb is not None:
        return gb * 1e9
    return MEMORY_SHARE * available if available is not None else None


def recording(events, active, available, shapes, what="call"):
    """(active steps, shapes, why) for the schedule: as asked where its events fit in
    room_bytes(); else fewer active steps with shapes, as many as fit; else without shapes
    (no FLOPs or bytes per op), with the sentence that says why ("" when as asked). Raises
    JobError when not one step fits even so. `what` is a step: a call, or an iteration
    (whose events a counting step measured, in place)."""
    room = room_bytes(available)
    if room is None or events <= 0:
        return active, shapes, ""
    made = "one %s makes %s profiler events" % (what, _count(events))

    def fewer(fit):
        steps = "%d active step%s" % (fit, "" if fit == 1 else "s")
        more = "more would take over the %s allowed" % _gb(room)
        return "%s, not %d: %s, and %s" % (steps, active, made, more)

    if shapes:
        fit = int(room // (events * EVENT_BYTES_SHAPED))
        if fit >= 1:
            return min(fit, active), True, "" if fit >= active else fewer(fit)
    fit = int(room // (events * EVENT_BYTES_PLAIN))
    if fit >= 1:
        note = "" if fit >= active else fewer(fit)
        if shapes:
            note = (
                "recorded without shapes (no FLOPs or bytes per op): %s, which with shapes "
                "would take ~%s per %s, over the %s allowed"
                % (made, _gb(events * EVENT_BYTES_SHAPED), what, _gb(room))
            )
            if fit < active:
                note += "; and %d active step%s, not %d" % (fit, "" if fit == 1 else "s", active)
        return min(fit, active), False, note
    counted = "its cold call" if what == "call" else "a counting step"
    raise JobError(
        "trace_too_large",
        "%s (%s), and profiling one would take ~%s, over the %s allowed "
        "(half this host's available memory, or KERNELSCOPE_PROFILER_GB): profile a smaller "
        "function that it calls"
        % (made[0].upper() + made[1:], counted, _gb(events * EVENT_BYTES_PLAIN), _gb(room)),
    )


def _gb(n):
    """Bytes as GB, with two significant digits under 1 GB (0.012 GB, not 0.0 GB)."""
    return "%.1f GB" % (n / 1e9) if n >= 1e9 else "%.2g GB" % (n / 1e9)


def _count(n):
    return "%.1f million" % (n / 1e6) if n >= 1e6 else f"{n:,}"
