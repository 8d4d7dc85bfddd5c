"""flex_attention's block mask, live: the worker reads the density of each BlockMask alive
after the cold call (a causal 4x4-block mask computes 10 of 16 blocks), which a compiled
flex_attention's FLOPs need and its trace does not hold."""

from __future__ import annotations

from support import WORKLOADS
from support.cli_sidecar import cpu_sidecar

SPEC = f"{WORKLOADS / 'flex_mask.py'}::attend"


def test_the_sidecar_has_the_live_masks_density() -> None:
    sidecar = cpu_sidecar(SPEC)
    assert sidecar["block_masks"] == [
        {"shape": [1, 1, 512, 512], "block_size": [128, 128], "sparsity": 37.5}
    ]
