"""KS701's causes (analysis/checks/below_roof.py) name only what the row's own numbers
support: TF32 for an fp32 GEMM or convolution whose FLOPs bound it, not for a memory-type
one (pytorch/examples' dcgan: its discriminator's last convolution, 16 dot products of 8,192
elements, 30.7 µs at 1 % of HBM on an H100, read "TF32 tensor cores are off" first)."""

from __future__ import annotations

from typing import cast

from kernelscope.analysis.checks.below_roof import _slow_causes  # pyright: ignore[reportPrivateUsage]
from kernelscope.analysis.facts import Facts
from kernelscope.analysis.roofline import OpRoof


def row(bound: str, efficiency: float) -> OpRoof:
    return OpRoof(
        "aten::cudnn_convolution", "conv", bound, 30.7, 0.22, 1.0, 1.0, 30.7,
        shapes="16×512×4×4 · 1×512×4×4", dtype="float", efficiency=efficiency, grid_blocks=56,
    )  # fmt: skip


def test_a_memory_type_fp32_convolution_is_not_told_to_turn_tf32_on() -> None:
    causes, tries = _slow_causes(cast(Facts, None), row("memory", 0.01), 132)
    assert causes == ["its kernel's grid has 56 blocks for 132 SMs"], causes
    assert not any("tf32" in t for t in tries), tries


def test_a_compute_type_fp32_convolution_is() -> None:
    causes, tries = _slow_causes(cast(Facts, None), row("compute", 0.2), 132)
    assert causes[0] == "fp32 math on CUDA cores: TF32 tensor cores are off", causes
    assert tries[0].startswith("torch.backends.cuda.matmul.allow_tf32 = True"), tries
