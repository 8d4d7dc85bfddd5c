# pyright: basic
"""Trace files the worker writes and reads back for its own passes."""

import gzip
import json
import os

from .names import GPU_CATS


def load_json(path):
    with open(path, "rb") as f:
        return json.load(f).get("traceEvents", [])


def gzip_file(path):
    """Gzip a Chrome trace beside it and remove it: the new path, and the trace's events
    (count_events, as the bytes pass)."""
    out = path + ".gz"
    with gzip.GzipFile(out, "wb", compresslevel=1) as dst:
        events = count_events(path, dst)
    os.unlink(path)
    return out, events


def count_events(path, sink=None):
    """The events in a Chrome trace: its ``"ph"`` keys, counted without parsing; each chunk
    read also goes to `sink` where one is given."""
    events, tail = 0, b""
    with open(path, "rb") as src:
        while chunk := src.read(1 << 20):
            if sink is not None:
                sink.write(chunk)
            # A key split across two chunks is in the 6 bytes around their boundary.
            events += chunk.count(b'"ph"') + (tail + chunk[:3]).count(b'"ph"')
            tail = chunk[-3:]
    return events


def first_kernel_after(events, name):
    """Microseconds from the start of annotation `name` to the first GPU activity after it."""
    region = [e for e in events if e.get("cat") == "user_annotation" and e.get("name") == name]
    if not region:
        return None
    start = region[0]["ts"]
    gpu = [e["ts"] for e in events if e.get("cat") in GPU_CATS and e["ts"] >= start]
    return (min(gpu) - start) if gpu else None
