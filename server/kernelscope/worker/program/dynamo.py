# pyright: basic
"""What torch.compile has done in this process so far, from dynamo's own counters."""

import sys


def dynamo_frames():
    """Frames torch.compile has compiled in this process so far (0 before dynamo loads)."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    try:
        return int(counters["stats"]["unique_graphs"]) if counters else 0
    except (KeyError, TypeError, ValueError):  # a torch without the counter: no detection
        return 0


def compile_seconds():
    """Seconds torch.compile has spent compiling in this process (0 when dynamo is not
    loaded): the outermost compile frames of dynamo's own timing table."""
    utils = sys.modules.get("torch._dynamo.utils")
    metrics = getattr(utils, "compilation_time_metrics", None)
    if not isinstance(metrics, dict) or not metrics:
        return 0.0
    totals = {k: float(sum(v)) for k, v in metrics.items() if isinstance(v, list)}
    outer = [v for k, v in totals.items() if k.endswith("compile_inner")]
    return sum(outer) if outer else max(totals.values(), default=0.0)
