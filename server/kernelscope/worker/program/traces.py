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
    (its ``"ph"`` keys, counted as the bytes pass, without parsing)."""
    out = path + ".gz"
    events, tail = 0, b""
    with open(path, "rb") as src, gzip.GzipFile(out, "wb", compresslevel=1) as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
            # A key split across two chunks is in the 6 bytes around their boundary.
            events += chunk.count(b'"ph"') + (tail + chunk[:3]).count(b'"ph"')
            tail = chunk[-3:]
    os.unlink(path)
    return out, events


def first_kernel_after(events, name):
    """Microseconds from the start of annotation `name` to the first GPU activity after it."""
    region = [e for e in events if e.get("cat") == "user_annotation" and e.get("name") == name]
    if not region:
        return None
    start = region[0]["ts"]
    gpu = [e["ts"] for e in events if e.get("cat") in GPU_CATS and e["ts"] >= start]
    return (min(gpu) - start) if gpu else None
