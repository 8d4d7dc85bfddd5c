# pyright: basic
"""Trace files the worker writes and reads back for its own passes."""

import gzip
import json
import os
import shutil

from .names import GPU_CATS


def load_json(path):
    with open(path, "rb") as f:
        return json.load(f).get("traceEvents", [])


def gzip_file(path):
    out = path + ".gz"
    with open(path, "rb") as src, gzip.GzipFile(out, "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    os.unlink(path)
    return out


def first_kernel_after(events, name):
    """Microseconds from the start of annotation `name` to the first GPU activity after it."""
    region = [e for e in events if e.get("cat") == "user_annotation" and e.get("name") == name]
    if not region:
        return None
    start = region[0]["ts"]
    gpu = [e["ts"] for e in events if e.get("cat") in GPU_CATS and e["ts"] >= start]
    return (min(gpu) - start) if gpu else None
