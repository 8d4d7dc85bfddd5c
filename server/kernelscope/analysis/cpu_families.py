"""Where a host-only call's CPU time goes, by op family (convolutions, matmuls, the
optimizer, ...): what its verdict names, and what it tries first."""

from __future__ import annotations

from kernelscope.analysis.ops import OpStat

#: Families by op name, first match wins: exact aten names, or a part of the name.
_MATMULS = frozenset(
    {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addmv", "aten::mv",
     "aten::dot", "aten::matmul", "aten::linear", "aten::addbmm"}
)  # fmt: skip
_PARTS = (
    ("convolutions", ("convolution", "aten::conv")),
    ("normalization", ("batch_norm", "layer_norm", "group_norm", "rms_norm")),
    ("the optimizer", ("Optimizer.", "_foreach_", "aten::_fused_ada", "aten::_fused_sgd")),
    ("attention", ("scaled_dot_product", "_flash_attention", "_efficient_attention")),
    ("pooling", ("pool",)),
    # LSTM on the CPU runs oneDNN's layer (mkldnn_rnn_layer), GRU and plain RNN aten's
    ("recurrent layers", ("aten::lstm", "aten::gru", "aten::rnn_", "rnn_layer", "_cudnn_rnn",
                          "_thnn_fused")),
)  # fmt: skip
#: A family under this share of the ops' CPU time goes into "other ops".
SHOWN = 0.05


def family_of(name: str) -> str:
    """The op family an op's name belongs to ("other ops" for none)."""
    if name in _MATMULS:
        return "matmuls"
    for family, parts in _PARTS:
        if any(part in name for part in parts):
            return family
    return "other ops"


def cpu_families(ops: list[OpStat]) -> list[tuple[str, float]]:
    """(family, its share of the ops' self CPU time), largest first; families under SHOWN
    lumped into "other ops", last."""
    total = sum(o.self_cpu_us for o in ops)
    if total <= 0:
        return []
    sums: dict[str, float] = {}
    for o in ops:
        family = family_of(o.name)
        sums[family] = sums.get(family, 0.0) + o.self_cpu_us
    shown = sorted(
        ((f, us / total) for f, us in sums.items() if f != "other ops" and us >= SHOWN * total),
        key=lambda fs: -fs[1],
    )
    rest = 1.0 - sum(share for _, share in shown)
    return [*shown, ("other ops", rest)] if rest >= 0.005 else shown


def cpu_tries(families: list[tuple[str, float]], threads: int | None) -> list[str]:
    """What to try first on the CPU, from the families that hold the time."""
    share = dict(families)
    tries: list[str] = []
    if share.get("convolutions", 0.0) >= 0.3:
        tries.append(
            "convolutions: channels_last (model and input .to(memory_format=torch."
            "channels_last)) runs oneDNN's convolutions without reordering the layout"
        )
    heavy = ("convolutions", "matmuls", "recurrent layers")
    if sum(share.get(family, 0.0) for family in heavy) >= 0.3:
        tries.append(
            "bf16 autocast on the CPU (torch.autocast('cpu', dtype=torch.bfloat16); oneDNN's "
            "LSTM layer too) where the CPU has AMX or AVX-512 BF16 (lscpu's amx_bf16, "
            "avx512_bf16)"
        )
    if share.get("the optimizer", 0.0) >= 0.15:
        tries.append("the optimizer: foreach=True or fused=True steps all parameters at once")
    if share.get("other ops", 0.0) + share.get("normalization", 0.0) >= 0.3:
        tries.append("torch.compile: Inductor's CPU code fuses the small ops between the large")
    if threads:
        tries.append(
            f"torch runs {threads} intra-op thread{'' if threads == 1 else 's'} here "
            "(torch.set_num_threads): as many as the physical cores free for this process"
        )
    return tries
