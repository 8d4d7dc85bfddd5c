"""FLOPs and bytes per op call, checked against the shapes of the workloads that made the real
H200 recordings in fixtures/ (the formulas written out from fixtures/workloads/*.py), against
torch's own op signatures and output shapes, and on hand-built edge cases."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kernelscope.analysis.costs import (
    ATTENTION,
    CONVOLUTIONS,
    FLOP_OPS,
    MATMULS,
    OpCost,
    OpCosts,
    bytes_of,
    concrete_inputs,
    flops_of,
    matmul_dtype,
    op_bytes,
    op_flops,
)
from kernelscope.analysis.trace_load import load_trace
from kernelscope.analysis.trace_model import Op, OpInputs, Trace

from support import FIXTURES

BF16, FP32, FP8 = 2, 4, 1


def trace_of(name: str) -> Trace:
    return load_trace(FIXTURES / name / "trace.json.gz")


def owners(trace: Trace) -> list[Op]:
    """The ops that launched GPU work (the only ones the analysis costs), in trace order."""
    return [trace.ops[i] for i in sorted({g.op for g in trace.gpu_events if g.op >= 0})]


def owner(trace: Trace, name: str, *dims: list[int]) -> Op:
    """The kernel-owning calls of ``name`` whose leading Input Dims are ``dims``: all alike
    (one signature), the first returned."""
    calls = [
        op
        for op in owners(trace)
        if op.name == name and op.inputs().dims[: len(dims)] == list(dims)
    ]
    assert calls, (name, dims)
    assert len({(flops_of(op), bytes_of(op)) for op in calls}) == 1
    return calls[0]


def inputs(*args: tuple[list[int], str] | None) -> OpInputs:
    """Input Dims / Input type of positional arguments: (shape, dtype), or None for a
    non-tensor."""
    return OpInputs(dims=[a[0] if a else [] for a in args], types=[a[1] if a else "" for a in args])


def mm_bytes(m: int, k: int, n: int, size: int) -> int:
    return (m * k + k * n + m * n) * size


# -- matrix-vector products ---------------------------------------------------------------


def test_gemv_reads_the_matrix_once() -> None:
    """``w @ x`` (16384² bf16 by 16384) runs as aten::mv -> aten::addmv_ (beta 0), which owns
    the kernel: 2·M·N FLOPs; the matrix and vector read, the output vector written."""
    trace = trace_of("gemv")
    m = n = 16384
    op = owner(trace, "aten::addmv_", [m], [m, n], [n])
    assert concrete_inputs(op)[3:5] == ["0", "1"]  # beta 0: the output is not read
    assert flops_of(op) == 2 * m * n
    assert bytes_of(op) == (m * n + n + m) * BF16  # 512 MiB, not twice that
    assert {o.name for o in owners(trace)} == {"aten::addmv_"}  # aten::mv owns no kernel


def test_matrix_vector_products() -> None:
    mat, vec, out = ([300, 200], "float"), ([200], "float"), ([300], "float")
    assert op_flops("aten::mv", inputs(mat, vec)) == 2 * 300 * 200
    assert op_bytes("aten::mv", inputs(mat, vec)) == (300 * 200 + 200 + 300) * FP32
    addmv = inputs(out, mat, vec, None, None)
    assert op_flops("aten::addmv", addmv, ["", "", "", "1", "1"]) == 2 * 300 * 200
    read_y = op_bytes("aten::addmv", addmv, ["", "", "", "1", "1"])
    assert read_y == (300 * 200 + 200 + 2 * 300) * FP32  # beta 1: y read and written
    assert op_bytes("aten::addmv", addmv, ["", "", "", "0.", "1"]) == read_y - 300 * FP32
    assert op_bytes("aten::addmv", addmv) == read_y  # beta not recorded: torch's default, 1
    for name in ("aten::dot", "aten::vdot"):
        x = ([1000], "c10::Half")
        assert op_flops(name, inputs(x, x)) == 2 * 1000
        assert op_bytes(name, inputs(x, x)) == (2 * 1000 + 1) * 2


# -- matrix products ------------------------------------------------------------------------


def test_misaligned_gemm() -> None:
    """``x @ w``, (8192, 4096) @ (4096, 50257) bf16: one aten::mm."""
    op = owner(trace_of("gemm_misaligned"), "aten::mm", [8192, 4096], [4096, 50257])
    assert flops_of(op) == 2 * 8192 * 4096 * 50257
    assert bytes_of(op) == mm_bytes(8192, 4096, 50257, BF16)
    assert matmul_dtype(op.inputs(), op.name) == "c10::BFloat16"


def test_fp8_scaled_mm() -> None:
    """``torch._scaled_mm`` of two 8192² e4m3 matrices with scalar fp32 scales, bf16 out
    (out_dtype 15 at Concrete Inputs 6): the fp8 dtype picks the fp8 peak."""
    trace = trace_of("fp8_gemm")
    n = 8192
    op = owner(trace, "aten::_scaled_mm", [n, n], [n, n])
    assert concrete_inputs(op)[6] == "15"
    assert flops_of(op) == 2 * n**3
    assert bytes_of(op) == 2 * n * n * FP8 + 2 * FP32 + n * n * BF16
    assert OpCosts()(op) == OpCost(2 * n**3, bytes_of(op), "c10::Float8_e4m3fn")
    as_fp8 = op_bytes(op.name, op.inputs())  # out_dtype not known: the inputs' dtype
    assert as_fp8 == bytes_of(op) - n * n * (BF16 - FP8)


def test_training_mlp_linears() -> None:
    """4 × nn.Linear(4096, 4096) at batch 2048 under bf16 autocast: forward addmm (bias
    read), backward mm for grad input (2048x4096 @ 4096x4096) and grad weight (4096x2048 @
    2048x4096), all 2·2048·4096² FLOPs."""
    trace = trace_of("train_mlp")
    b, w = 2048, 4096
    flops = 2 * b * w * w
    addmm = owner(trace, "aten::addmm", [w], [b, w], [w, w])
    assert flops_of(addmm) == flops
    assert bytes_of(addmm) == mm_bytes(b, w, w, BF16) + w * BF16
    grad_in = owner(trace, "aten::mm", [b, w], [w, w])
    grad_w = owner(trace, "aten::mm", [w, b], [b, w])
    assert flops_of(grad_in) == flops_of(grad_w) == flops
    assert bytes_of(grad_in) == mm_bytes(b, w, w, BF16)
    assert bytes_of(grad_w) == mm_bytes(w, b, w, BF16)
    per_step = sum(c.flops for c in OpCosts().many(owners(trace))) / 5
    assert per_step == (4 + 3 + 4) * flops  # forward, grad inputs (none for x), grad weights


def test_gpt2_prefill_conv1d_is_addmm() -> None:
    """GPT-2 124M, batch 8 × 512 tokens: transformers' Conv1D is addmm (bias, x, weight); the
    lm_head, tied to the embedding, is an mm by its transpose, (768, 50257)."""
    trace = trace_of("gpt2_prefill")
    t, d = 8 * 512, 768
    for n_out, k in ((3 * d, d), (d, d), (4 * d, d), (d, 4 * d)):
        op = owner(trace, "aten::addmm", [n_out], [t, k], [k, n_out])
        assert flops_of(op) == 2 * t * k * n_out
        assert bytes_of(op) == mm_bytes(t, k, n_out, BF16) + n_out * BF16
    head = owner(trace, "aten::mm", [t, d], [d, 50257])
    assert flops_of(head) == 2 * t * d * 50257


def test_products_of_other_shapes() -> None:
    f = "float"
    batched = inputs(([2, 1, 5, 3], f), ([4, 3, 7], f))  # broadcast to (2, 4, 5, 7)
    assert op_flops("aten::matmul", batched) == 2 * 2 * 4 * 5 * 7 * 3
    assert op_bytes("aten::matmul", batched) == (30 + 84 + 2 * 4 * 35) * FP32
    linear = inputs(([8, 16, 32], f), ([64, 32], f), ([64], f))  # weight (out, in)
    assert op_flops("aten::linear", linear) == 2 * 8 * 16 * 32 * 64
    assert op_bytes("aten::linear", linear) == (8 * 16 * 32 + 64 * 32 + 64 + 8 * 16 * 64) * FP32
    bmm = inputs(([6, 10, 20], f), ([6, 20, 30], f))
    assert op_flops("aten::bmm", bmm) == 2 * 6 * 10 * 20 * 30
    assert op_bytes("aten::bmm", bmm) == 6 * (200 + 600 + 300) * FP32
    scores = ([6, 10, 30], f)
    baddbmm = inputs(scores, ([6, 10, 20], f), ([6, 20, 30], f), None, None)
    assert op_flops("aten::baddbmm", baddbmm, ["", "", "", "0", "1"]) == 2 * 6 * 10 * 20 * 30
    # beta 0 (HF attention's ``baddbmm(empty, q, k, beta=0)``): the added scores are not read
    assert op_bytes("aten::baddbmm", baddbmm, ["", "", "", "0", "1"]) == 6 * 1100 * FP32
    assert op_bytes("aten::baddbmm", baddbmm, ["", "", "", "1", "1"]) == 6 * 1400 * FP32
    addbmm = inputs(([10, 30], f), ([6, 10, 20], f), ([6, 20, 30], f))  # the batch summed
    assert op_flops("aten::addbmm", addbmm) == 2 * 6 * 10 * 20 * 30
    assert op_bytes("aten::addbmm", addbmm) == (300 + 6 * 800 + 300) * FP32
    vec_mat = inputs(([20], f), ([20, 30], f))
    assert op_flops("aten::matmul", vec_mat) == 2 * 20 * 30
    a, b = ([64, 32], "c10::Float8_e5m2"), ([32, 16], "c10::Float8_e4m3fn")
    scaled = inputs(a, b, ([], f), ([], f), None, None, None, None)
    assert op_bytes("aten::_scaled_mm", scaled, [""] * 6 + ["6", "False"]) == (
        64 * 32 + 32 * 16 + 2 * FP32 + 64 * 16 * FP32
    )
    assert matmul_dtype(scaled, "aten::_scaled_mm") == "c10::Float8_e5m2"
    addmm = inputs(([16], f), ([4, 8], "c10::BFloat16"), ([8, 16], "c10::BFloat16"))
    assert matmul_dtype(addmm, "aten::addmm") == "c10::BFloat16"  # the factor's, not the bias'


def test_the_added_tensor_and_out_dtype_positions_are_torchs() -> None:
    """beta (which decides whether addmm & co. read ``self``) and _scaled_mm's out_dtype are
    read where torch's signatures put them."""
    schemas = _schemas()
    f = "float"
    for name in ("aten::addmm", "aten::baddbmm", "aten::addmv"):
        args = [a.name for a in schemas[name].arguments]
        assert args[0] == "self"  # the tensor added
        dims = {"aten::addmm": ([6, 5], [6, 4], [4, 5]), "aten::addmv": ([6], [6, 4], [4])}
        shapes = dims.get(name, ([3, 6, 5], [3, 6, 4], [3, 4, 5]))
        op = inputs(*((s, f) for s in shapes), *[None] * (len(args) - 3))
        concrete = [""] * len(args)
        full = op_bytes(name, op, concrete)
        concrete[args.index("beta")] = "0"
        assert full - op_bytes(name, op, concrete) == math.prod(shapes[0]) * FP32, name
    args = [a.name for a in schemas["aten::_scaled_mm"].arguments]
    a = ([16, 32], "c10::Float8_e4m3fn")
    op = inputs(a, ([32, 8], a[1]), *[None] * (len(args) - 2))
    concrete = [""] * len(args)
    concrete[args.index("out_dtype")] = "6"  # float
    assert op_bytes("aten::_scaled_mm", op, concrete) == 16 * 32 + 32 * 8 + 16 * 8 * FP32


