"""Steps an in-place run times (bench/inplace_tracer.py): pure Python, and a small CPU
training step (host-bound: most of its time is Python and the dispatcher)."""

from __future__ import annotations

from typing import Any


def _record(i: int) -> dict[str, Any]:
    return {"id": i, "tokens": [i % 7, i % 11, i % 13], "label": i & 1}


def python_step(n: int = 400) -> int:
    """A collate function's kind of work: small objects built, filtered and summed."""
    batch = [_record(i) for i in range(n)]
    kept = [r for r in batch if r["label"] == 0]
    return sum(sum(r["tokens"]) for r in kept)


def torch_step(model: Any, optimizer: Any, x: Any, y: Any) -> Any:
    """One optimizer step of a small MLP on the CPU."""
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()
