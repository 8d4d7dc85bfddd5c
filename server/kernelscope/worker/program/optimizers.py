# pyright: basic
"""The tensor lists of the optimizers alive after the cold call: a foreach or fused step's
multi-tensor kernels run one block per chunk of at most CHUNK elements of one tensor, and
the trace keeps a list's shapes only up to 30 tensors, so its bytes are otherwise a bound
from the grids (analysis/costs/foreach.py). With each list's tensors, elements and chunks,
an op whose grids sum to a list's chunks is known to run over that list's elements."""

import gc
import sys

#: ATen's kChunkSize (MultiTensorApply.cuh): the most elements of one tensor a block takes.
CHUNK = 65536
MAX_OPTIMIZERS = 8


def optimizer_lists():
    """Per optimizer, per parameter group, per (device, dtype) (how torch.optim groups a
    step's lists): its trainable parameters' count, elements and chunks. Only where the
    user's code loaded torch.optim; after the cold call, outside the timed windows."""
    optim = sys.modules.get("torch.optim")
    base = getattr(optim, "Optimizer", None)
    if base is None:
        return []
    out = []
    found = 0
    for obj in gc.get_objects():
        if base not in type(obj).__mro__:  # no isinstance: a proxy's __class__ may run code
            continue
        found += 1
        if found > MAX_OPTIMIZERS:
            break
        try:
            out += _lists(obj)
        except Exception:  # an optimizer of another layout: its steps keep the grid bound
            continue
    return out


def _lists(optimizer):
    out = []
    name = type(optimizer).__name__
    for group in optimizer.param_groups:
        lists = {}
        for p in group["params"]:
            if not p.requires_grad:
                continue
            key = (str(p.device), str(p.dtype).replace("torch.", ""))
            n = int(p.numel())
            tensors, elements, chunks = lists.get(key, (0, 0, 0))
            lists[key] = (tensors + 1, elements + n, chunks + (n + CHUNK - 1) // CHUNK)
        for (device, dtype), (tensors, elements, chunks) in lists.items():
            out.append({
                "optimizer": name,
                "device": device,
                "dtype": dtype,
                "tensors": tensors,
                "elements": elements,
                "chunks": chunks,
            })  # fmt: skip
    return out