# -- attention ------------------------------------------------------------------------------


def attention_flops(b: int, hq: int, sq: int, sk: int, d: int, dv: int, backward: bool) -> int:
    """2·B·Hq·Sq·Sk·(D + Dv) forward (QKᵀ, PV); backward 2·B·Hq·Sq·Sk·(3D + 2Dv)."""
    return 2 * b * hq * sq * sk * ((3 * d + 2 * dv) if backward else (d + dv))


def test_flash_attention_training_is_counted_once() -> None:
    """F.scaled_dot_product_attention(q, k, v, is_causal=True) on the flash backend, B=8 H=16
    S=2048 D=128 bf16, then backward: _flash_attention_forward/_backward own the kernels and
    take (B, S, H, D); is_causal is at Concrete Inputs 8 (forward) and 11 (backward)."""
    trace = trace_of("sdpa_flash_train")
    b, h, s, d = 8, 16, 2048, 128
    bshd = [b, s, h, d]
    fwd = owner(trace, "aten::_flash_attention_forward", bshd, bshd, bshd)
    bwd = owner(trace, "aten::_flash_attention_backward", bshd, bshd, bshd, bshd, bshd)
    assert concrete_inputs(fwd)[8] == "True" and concrete_inputs(bwd)[11] == "True"
    causal_forward = attention_flops(b, h, s, s, d, d, backward=False) // 2
    assert causal_forward == 4 * b * h * s * s * d // 2
    assert flops_of(fwd) == causal_forward
    assert flops_of(bwd) == 2.5 * causal_forward
    one = b * h * s * d * BF16
    assert bytes_of(fwd) == 4 * one  # q, k, v read, out written
    assert bytes_of(bwd) == 8 * one  # grad_out, q, k, v, out read; grads of q, k, v written
    flop_owners = {op.name for op in owners(trace) if flops_of(op)}
    assert flop_owners == {"aten::_flash_attention_forward", "aten::_flash_attention_backward"}
    sdpa = [op for op in trace.cpu_ops if op.name in ATTENTION and op.name.startswith("aten::_s")]
    owning = {op.index for op in owners(trace)}
    assert sdpa and all(op.index not in owning for op in sdpa)  # the SDPA-level wrappers
    per_step = sum(c.flops for c in OpCosts().many(owners(trace))) / 5
    assert per_step == 3.5 * causal_forward


