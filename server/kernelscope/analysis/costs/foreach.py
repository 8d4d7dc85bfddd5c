"""Ops over lists of tensors (``torch._foreach_*``: an optimizer's step), which ATen runs as
``multi_tensor_apply_kernel<…, XFunctor<T, depth, r_args_depth, res_arg_index>, …>``: each
element of the ``r_args_depth`` lists it reads is read once and one list is written, in
element type ``T``.

The elements: the listed tensors' shapes where the trace has them (Kineto records a tensor
list's shapes only while it is short: train_mlp's 8 tensors, not ViT's or GPT-NeoX's ~80);
else, in a live run, the optimizer's list whose chunks (at most 65,536 elements of one
tensor each: ATen's ``kChunkSize``, one kernel block each) are the op's kernels' blocks
(worker/program/optimizers.py counts the lists of the optimizers that step in the cold
call; GPT-NeoX's AdamW: 76 tensors, 70,557,696 elements, 1126 chunks, and every foreach op
of its step ran 1126 blocks); else, in a trace with shapes (a raw one), the gradients autograd
accumulated in the first step, one ``torch::autograd::AccumulateGrad`` per parameter with its
shape, as one list per dtype, where its chunks are the op's blocks (ResNet-18's SGD: 62
tensors, 11,689,512 elements, as the live count); else the grids, a bound that counts each
tensor's last chunk as full (GPT-NeoX: 73.8 M elements against its 70.6 M parameters).

A list passed twice is read once from memory: torch.optim's Adam, AdamW, NAdam, RAdam,
RMSprop and Adadelta decay a state and square their gradients into it,
``_foreach_mul_(state, beta)`` then ``_foreach_addcmul_(state, g, g, 1 - beta)``, whose
kernel reads ``g`` twice in the same thread, the second time from cache (GPT-NeoX's AdamW:
Nsight Compute measured it as its ``lerp_``, 3 lists, not 4). The trace holds no tensor
identities, so the squaring is known by that pair: NAdam's and RAdam's other
``_foreach_addcmul_`` (of three lists) follow other ops, and Adam's with a tensor ``beta2``
follows the gradients' scaled copy. The pair holds for a user's optimizer too (a subclass of
one of those); Adagrad squares with no decay before it, known by its class, from the range
torch.optim opens around each step (``Optimizer.step#Adagrad.step``), and the optimizers of
torch.optim that never square (SGD, ASGD, Rprop, Adamax ...) are known the same way.

torch.optim's fused steps (``fused=True``: ``_fused_adamw_`` and kin) run one multi-tensor
kernel whose functor (``FusedAdamMathFunctor<float, 4, …>``) reads its ``depth`` lists and
writes back all but the gradients (params first, gradients second, then the states), and the
gradients too when a GradScaler passed its scale (ATen's ``fused_adam_utils.cuh``). Nsight
Compute on the H200 (fixtures/adamw_fused*): 940.1 MB for 33.57 M fp32 parameters, 28 B each;
1074 MB, 32 B each, under a GradScaler. AMP's unscale of those gradients
(``_amp_foreach_non_finite_check_and_unscale_``) is a one-list foreach: 269 MB, 8 B each."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, cast

from kernelscope.analysis.costs.tensors import DTYPE_BYTES, numel, tensors
from kernelscope.analysis.trace_model import USER_ANNOTATION, Op, OpInputs

FOREACH_PREFIX = "aten::_foreach_"
MULTI_TENSOR_KERNEL = "multi_tensor_apply_kernel"
CHUNK_ELEMENTS = 65536
_FUNCTOR = re.compile(r"(\w+Functor)<([\w:]+), (\d+), (\d+), (\d+)>")
_MAX_ELEMENTS = 1 << 62  # beyond any memory: a corrupt shape
#: The range torch.optim opens around each step: ``Optimizer.step#<class>.step``.
OPTIMIZER_STEP = "Optimizer.step#"
SQUARE_INTO = "aten::_foreach_addcmul_"
#: The decay of the state the gradients are squared into, just before (torch.optim's Adam,
#: AdamW, NAdam, RAdam, RMSprop, Adadelta).
DECAY = "aten::_foreach_mul_"
#: torch.optim's optimizers that square with no decay before (``addcmul_(sums, g, g)``).
SQUARING_OPTIMIZERS = frozenset({"Adagrad"})
#: torch.optim's optimizers whose ``_foreach_addcmul_`` never squares.
NEVER_SQUARING = frozenset({"SGD", "ASGD", "Adamax", "Rprop", "LBFGS", "SparseAdam"})
#: torch.optim's fused steps: one multi-tensor kernel over all their lists.
FUSED_STEPS = frozenset(
    {"aten::_fused_adam_", "aten::_fused_adamw_", "aten::_fused_sgd_", "aten::_fused_adagrad_"}
)
#: Ops that show an optimizer keeps 0-d tensors on the device, whose foreach ops run a block
#: per tensor: a capturable Adam's (NAdam's, RAdam's, Adamax's) bias corrections,
#: ``_foreach_pow(beta, state_steps)``, and a fused step's state steps.
DEVICE_STEPS = frozenset({"aten::_foreach_pow"}) | FUSED_STEPS
#: AMP's unscale of a GradScaler's gradients: a foreach op by another name (one list).
AMP_UNSCALE = "aten::_amp_foreach_non_finite_check_and_unscale_"
#: An optimizer's tensor list as the worker counted it: (tensors, elements, chunks, dtype).
ListSize = tuple[int, int, int, str]
#: The op autograd runs to add one parameter's gradient: its input is the gradient.
ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"


def gradient_lists(ops: Sequence[Op], start: float, end: float) -> list[ListSize]:
    """The gradients autograd accumulated between `start` and `end` (one step: one
    AccumulateGrad per parameter, with its shape), per dtype, as lists: all of them, and
    where both are there, the matrices and the vectors apart (the usual two parameter
    groups, weight decay on the matrices only: nanoGPT's, timm's, transformers' Trainer's;
    each group's step runs its own ops). Empty without shapes. With gradient accumulation
    each parameter comes once per micro-batch: the chunks are then a multiple of the step's
    ops' blocks, and match none of them."""
    sizes: dict[str, list[tuple[int, bool]]] = {}
    for op in ops:
        if op.name != ACCUMULATE_GRAD or not start <= op.ts <= end:
            continue
        gradient = tensors(op.inputs())[:1]  # none where the shape is corrupt
        dtype = _TORCH_DTYPES.get(gradient[0][1]) if gradient else None
        if dtype is not None:
            shape = gradient[0][0]
            sizes.setdefault(dtype, []).append((numel(shape), len(shape) >= 2))
    out: list[ListSize] = []
    for dtype, found in sizes.items():
        matrices = [n for n, matrix in found if matrix]
        vectors = [n for n, matrix in found if not matrix]
        groups = [[n for n, _ in found]] + ([matrices, vectors] if matrices and vectors else [])
        out += [_list_size(ns, dtype) for ns in groups]
    return out


def _list_size(sizes: list[int], dtype: str) -> ListSize:
    return len(sizes), sum(sizes), sum(-(-n // CHUNK_ELEMENTS) for n in sizes), dtype


#: The kernels' element types by torch's names of them (an optimizer's lists' dtypes).
_TORCH_DTYPES = {
    "double": "float64",
    "float": "float32",
    "c10::Half": "float16",
    "c10::BFloat16": "bfloat16",
}
_FUSED_FUNCTOR = re.compile(r"Fused\w*MathFunctor<([\w:]+),\s*(\d+)")


def is_multi_tensor_op(name: str) -> bool:
    """A foreach op or a fused optimizer step: lists of tensors, one multi-tensor kernel."""
    return name.startswith(FOREACH_PREFIX) or name in FUSED_STEPS or name == AMP_UNSCALE


def writes_gradients(inputs: OpInputs) -> bool:
    """Whether a fused step was passed a GradScaler's scale (its second-to-last argument,
    ``grad_scale``, a tensor): its kernel then writes the unscaled gradients back."""
    types = inputs.types
    return len(types) >= 2 and types[-2] in DTYPE_BYTES


def bytes_per_element(kernel: str, repeated: int = 0, grads_written: bool = False) -> int:
    """Bytes a multi-tensor kernel moves per element of a list: each list it reads (less
    the `repeated` ones it was passed twice) and the one it writes (a fused step's: all
    but the gradients, unless `grads_written`); 0 where its name does not say."""
    functor = _functor(kernel) if MULTI_TENSOR_KERNEL in kernel else None
    if functor is None:
        return 0
    fused, element, lists = functor
    width = DTYPE_BYTES.get(element, 0)
    if fused:
        return width * (2 * lists - (0 if grads_written else 1))
    return width * (max(lists - repeated, 1) + 1)


def _functor(kernel: str) -> tuple[bool, str, int] | None:
    """A multi-tensor kernel's functor as its name gives it: whether a fused step's, its
    element type (as C++ names it) and the lists it reads (a fused step's ``depth``); None
    where the name has none."""
    fused = _FUSED_FUNCTOR.search(kernel)
    if fused:
        return True, fused.group(1), int(fused.group(2))
    match = _FUNCTOR.search(kernel)
    return (False, match.group(2), int(match.group(4))) if match else None


def repeated_lists(ops: list[Op], op: Op) -> int:
    """How many of the lists a foreach op reads were passed to it twice: 1 for a
    ``_foreach_addcmul_`` in an optimizer's step that squares its gradients (right after
    the state's decay, ``DECAY``, on its thread; or in a step of SQUARING_OPTIMIZERS), else
    0. Outside an optimizer's step, 0."""
    if op.name != SQUARE_INTO:
        return 0
    i = op.parent
    while i >= 0:
        outer = ops[i]
        if outer.cat == USER_ANNOTATION and outer.name.startswith(OPTIMIZER_STEP):
            optimizer = outer.name[len(OPTIMIZER_STEP) :].split(".", 1)[0]
            if optimizer in SQUARING_OPTIMIZERS:
                return 1
            if optimizer in NEVER_SQUARING:
                return 0
            before = (ops[k] for k in range(op.index - 1, outer.index, -1))
            last = next((o for o in before if o.tid == op.tid and is_multi_tensor_op(o.name)), None)
            return 1 if last is not None and last.name == DECAY else 0
        i = outer.parent
    return 0


def listed_elements(inputs: OpInputs) -> int:
    """Elements of the op's first tensor list, from its shapes; 0 where the trace has none."""
    first: object = inputs.dims[0] if inputs.dims else None
    if not isinstance(first, list) or not first:
        return 0
    total = 0
    for shape in cast(list[Any], first):
        sizes = cast(list[object], shape) if isinstance(shape, list) else None
        if sizes is None or not all(type(d) is int and d >= 0 for d in sizes):
            return 0
        total += numel(cast(list[int], sizes))
    return total if total <= _MAX_ELEMENTS else 0


def device_steps(ops: Sequence[Op]) -> bool:
    """Whether an optimizer in `ops` keeps 0-d tensors on the device (DEVICE_STEPS)."""
    return any(op.name in DEVICE_STEPS for op in ops)


def foreach_bytes(
    inputs: OpInputs,
    kernel: str,
    blocks: int,
    repeated: int = 0,
    lists: Sequence[ListSize] = (),
    zero_d: bool = True,
) -> tuple[float, bool]:
    """Bytes one call of a foreach op or a fused step moves (`repeated`: lists it was passed
    twice), and whether they are exact (the lists' shapes, or the one list of `lists` whose
    chunks are its kernels' `blocks`) rather than a bound (the grids); (0, True) where
    unknown. `zero_d`: whether 0-d lists may run on the device (list_elements)."""
    per = bytes_per_element(kernel, repeated, writes_gradients(inputs))
    if not per:
        return 0.0, True
    exact = listed_elements(inputs) or list_elements(lists, blocks, kernel_dtype(kernel), zero_d)
    if exact:
        return float(exact * per), True
    return float(blocks * CHUNK_ELEMENTS * per), False


def list_elements(
    lists: Sequence[ListSize], blocks: int, dtype: str = "", zero_d: bool = True
) -> int:
    """The elements of the optimizer's list (tensors, elements, chunks, dtype) of the
    kernel's `dtype` (any, where "") whose chunks are an op's `blocks`, where one is (lists
    of different elements with the same chunks: none). Where 0-d lists may run on the
    device (`zero_d`: device_steps) and any list has as many tensors as the blocks, none
    either: an op over that many 0-d tensors (a step's counters, or a capturable Adam's bias
    corrections, `_foreach_mul(bias_correction2_sqrt, step_size)`: two lists) would run as
    many blocks, and the blocks cannot tell them apart. A group of vectors each under a
    chunk has as many chunks as tensors: its ops are exact only where no 0-d list runs
    (timm's ConvNeXt-V2 under AdamW: 113 vectors, 73,880 elements, where the grids' bound
    counted 113 whole chunks, 7.4 M)."""
    if zero_d and any(tensors == blocks for tensors, _, _, _ in lists):
        return 0
    found = {
        elements
        for _, elements, chunks, of in lists
        if chunks == blocks and (not dtype or of == dtype)
    }
    return found.pop() if len(found) == 1 else 0


def kernel_dtype(kernel: str) -> str:
    """The element type a multi-tensor kernel's name gives, as torch names it (``float32``);
    "" where it does not say or torch has no such name here."""
    functor = _functor(kernel)
    return _TORCH_DTYPES.get(functor[1], "") if functor else ""
