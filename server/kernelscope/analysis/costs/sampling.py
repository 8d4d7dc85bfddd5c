"""Grid sampling (``grid_sample``): a gather at computed positions. No FLOPs are counted;
the bytes are what the kernel touches:

- the forward reads the grid, and per output point and channel the input elements its
  interpolation weighs (bilinear 4, trilinear 8, nearest 1, bicubic 16; at most the whole
  input), and writes the output;
- the backward reads the output's gradient, the grid and those input elements (the grid's
  gradient weighs them) and writes the grid's gradient; ATen's adds into as many elements of
  the input's gradient (a read and a write each; its zeroing is an op of its own), and none
  where ``output_mask`` asks for no input gradient; cuDNN's writes the input's gradient
  whole (``cudnnSpatialTfSamplerBackward`` with beta 0 into an empty tensor).

The input is never counted whole: RAFT's correlation lookup samples a 7×7 window per pixel
from a 46×62 pyramid level (11,408 maps), 8.9 MB of a 130 MB input; counted whole, its row
read 383 % of the L2 roof on the H200 (docs/h200-run/unseen/fourth_2026-12-03.txt).
"""

from __future__ import annotations

from typing import Any

from kernelscope.analysis.costs.tensors import (
    DTYPE_BYTES,
    FLAGS,
    Tensor,
    arg_at,
    concrete_ints,
    concrete_value,
    numel,
    size_of,
)

#: (input, grid, interpolation mode) positions of each op's arguments; the mode is None
#: where the op has only one (cuDNN's: bilinear).
SAMPLERS: dict[str, tuple[int, int, int | None]] = {
    "aten::grid_sampler": (0, 1, 2),
    "aten::grid_sampler_2d": (0, 1, 2),
    "aten::grid_sampler_3d": (0, 1, 2),
    "aten::cudnn_grid_sampler": (0, 1, None),
}
#: (grad_output, input, grid, interpolation mode, output_mask) of the backward ops.
SAMPLERS_BACKWARD: dict[str, tuple[int, int, int, int | None, int | None]] = {
    "aten::grid_sampler_2d_backward": (0, 1, 2, 3, 6),
    "aten::grid_sampler_3d_backward": (0, 1, 2, 3, 6),
    "aten::cudnn_grid_sampler_backward": (2, 0, 1, None, None),
}
SAMPLING = frozenset(SAMPLERS) | frozenset(SAMPLERS_BACKWARD)
_BILINEAR, _NEAREST, _BICUBIC = 0, 1, 2


def sampling_bytes(name: str, args: list[Tensor | None], concrete: list[Any]) -> float:
    """Bytes one call of a SAMPLING op reads and writes."""
    at_mask = None
    if name in SAMPLERS:
        at_input, at_grid, at_mode = SAMPLERS[name]
        at_grad = None
    else:
        at_grad, at_input, at_grid, at_mode, at_mask = SAMPLERS_BACKWARD[name]
    source, grid = arg_at(args, at_input), arg_at(args, at_grid)
    if source is None or grid is None or len(source[0]) < 2 or len(grid[0]) < 2:
        return 0.0
    mode = concrete_ints(concrete, at_mode) if at_mode is not None else []
    spatial = len(grid[0]) - 2  # (N, H, W, 2) or (N, D, H, W, 3)
    weighed = _corners(mode[0] if len(mode) == 1 else _BILINEAR, spatial)
    width = DTYPE_BYTES[source[1]]
    channels = source[0][1]
    points = numel(grid[0][:-1])  # one output point per grid position
    touched = min(points * channels * weighed, numel(source[0])) * width
    if at_grad is None:
        return float(size_of(grid) + touched + points * channels * width)
    read = size_of(arg_at(args, at_grad)) + 2 * size_of(grid) + touched  # grid grad written
    if name == "aten::cudnn_grid_sampler_backward":
        return float(read + size_of(source))
    mask = FLAGS.findall(concrete_value(concrete, at_mask)) if at_mask is not None else []
    wants_input = not mask or mask[0] == "True"
    return float(read + (2 * touched if wants_input else 0))


def _corners(mode: int, spatial: int) -> int:
    """Input elements one output point weighs per channel."""
    if mode == _NEAREST:
        return 1
    if mode == _BICUBIC:
        return 16
    return 2**spatial