def test_cudnn_attention_forward() -> None:
    """The same attention on the cuDNN backend, forward only: _cudnn_attention_forward takes
    (B, H, S, D); is_causal is at Concrete Inputs 10."""
    trace = trace_of("sdpa_cudnn")
    b, h, s, d = 8, 16, 2048, 128
    bhsd = [b, h, s, d]
    op = owner(trace, "aten::_cudnn_attention_forward", bhsd, bhsd, bhsd)
    assert concrete_inputs(op)[10] == "True"
    assert flops_of(op) == 4 * b * h * s * s * d // 2
    assert bytes_of(op) == 4 * b * h * s * d * BF16


def test_vit_training_attention_and_linears() -> None:
    """timm ViT-S/16 at batch 64 (197 tokens, 6 heads of 64, width 384, MLP 1536) trains
    through SDPA's cuDNN backend, not causal; its linears are addmm (forward) and mm."""
    trace = trace_of("vit_train")
    b, h, s, d = 64, 6, 197, 64
    bhsd = [b, h, s, d]
    fwd = owner(trace, "aten::_cudnn_attention_forward", bhsd, bhsd, bhsd)
    bwd = owner(trace, "aten::_cudnn_attention_backward", bhsd, bhsd, bhsd, bhsd, bhsd)
    assert concrete_inputs(fwd)[10] == "False" and concrete_inputs(bwd)[14] == "False"
    assert flops_of(fwd) == 4 * b * h * s * s * d
    assert flops_of(bwd) == 2.5 * flops_of(fwd)
    one = b * h * s * d * BF16
    assert (bytes_of(fwd), bytes_of(bwd)) == (4 * one, 8 * one)
    t = b * s
    qkv = owner(trace, "aten::addmm", [1152], [t, 384], [384, 1152])
    assert flops_of(qkv) == 2 * t * 384 * 1152
    fc2_grad_w = owner(trace, "aten::mm", [384, t], [t, 1536])
    assert flops_of(fc2_grad_w) == 2 * 384 * t * 1536


