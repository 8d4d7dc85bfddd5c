# pyright: basic
"""The tensor lists of the optimizers that step in the cold call: a foreach or fused step's
multi-tensor kernels run one block per chunk of at most CHUNK elements of one tensor, and
the trace keeps a list's shapes only up to 30 tensors, so its bytes are otherwise a bound
from the grids (analysis/costs/foreach.py). With each list's tensors, elements and chunks,
an op whose grids sum to a list's chunks is known to run over that list's elements.

The optimizers are those torch.optim's global step pre-hook sees during the call: no scan
of the process's objects (~20 ms with torch alone loaded), and none that did not step."""

import contextlib
import sys

#: ATen's kChunkSize (MultiTensorApply.cuh): the most elements of one tensor a block takes.
CHUNK = 65536
MAX_OPTIMIZERS = 8


class StepWatch:
    """While open, the lists of the optimizers whose ``step`` runs, counted as it begins
    (torch.optim's global step pre-hook, torch >= 2.0): the parameters that have a gradient
    then, as a foreach or fused step takes only those; nothing where torch.optim is not
    loaded or has no such hook."""

    def __init__(self):
        self.stepped = []
        self._lists = []
        self._handle = None

    def start(self):
        """Watch the steps from now on (again: nothing more)."""
        module = sys.modules.get("torch.optim.optimizer")
        register = getattr(module, "register_optimizer_step_pre_hook", None)
        if register is not None and self._handle is None:
            try:
                self._handle = register(self._hook)
            except Exception:  # another torch's hook API: the steps keep the grid bound
                self._handle = None
        return self

    def stop(self):
        """Stop watching (the lists stay)."""
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def _hook(self, optimizer, args, kwargs):
        if len(self.stepped) >= MAX_OPTIMIZERS or any(o is optimizer for o in self.stepped):
            return
        self.stepped.append(optimizer)
        # an optimizer of another layout: its steps keep the grid bound
        with contextlib.suppress(Exception):
            self._lists += _lists(optimizer)

    def lists(self):
        """Per optimizer that stepped, per parameter group, per (device, dtype) (how
        torch.optim groups a step's lists): its parameters' count, elements and chunks."""
        return list(self._lists)


def _lists(optimizer):
    out = []
    name = type(optimizer).__name__
    for group in optimizer.param_groups:
        lists = {}
        for p in group["params"]:
            if p.grad is None:  # torch.optim's steps skip it
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
