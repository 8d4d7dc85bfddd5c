"""A user's Triton kernel on the CPU: under TRITON_INTERPRET=1 Triton runs ``@triton.jit``
functions in its interpreter, on CPU tensors (for the launch watch's tests)."""

import torch
import triton
import triton.language as tl


@triton.jit
def scale_rows(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * n_cols + cols, mask=mask)
    tl.store(out_ptr + row * n_cols + cols, x * 2.0, mask=mask)


def scaled(x):
    out = torch.empty_like(x)
    scale_rows[(x.shape[0],)](out, x, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


def scaled_inputs(batch_size: int = 1, device: str = "cpu"):
    return (torch.randn(8 * batch_size, 64, device=device),)