def test_gpt2_causal_attention() -> None:
    """GPT-2's attention, (8, 12, 512, 64), causal through the cuDNN backend."""
    b, h, s, d = 8, 12, 512, 64
    bhsd = [b, h, s, d]
    op = owner(trace_of("gpt2_prefill"), "aten::_cudnn_attention_forward", bhsd, bhsd, bhsd)
    assert flops_of(op) == 4 * b * h * s * s * d // 2


BSHD = {
    "aten::_flash_attention_forward",
    "aten::_flash_attention_backward",
    "aten::_efficient_attention_forward",
    "aten::_efficient_attention_backward",
}
STATE = {"logsumexp", "philox_seed", "philox_offset", "rng_state", "unused"}


@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_attention_arguments_are_where_torch_puts_them(name: str) -> None:
    """Each attention op's q, k, v, out, grad_out and is_causal (custom_mask_type for the
    memory-efficient kernels: 1 and 2 are causal), at their places in torch's signature;
    Dqk ≠ Dv, Sq ≠ Sk and fewer k/v heads (GQA) than q heads."""
    schema = _schemas().get(name)
    if schema is None:
        pytest.skip(f"{name} is not in this torch")
    args = [a.name for a in schema.arguments]
    backward = name.endswith("_backward")
    b, hq, hk, sq, sk, d, dv = 2, 8, 2, 64, 96, 32, 16

    def shape(heads: int, seq: int, dim: int) -> tuple[list[int], str]:
        sizes = [b, seq, heads, dim] if name in BSHD else [b, heads, seq, dim]
        return sizes, "c10::BFloat16"

    q, k, v, o = shape(hq, sq, d), shape(hk, sk, d), shape(hk, sk, dv), shape(hq, sq, dv)
    by_name = {"query": q, "key": k, "value": v, "out": o, "grad_out": o, "grad_out_": o}
    by_name |= dict.fromkeys(STATE, ([b, hq, sq], "float"))
    op = inputs(*(by_name.get(a) for a in args))
    causal_at = args.index("custom_mask_type" if "custom_mask_type" in args else "is_causal")
    flops = attention_flops(b, hq, sq, sk, d, dv, backward)
    size = {n: math.prod(t[0]) * BF16 for n, t in (("q", q), ("k", k), ("v", v), ("o", o))}
    qkv = size["q"] + size["k"] + size["v"]
    moved = 2 * size["o"] + 2 * qkv if backward else qkv + size["o"]
    for flag, causal in (("False", False), ("True", True), ("0", False), ("1", True), ("2", True)):
        if (flag in ("True", "False")) == (args[causal_at] == "custom_mask_type"):
            continue
        concrete = [""] * len(args)
        concrete[causal_at] = flag
        assert op_flops(name, op, concrete) == (flops / 2 if causal else flops), flag
        assert op_bytes(name, op, concrete) == moved
    masks = [a for a in args if a in ("attn_bias", "bias", "attn_mask")]
    if masks:  # an additive mask or bias is read too
        mask = ([b, hq, sq, sk], "float")
        with_mask = inputs(*(mask if a == masks[0] else by_name.get(a) for a in args))
        assert op_bytes(name, with_mask, concrete) == moved + b * hq * sq * sk * FP32


