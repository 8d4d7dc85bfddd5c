"""Attention, every SDPA backend, forward and backward: FLOPs of QKᵀ and PV (halved where
causal), bytes q, k, v read and the output written.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kernelscope.analysis.costs.tensors import (
    DTYPE_BYTES,
    Tensor,
    arg_at,
    concrete_ints,
    concrete_value,
    numel,
    size_of,
)


class _Attention(NamedTuple):
    """Where an attention op's arguments are. Tensors: q, k, v at 0-2 (forward) or 1-3 after
    grad_out (backward); ``out`` and ``bias`` (-1: none); ``cum_seq_q`` (set for packed
    variable-length batches). Concrete Inputs: ``causal`` (is_causal, or custom_mask_type
    where ``mask_type``: 0 none, 1 and 2 causal) and ``max_k`` (the longest key sequence)."""

    bshd: bool  # (batch, seq, heads, dim) rather than (batch, heads, seq, dim)
    backward: bool
    causal: int
    mask_type: bool = False
    bias: int = -1
    out: int = -1
    cum_seq_q: int = -1
    max_k: int = -1


ATTENTION_ARGS = {
    "aten::scaled_dot_product_attention": _Attention(False, False, 5, bias=3),
    "aten::_scaled_dot_product_flash_attention": _Attention(False, False, 4),
    "aten::_scaled_dot_product_efficient_attention": _Attention(False, False, 6, bias=3),
    "aten::_scaled_dot_product_cudnn_attention": _Attention(False, False, 6, bias=3),
    "aten::_scaled_dot_product_fused_attention_overrideable": _Attention(False, False, 5, bias=3),
    "aten::_flash_attention_forward": _Attention(True, False, 8, cum_seq_q=3, max_k=6),
    "aten::_efficient_attention_forward": _Attention(
        True, False, 9, mask_type=True, bias=3, cum_seq_q=4, max_k=7
    ),
    "aten::_cudnn_attention_forward": _Attention(False, False, 10, bias=3, cum_seq_q=4, max_k=7),
    "aten::_scaled_dot_product_flash_attention_backward": _Attention(False, True, 11, out=4),
    "aten::_scaled_dot_product_efficient_attention_backward": _Attention(
        False, True, 11, bias=4, out=5
    ),
    "aten::_scaled_dot_product_cudnn_attention_backward": _Attention(
        False, True, 14, bias=8, out=4
    ),
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": _Attention(
        False, True, 13, bias=4, out=6
    ),
    "aten::_flash_attention_backward": _Attention(True, True, 11, out=4, cum_seq_q=6, max_k=9),
    "aten::_efficient_attention_backward": _Attention(
        True, True, 14, mask_type=True, bias=4, out=5, cum_seq_q=6, max_k=9
    ),
    "aten::_cudnn_attention_backward": _Attention(
        False, True, 14, bias=8, out=4, cum_seq_q=9, max_k=12
    ),
}
ATTENTION = frozenset(ATTENTION_ARGS)


def attention_costs(
    where: _Attention, args: list[Tensor | None], concrete: list[Any]
) -> tuple[float, float]:
    """Attention over q (…, Hq, Sq, D) and k, v (…, Hk, Sk, D / Dv), Hk ≤ Hq (GQA):
    forward 2·B·Hq·Sq·Sk·(D + Dv) (QKᵀ and PV); backward 2·B·Hq·Sq·Sk·(3·D + 2·Dv) (QKᵀ
    again, then dV, dP, dQ, dK: 2.5x the forward); halved where causal. Packed
    variable-length batches count Sk as the longest key sequence: a bound. Forward reads q,
    k, v (and a mask) and writes out; backward reads grad_out, q, k, v, out and writes the
    grads of q, k, v."""
    first = 1 if where.backward else 0
    q, k, v = args[first], args[first + 1], args[first + 2]
    if q is None or k is None or v is None:
        raise ValueError("attention without q, k or v")
    qs, ks, vs = q[0], k[0], v[0]
    packed = arg_at(args, where.cum_seq_q) is not None
    if where.bshd or (packed and len(qs) == 3):  # (B, S, H, D), or (total, H, D) when packed
        rows, sq, sk = numel(qs[:-3]) * qs[-2], qs[-3], ks[-3]
    else:
        rows, sq, sk = numel(qs[:-2]), qs[-2], ks[-2]
    if packed:
        longest = concrete_ints(concrete, where.max_k)
        sk = min(sk, longest[0]) if len(longest) == 1 else sk
    d, dv = qs[-1], vs[-1]
    flops = 2.0 * rows * sq * sk * ((3 * d + 2 * dv) if where.backward else (d + dv))
    flag = concrete_value(concrete, where.causal)
    if flag == "True" or (where.mask_type and flag not in ("", "0")):
        flops /= 2
    qkv = size_of(q) + size_of(k) + size_of(v)
    if where.backward:
        moved = size_of(args[0]) + 2 * qkv + size_of(arg_at(args, where.out))
    else:
        moved = qkv + rows * sq * dv * DTYPE_BYTES[q[1]]
    return flops, float(moved + size_of(arg_at(args, where.bias)))


#: Inductor's template kernels (``triton_tem_fused_…``): flex_attention compiles to one.
TEMPLATE_KERNEL_PREFIX = "triton_tem_"
_FLOATS = frozenset({"float", "c10::Half", "c10::BFloat16"})


def flex_attention_flops(name: str, args: list[Tensor]) -> tuple[float, float] | None:
    """FLOPs of a compiled flex_attention kernel, as (low, high), from its arguments as the
    profiler records them: q (B, Hq, Sq, D), k (B, Hk, Sk, D), v (B, Hk, Sk, Dv), then the
    log-sum-exp and the block mask's tensors (int32 (B, H, Sq/blk, Sk/blk) block indices)
    and the outputs. None for a template kernel of another shape (a templated GEMM). The
    block mask's density is not in a trace: high is the dense count (as SDPA's, 2.5x for the
    backward, told by its six or more tensors of q's shape: dO, dQ, dK, dV ...), low one KV
    block per query block."""
    if not name.startswith(TEMPLATE_KERNEL_PREFIX) or len(args) < 4:
        return None
    (q, q_type), (k, k_type), (v, v_type) = args[0], args[1], args[2]
    if not (len(q) == len(k) == len(v) == 4 and {q_type, k_type, v_type} <= _FLOATS):
        return None
    if q[0] != k[0] or q[3] != k[3] or k[2] != v[2] or q[1] % max(k[1], 1):
        return None
    blocks = [s for s, t in args[3:] if t == "int" and len(s) == 4 and s[0] in (1, q[0])]
    if not blocks:
        return None  # no block mask: some other template
    batch, heads, sq, d = q
    sk, dv = k[2], v[3]
    backward = sum(1 for s, t in args if t in _FLOATS and s in (q, k)) >= 6
    per_pair = (3 * d + 2 * dv) if backward else (d + dv)
    dense = 2.0 * batch * heads * sq * sk * per_pair
    kv_blocks = max([s[3] for s in blocks] + [1])
    return dense / kv_blocks, dense


def flex_block_grids(args: list[Tensor]) -> set[tuple[int, int]]:
    """The (query blocks, KV blocks) grids of a flex_attention kernel's block-mask tensors
    (int32, 4-d), by which a live BlockMask of the same grid is known to be its mask."""
    return {(s[2], s[3]) for s, t in args[3:] if t == "int" and len(s) == 4}
