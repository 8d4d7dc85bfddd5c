# pyright: basic
"""The block masks of flex_attention alive after the cold call, with their density: the
trace records a mask's block tensors but not how many blocks are computed, which decides a
compiled flex_attention's FLOPs."""

import gc
import sys

FLEX = "torch.nn.attention.flex_attention"
MAX_MASKS = 16


def block_masks():
    """Each distinct BlockMask the process holds (the call's inputs, a module's, a cache's):
    its (B, H, Q_LEN, KV_LEN), block size and sparsity (% of blocks skipped). Only where the
    user's code loaded flex_attention; ``sparsity()`` syncs, so never in a timed window."""
    cls = getattr(sys.modules.get(FLEX), "BlockMask", None)
    if cls is None:
        return []
    out = []
    for obj in gc.get_objects():
        if len(out) >= MAX_MASKS:
            break
        if type(obj) is not cls:
            continue
        try:
            entry = {
                "shape": [int(s) for s in obj.shape],
                "block_size": [int(b) for b in obj.BLOCK_SIZE],
                "sparsity": float(obj.sparsity()),
            }
        except Exception:  # a mask of another torch's layout: no density, the range stays
            continue
        if entry not in out:
            out.append(entry)
    return out