def test_gqa_and_an_attention_mask() -> None:
    """Llama-style GQA (16 q heads on 4 k/v heads), causal, as the cuDNN backend records it;
    and a memory-efficient call with an additive mask, which is read."""
    q, kv = ([4, 16, 1024, 64], "c10::BFloat16"), ([4, 4, 1024, 64], "c10::BFloat16")
    op = inputs(q, kv, kv, *[None] * 10)
    concrete = ["", "", "", "", "", "", "1024", "1024", "False", "0.", "True", "False", "0.125"]
    name = "aten::_cudnn_attention_forward"
    assert op_flops(name, op, concrete) == 4 * 4 * 16 * 1024 * 1024 * 64 // 2
    assert op_bytes(name, op, concrete) == (2 * 4 * 16 + 2 * 4 * 4) * 1024 * 64 * BF16
    concrete[10] = "False"
    assert op_flops(name, op, concrete) == 4 * 4 * 16 * 1024 * 1024 * 64
    x, mask = ([2, 4, 128, 64], "float"), ([2, 4, 128, 256], "float")
    k = ([2, 4, 256, 64], "float")
    name = "aten::_scaled_dot_product_efficient_attention"
    plain = op_bytes(name, inputs(x, k, k, None, None, None, None, None))
    masked = op_bytes(name, inputs(x, k, k, mask, None, None, None, None))
    assert masked - plain == 2 * 4 * 128 * 256 * FP32


def test_packed_variable_length_attention_counts_the_longest_keys() -> None:
    """Packed batches (q of (total, H, D) with cum_seq_q): Sk is bounded by max_k."""
    q, cum = ([100, 4, 32], "c10::BFloat16"), ([4], "int")
    k = ([120, 4, 32], "c10::BFloat16")
    op = inputs(q, k, k, cum, cum, None, None, None, None, None)
    concrete = ["", "", "", "", "", "40", "50", "0.", "False", "False"]
    name = "aten::_flash_attention_forward"
    assert op_flops(name, op, concrete) == 2 * 4 * 100 * 50 * (32 + 32)
    concrete[8] = "True"
    assert op_flops(name, op, concrete) == 4 * 100 * 50 * (32 + 32)


# -- convolutions ---------------------------------------------------------------------------


def conv_flops(n: int, weight: list[int], out_spatial: list[int]) -> int:
    """2 · N · C_out · (C_in / groups) · kernel · output positions."""
    return 2 * n * math.prod(weight) * math.prod(out_spatial)


def test_resnet50_convolutions() -> None:
    """torchvision ResNet-50 in bf16 at batch 128: aten::cudnn_convolution(input, weight,
    padding, stride, dilation, groups, ...) owns the kernels."""
    trace = trace_of("resnet50")
    n = 128
    cases = [  # input, weight, (padding, stride) recorded, output side
        ([n, 3, 224, 224], [64, 3, 7, 7], ("[3, 3]", "[2, 2]"), 112),  # the stem
        ([n, 128, 56, 56], [128, 128, 3, 3], ("[1, 1]", "[2, 2]"), 28),
        ([n, 256, 56, 56], [512, 256, 1, 1], ("[0, 0]", "[2, 2]"), 28),  # a downsample
        ([n, 64, 56, 56], [64, 64, 3, 3], ("[1, 1]", "[1, 1]"), 56),
        ([n, 2048, 7, 7], [512, 2048, 1, 1], ("[0, 0]", "[1, 1]"), 7),
    ]
    for x, w, recorded, side in cases:
        op = owner(trace, "aten::cudnn_convolution", x, w)
        assert tuple(concrete_inputs(op)[2:4]) == recorded
        assert flops_of(op) == conv_flops(n, w, [side, side])
        out = n * w[0] * side * side
        assert bytes_of(op) == (math.prod(x) + math.prod(w) + out) * BF16


