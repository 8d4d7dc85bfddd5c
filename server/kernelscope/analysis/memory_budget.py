"""How much memory this process can still take, and a refusal when a job needs more.

The least of: the system's available memory (``MemAvailable``), the cgroup's room (v2
``memory.max`` less ``memory.current``, v1 ``memory.limit_in_bytes`` less usage) and the
address-space limit (``RLIMIT_AS``) less what the process maps. Unknown parts are skipped.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

from kernelscope.units import fmt_bytes

_CGROUP_V2 = Path("/sys/fs/cgroup")
_CGROUP_V1 = Path("/sys/fs/cgroup/memory")


class OutOfMemory(Exception):
    """A job would need more memory than there is; the message names the sizes."""


def available_bytes() -> int | None:
    """Bytes this process can still allocate, None when nothing tells."""
    limits = [n for n in (_mem_available(), _cgroup_room(), _address_space_room()) if n is not None]
    return min(limits) if limits else None


def require(need: int, what: str) -> None:
    """Raise OutOfMemory when ``need`` bytes exceed what is available; ``what`` says what for,
    as in "analyzing this 2.1 GB trace"."""
    room = available_bytes()
    if room is not None and need > room:
        raise OutOfMemory(
            f"{what} needs about {fmt_bytes(need)} of memory and only {fmt_bytes(room)} is "
            "available here; run it on a machine with more memory, or record a shorter trace "
            "(fewer active steps, no Python stacks)"
        )


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _mem_available() -> int | None:
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return _sysconf_available()
    for line in lines:
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return _sysconf_available()


def _sysconf_available() -> int | None:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup_room() -> int | None:
    """The cgroup's limit less its usage, page cache it can drop not counted as used (what
    ``docker stats`` does: ``inactive_file``)."""
    for folder, limit, usage, cache in (
        (_CGROUP_V2, "memory.max", "memory.current", "inactive_file"),
        (_CGROUP_V1, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"),
    ):
        cap, used = _read_int(folder / limit), _read_int(folder / usage)
        if cap is not None and used is not None and cap < 1 << 60:  # v1 "no limit" is ~2^63
            return max(cap - used + _stat(folder / "memory.stat", cache), 0)
    return None


def _stat(path: Path, key: str) -> int:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def _address_space_room() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    mapped = _own_status("VmSize:")
    return max(soft - mapped, 0) if mapped is not None else None


def rss_bytes() -> int | None:
    """This process's resident memory now, None where /proc does not tell."""
    return _own_status("VmRSS:")


def _own_status(key: str) -> int | None:
    """A size from /proc/self/status, in bytes."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith(key):
            return int(line.split()[1]) * 1024
    return None
