# pyright: basic
"""The memory pass's events reduced to what the report needs: the peak, the blocks live at
it by line and by kind, bytes allocated and freed per line (churn), and a timeline.

An event is ``(t_us, action, addr, size, where)``: action ``alloc``, ``free``,
``seg_alloc`` or ``seg_free`` (the allocator taking or returning device memory), ``where``
a ``(path, line, via)`` key: the user's line, ``via`` "" or "backward" (the backward of that
line's forward op), or ``("", 0, why)`` when no line of the user's caused it.
"""

import hashlib

#: Where frees of blocks allocated before the call are booked.
BEFORE_CALL = ("", 0, "before the call")
TIMELINE_POINTS = 200
MAX_RUNS = 512
TOP_LINES = 40
#: A pack hook's clock and the allocator's may differ by this much (µs).
CLOCK_SLACK_US = 2.0


def reduce_events(events, start, kinds_before, kinds_after, packs):
    """The report's shapes from the call's events.

    ``start``: ``t0``/``t1`` (the call's bounds, µs), ``baseline`` (bytes allocated before
    it), ``reserved`` (bytes reserved before it, None where there is no reserve).
    ``kinds_before``/``kinds_after``: storage address -> (kind, bytes) of the live
    parameters, gradients and optimizer state before and after the call. ``packs``: the
    storage addresses saved for backward, with the time each was saved (``timed`` False in
    ``start``: the events' times are not on that clock, addresses alone tell)."""
    allocated = start["baseline"]
    reserved = start["reserved"]
    timed = start.get("timed", True)  # False: the events' times are their order only
    peak, peak_i, reserved_at_peak = allocated, -1, reserved
    open_blocks = {}
    blocks = []  # [alloc index, size, where, free index or None, addr, alloc t, free t]
    pre_freed = []  # (index, addr, size)
    rows = {}
    timeline = [(0.0, allocated)]
    runs = []  # [where, highest allocated] of each run of events on one line
    for i, (t, action, addr, size, where) in enumerate(events):
        if action == "alloc":
            block = [i, size, where, None, addr, t if timed else None, None]
            open_blocks[addr] = block
            blocks.append(block)
            allocated += size
            _row(rows, where)["allocated_bytes"] += size
            _row(rows, where)["allocations"] += 1
        elif action == "free":
            block = open_blocks.pop(addr, None)
            if block is None:
                pre_freed.append((i, addr, size))
                allocated -= size
                _row(rows, BEFORE_CALL)["freed_bytes"] += size
            else:
                block[3], block[6] = i, t
                allocated -= block[1]
                _row(rows, block[2])["freed_bytes"] += block[1]
        elif action == "seg_alloc":
            reserved = (reserved or 0) + size
            _row(rows, where)["device_allocs"] += 1
            _row(rows, where)["device_alloc_bytes"] += size
        elif action == "seg_free":
            reserved = (reserved or 0) - size
        else:
            continue
        if allocated > peak:
            peak, peak_i, reserved_at_peak = allocated, i, reserved
        timeline.append((t - start["t0"], allocated))
        if action in ("alloc", "free"):
            if runs and runs[-1][0] == where:
                runs[-1][1] = max(runs[-1][1], allocated)
            else:
                runs.append([where, allocated])

    packed = {}
    for addr, t in packs:
        packed.setdefault(addr, []).append(t)
    kinds = {}
    for block in blocks:
        if block[0] > peak_i or (block[3] is not None and block[3] <= peak_i):
            continue
        kind = block_kind(block, kinds_after, packed)
        row = _row(rows, block[2])
        row["live_at_peak_bytes"] += block[1]
        row["kinds"][kind] = row["kinds"].get(kind, 0) + block[1]
        kinds[kind] = kinds.get(kind, 0) + block[1]

    freed_before_peak = {addr for i, addr, _ in pre_freed if i <= peak_i}
    baseline_at_peak = start["baseline"] - sum(s for i, _, s in pre_freed if i <= peak_i)
    held = {}
    for addr, (kind, nbytes) in kinds_before.items():
        if addr not in freed_before_peak:
            held[kind] = held.get(kind, 0) + nbytes
    other = baseline_at_peak - sum(held.values())
    if other > 0:
        held["other"] = other

    lines = sorted(
        rows.values(), key=lambda r: (-max(r["live_at_peak_bytes"], r["allocated_bytes"]),)
    )
    peak_t = events[peak_i][0] - start["t0"] if peak_i >= 0 else 0.0
    return {
        "baseline_bytes": start["baseline"],
        "baseline_at_peak_bytes": max(baseline_at_peak, 0),
        "baseline_kinds": held,
        "trace_peak_bytes": peak,
        "peak_at_us": peak_t,
        "reserved_at_peak_bytes": reserved_at_peak,
        "kinds_at_peak": kinds,
        "lines": lines[:TOP_LINES],
        "lines_left_out": max(len(lines) - TOP_LINES, 0),
        "timeline": thin_timeline(timeline, start["t1"] - start["t0"]),
        "by_run": merge_runs([r[1] for r in runs]),
        "runs_signature": hashlib.sha1(repr([r[0] for r in runs]).encode()).hexdigest()[:16],
    }


def _row(rows, where):
    row = rows.get(where)
    if row is None:
        row = rows[where] = {
            "path": where[0],
            "line": where[1],
            "via": where[2],
            "live_at_peak_bytes": 0,
            "kinds": {},
            "allocated_bytes": 0,
            "freed_bytes": 0,
            "allocations": 0,
            "device_allocs": 0,
            "device_alloc_bytes": 0,
        }
    return row


def block_kind(block, kinds_after, packed):
    """A block allocated in the call: the kind of the live object whose storage it still is
    at the end, else an activation when it was saved for backward while it lived, else a
    temporary."""
    _i, _size, _where, free_i, addr, alloc_t, free_t = block
    if free_i is None and addr in kinds_after:
        return kinds_after[addr][0]
    for t in packed.get(addr, ()):
        if alloc_t is None or (
            t >= alloc_t - CLOCK_SLACK_US and (free_t is None or t <= free_t + CLOCK_SLACK_US)
        ):
            return "activations"
    return "temporaries"


def thin_timeline(points, span_us, n=TIMELINE_POINTS):
    """At most ``n`` points: the highest value in each of ``n`` equal slices of the call."""
    if len(points) <= n or span_us <= 0:
        return [[round(t, 3), v] for t, v in points]
    width = span_us / n
    out = {}
    for t, v in points:
        k = min(int(max(t, 0.0) / width), n - 1)
        if k not in out or v > out[k][1]:
            out[k] = (t, v)
    return [[round(t, 3), v] for t, v in (out[k] for k in sorted(out))]


def merge_runs(values, n=MAX_RUNS):
    """At most ``n`` values: neighbours merged pairwise (the higher kept) until they fit, so
    two calls with the same runs merge alike."""
    values = list(values)
    while len(values) > n:
        values = [max(values[k : k + 2]) for k in range(0, len(values), 2)]
    return values


def enclosing(intervals, times):
    """For each of the sorted ``times``, the payload of the innermost interval
    ``(start, end, payload)`` open at it (None where none is); intervals nest."""
    intervals = sorted(intervals, key=lambda iv: (iv[0], -iv[1]))
    out = []
    stack = []
    k = 0
    for t in times:
        while k < len(intervals) and intervals[k][0] <= t:
            iv = intervals[k]
            while stack and stack[-1][1] < iv[0]:
                stack.pop()
            stack.append(iv)
            k += 1
        while stack and stack[-1][1] < t:
            stack.pop()
        out.append(stack[-1][2] if stack else None)
    return out