def test_vit_patch_embedding_and_its_backward() -> None:
    """ViT's 16×16 stride-16 patch embedding (with bias) and its backward, which asks for the
    weight's and bias' grads only (output_mask [False, True, True]: the images need none)."""
    trace = trace_of("vit_train")
    x, w = [64, 3, 224, 224], [384, 3, 16, 16]
    forward = conv_flops(64, w, [14, 14])
    fwd = owner(trace, "aten::cudnn_convolution", x, w)
    assert flops_of(fwd) == forward
    out = 64 * 384 * 14 * 14
    assert bytes_of(fwd) == (math.prod(x) + math.prod(w) + out) * BF16
    bwd = owner(trace, "aten::convolution_backward", [64, 384, 14, 14], x, w)
    assert concrete_inputs(bwd)[10] == "[False, True, True]"
    assert flops_of(bwd) == forward  # grad weight only
    # grad_output and the input read, grad weight and grad bias written
    assert bytes_of(bwd) == (out + math.prod(x) + math.prod(w) + 384) * BF16


def test_grouped_strided_padded_dilated_convolutions() -> None:
    f = "float"
    x = ([2, 8, 17, 13], f)
    grouped = ([6, 4, 3, 5], f)  # groups 2: (C_out, C_in / 2, kH, kW)
    cudnn = ["", "", "[2, 0]", "[1, 2]", "[2, 1]", "2", "False", "False", "True"]
    out = [(17 + 4 - 2 * 2 - 1) // 1 + 1, (13 - 4 - 1) // 2 + 1]  # 17 and 5
    assert op_flops("aten::cudnn_convolution", inputs(x, grouped), cudnn) == conv_flops(
        2, [6, 4, 3, 5], out
    )
    depthwise = ([8, 1, 5, 5], f)  # groups 8: one 5x5 filter per channel
    slow = ["", "", "[5, 5]", "", "[2, 2]", "[2, 2]", "[1, 1]"]
    assert op_flops("aten::_conv_depthwise2d", inputs(x, depthwise, None, None), slow) == (
        2 * 2 * 8 * 25 * 9 * 7
    )
    # the generic signature puts stride before padding: the same numbers read differently
    generic = ["", "", "", "[1, 2]", "[2, 0]", "[2, 1]", "False", "[0, 0]", "2"]
    assert op_flops("aten::convolution", inputs(x, grouped, None), generic) == conv_flops(
        2, [6, 4, 3, 5], out
    )
    # padding not recorded (older traces): taken as "same", ceil(size / stride)
    assert op_flops("aten::convolution", inputs(x, grouped), ["", "", "", "[2, 2]"]) == (
        conv_flops(2, [6, 4, 3, 5], [9, 7])
    )
    transposed = ["", "", "", "[2, 2]", "", "", "True"]  # its output: size × stride
    t = inputs(x, ([8, 3, 3, 3], f))
    assert (
        op_bytes("aten::convolution", t, transposed)
        == (2 * 8 * 17 * 13 + 8 * 27 + 2 * 3 * 34 * 26) * FP32
    )


def test_convolution_backward_per_output_mask() -> None:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
    dilation, transposed, output_padding, groups, output_mask): the forward's FLOPs once per
    grad of input and of weight asked for."""
    f = "float"
    g, x, w = ([4, 16, 8, 8], f), ([4, 8, 16, 16], f), ([16, 8, 3, 3], f)
    forward = conv_flops(4, [16, 8, 3, 3], [8, 8])
    name = "aten::convolution_backward"
    head = ["", "", "", "[16]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    sizes = {"g": 4 * 16 * 64 * FP32, "x": 4 * 8 * 256 * FP32, "w": 16 * 72 * FP32}
    for mask, times, moved in (
        ("[True, True, False]", 2, sizes["g"] + 2 * (sizes["x"] + sizes["w"])),
        ("[False, True, False]", 1, sizes["g"] + sizes["x"] + sizes["w"]),
        ("[True, False, True]", 1, sizes["g"] + sizes["x"] + sizes["w"] + 16 * FP32),
        ("[False, False, True]", 0, sizes["g"] + 16 * FP32),
    ):
        op = inputs(g, x, w, *[None] * 8)
        assert op_flops(name, op, [*head, mask]) == times * forward, mask
        assert op_bytes(name, op, [*head, mask]) == moved, mask
    # a transposed convolution's backward: its positions are those of its input (here x)
    op = inputs(x, g, ([16, 8, 3, 3], f), *[None] * 8)
    transposed = [*head[:7], "True", *head[8:], "[True, True, False]"]
    assert op_flops(name, op, transposed) == 2 * 2 * 4 * 16 * 8 * 9 * 64


def test_conv_positions_and_output_sizes_are_torchs() -> None:
    """Every forward convolution op, its arguments placed by torch's signature and its output
    size from torch itself (meta tensors): stride, padding, dilation, output_padding and
    groups are read where the op has them."""
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional
    schemas = _schemas()
    checked = 0
    for name in sorted(CONVOLUTIONS):
        schema = schemas.get(name)
        if schema is None or "backward" in name:
            continue
        args = [a.name for a in schema.arguments]
        spatial = 1 if name.endswith("1d") else 3 if "3d" in name else 2
        fixed = "transpose" in name
        for transposed in [False, True] if "transposed" in args else [fixed]:
            depthwise = "depthwise" in name
            groups = 4 if depthwise else 2 if "groups" in args else 1
            stride = [2, 1, 3][:spatial]
            padding = [1, 0, 2][:spatial]
            dilation = [1, 2, 1][:spatial] if "dilation" in args else [1] * spatial
            extra = [1, 0, 1][:spatial] if transposed and "output_padding" in args else [0] * 3
            kernel = [3, 2, 3][:spatial]
            x = torch.empty(2, 4, *[9, 8, 7][:spatial], device="meta")
            if transposed:
                w = torch.empty(4, 3, *kernel, device="meta")
                conv = getattr(functional, f"conv_transpose{spatial}d")
                y = conv(x, w, None, stride, padding, extra[:spatial], groups, dilation)
            else:
                w = torch.empty(8 if depthwise else 6, 4 // groups, *kernel, device="meta")
                conv = getattr(functional, f"conv{spatial}d")
                y = conv(x, w, None, stride, padding, dilation, groups)
            tensors = {"input": x, "self": x, "weight": w, "z": y}
            values = {
                "stride": stride,
                "padding": padding,
                "dilation": dilation,
                "output_padding": extra[:spatial],
                "kernel_size": kernel,
                "groups": groups,
                "transposed": transposed,
            }
            op = inputs(
                *((list(tensors[a].shape), "float") if a in tensors else None for a in args)
            )
            concrete = [str(values[a]) if a in values else "" for a in args]
            positions = x.shape[2:] if transposed else y.shape[2:]
            expected = 2 * 2 * math.prod(w.shape) * math.prod(positions)
            assert op_flops(name, op, concrete) == expected, (name, transposed)
            moved = (x.numel() + w.numel() + y.numel() * (2 if "z" in args else 1)) * FP32
            assert op_bytes(name, op, concrete) == moved, (name, transposed)
            checked += 1
    assert checked >= 25


def test_a_cpu_recording_of_convolutions(tmp_path: Path) -> None:
    """Convolutions recorded by torch.profiler on the CPU (aten::convolution, the mkldnn and
    slow kernels, convolution_backward for the weight's grad): each call's FLOPs and bytes
    from the output torch made. The weights' sizes tell the calls apart."""
    torch = pytest.importorskip("torch")
    from torch.profiler import profile

    functional = torch.nn.functional
    made: dict[int, tuple[int, int, int, int]] = {}  # weight numel: x, y numel, batch, positions
    with profile(record_shapes=True) as prof:
        grouped = {"stride": (1, 2), "padding": (2, 0), "dilation": (2, 1), "groups": 2}
        for xs, ws, kw in (
            ((2, 4, 17, 13), (6, 2, 3, 5), grouped),
            ((2, 8, 16, 16), (8, 1, 5, 5), {"stride": 2, "padding": 2, "groups": 8}),
            ((1, 3, 20), (5, 3, 4), {"stride": 3, "padding": 1, "dilation": 2}),
            ((1, 2, 6, 7, 8), (4, 2, 3, 3, 3), {"stride": 2, "padding": 1}),
        ):  # fmt: skip
            x, w = torch.randn(xs), torch.randn(ws, requires_grad=True)
            y = getattr(functional, f"conv{len(xs) - 2}d")(x, w, **kw)
            y.sum().backward()
            made[w.numel()] = (x.numel(), y.numel(), xs[0], math.prod(y.shape[2:]))
        x, w = torch.randn(2, 4, 7, 9), torch.randn(4, 3, 3, 3)
        y = functional.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)
        made[w.numel()] = (x.numel(), y.numel(), 2, 7 * 9)  # transposed: the input's positions
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    seen: Counter[str] = Counter()
    for op in load_trace(tmp_path / "trace.json").cpu_ops:
        if op.name not in CONVOLUTIONS:
            continue
        backward = op.name == "aten::convolution_backward"
        weight = op.inputs().dims[2 if backward else 1]
        x_numel, y_numel, batch, positions = made[math.prod(weight)]
        assert flops_of(op) == 2 * batch * math.prod(weight) * positions, op.name
        if backward:  # grad weight only: grad_output and the input read, grad weight written
            assert concrete_inputs(op)[10] == "[False, True, False]"
            moved = y_numel + x_numel + math.prod(weight)
        else:
            moved = x_numel + math.prod(weight) + y_numel
        assert bytes_of(op) == moved * FP32, op.name
        seen[op.name] += 1
    assert seen["aten::convolution"] == len(made) and seen["aten::convolution_backward"] == 4
    assert {"aten::mkldnn_convolution", "aten::slow_conv_dilated2d"} <= set(seen), seen


# -- the memo -------------------------------------------------------------------------------


def plain_cost(op: Op) -> OpCost:
    """What OpCosts memoizes, worked out afresh."""
    dtype = matmul_dtype(op.inputs(), op.name) if op.name in MATMULS else None
    return OpCost(flops_of(op), bytes_of(op), dtype)


def _op(name: str, args: dict[str, Any]) -> Op:
    return Op("cpu_op", name, 1, 1, 0.0, 1.0, json.dumps(args).encode(), 1.0)


def test_the_memo_keys_on_concrete_inputs_where_costs_depend_on_them() -> None:
    """Two calls alike but for is_causal (or beta) cost differently, memoized or not."""
    bshd = [2, 128, 4, 64]
    dims = {"Input Dims": [bshd] * 3 + [[]] * 7, "Input type": ["c10::BFloat16"] * 3 + [""] * 7}
    causal = ["", "", "", "", "", "128", "128", "0.", "True", "False"]
    plain = [*causal[:8], "False", "False"]
    name = "aten::_flash_attention_forward"
    ops = [_op(name, {**dims, "Concrete Inputs": c}) for c in (causal, plain, causal)]
    mm = {"Input Dims": [[8], [4, 6], [6, 8], [], []], "Input type": ["float"] * 3 + ["Scalar"] * 2}
    ops += [_op("aten::addmm", {**mm, "Concrete Inputs": ["", "", "", b, "1"]}) for b in "01"]
    expected = list(map(plain_cost, ops))
    assert expected[0].flops == expected[1].flops / 2 == expected[2].flops
    assert expected[3].bytes == expected[4].bytes - 8 * FP32
    assert OpCosts().many(ops) == expected
    costs = OpCosts()
    assert [costs(op) for op in ops] == expected
    assert costs.many(ops) == expected  # from the memo


@pytest.mark.parametrize(
    "path", sorted(FIXTURES.glob("*/trace.json.gz")), ids=lambda p: p.parent.name
)
def test_memoized_costs_are_the_plain_ones_on_the_recordings(path: Path) -> None:
    ops = load_trace(path).cpu_ops
    expected = list(map(plain_cost, ops))
    assert OpCosts().many(ops) == expected
    assert all(c.flops == 0 for op, c in zip(ops, expected, strict=True) if op.name not in FLOP_OPS)


def _schemas() -> dict[str, Any]:
    """torch's signature of each aten op (the overload the profiler records), by name."""
    torch = pytest.importorskip("torch")
    out: dict[str, Any] = {}
    for schema in torch._C._jit_get_all_schemas():
        if schema.overload_name in ("", "input", "output_mask") and schema.name.startswith(
            "aten::"
        ):
            out.setdefault(schema.name, schema)
    return out


def test_an_inductor_kernel_touches_each_buffer_once() -> None:
    """torch.compile's fused chain (fixtures/compiled): in_ptr0 read, out_ptr0 written,
    64 M floats each: 512 MiB, not the 768 an elementwise op's rule would give."""
    trace = load_trace(FIXTURES / "compiled" / "trace.json.gz")
    op = next(o for o in trace.cpu_ops if o.name.startswith("triton_poi_fused"))
    assert op_bytes(op.name, op.inputs()) == 2 * 64 * 2**20 * 4
