"""FLOPs and bytes of one op call, by its family, and a memo of them per signature."""

from __future__ import annotations

from itertools import compress
from operator import attrgetter, methodcaller
from typing import Any, NamedTuple

import msgspec

from kernelscope.analysis.costs.attention import (
    ATTENTION,
    ATTENTION_ARGS,
    TEMPLATE_KERNEL_PREFIX,
    attention_costs,
    flex_attention_flops,
)
from kernelscope.analysis.costs.convolutions import (
    CONV_BACKWARD,
    CONV_FORWARD,
    CONVOLUTIONS,
    conv_backward_costs,
    conv_costs,
)
from kernelscope.analysis.costs.elementwise import (
    DATA_DEPENDENT,
    GENERATED_KERNEL_PREFIX,
    elementwise_bytes,
    elementwise_footprint,
    held_bytes,
)
from kernelscope.analysis.costs.generated import inductor_estimate, template_matmul_flops
from kernelscope.analysis.costs.movement import MOVEMENT, movement_bytes
from kernelscope.analysis.costs.normalization import (
    LAYER_NORM_BACKWARD,
    layer_norm_backward_reread,
)
from kernelscope.analysis.costs.pooling import (
    POOL_BACKWARD,
    POOL_FORWARD,
    pool_backward_bytes,
    pool_forward_bytes,
)
from kernelscope.analysis.costs.products import (
    MATMULS,
    MATVECS,
    PRODUCTS,
    matmul_dtype,
    product_costs,
)
from kernelscope.analysis.costs.tensors import by_position, concrete_inputs, tensors
from kernelscope.analysis.trace_model import Op, OpInputs

FLOP_OPS = MATMULS | MATVECS | CONVOLUTIONS | ATTENTION
#: Ops whose FLOPs or bytes depend on their ``Concrete Inputs`` (strides, is_causal, beta,
#: out_dtype ...) or ``Input Strides`` (a broadcast source): the memo key holds those too.
BY_CONCRETE = (
    CONVOLUTIONS
    | ATTENTION
    | MOVEMENT
    | frozenset(n for n, p in PRODUCTS.items() if p.added >= 0 or p.out_dtype >= 0)
    | POOL_FORWARD
    | {LAYER_NORM_BACKWARD}
)
_ABSENT = msgspec.Raw(b"")  # not valid JSON: no field's raw text equals it
_SEPARATOR = b"\0"  # nor does any hold a NUL byte: joined, they are told apart
_CONCRETE_MARK = b"\x01"  # nor start with this
_ENCODE = methodcaller("encode", "utf-8", "surrogatepass")  # any str, one to one
_NAME = attrgetter("name")


def flops_of(op: Op) -> float:
    """FLOPs of one recorded call of `op` (a compiled flex_attention's: the high end; another
    Inductor kernel's: Inductor's own estimate, else a template's matrix product)."""
    if op.name.startswith(GENERATED_KERNEL_PREFIX):
        return _generated_flops(op)
    if op.name not in FLOP_OPS:
        return 0.0
    return op_flops(op.name, op.inputs(), concrete_inputs(op) if op.name in BY_CONCRETE else [])


def bytes_of(op: Op) -> float:
    """Bytes one recorded call of `op` moves through memory (an Inductor kernel's: Inductor's
    own estimate where its record has one, at most each buffer read and written once)."""
    shaped = op_bytes(op.name, op.inputs(), concrete_inputs(op) if op.name in BY_CONCRETE else [])
    own = _inductor_bytes(op)
    # a generated kernel's shaped bytes count each buffer once; one updated in place
    # (``in_out_ptr``) is read and written, which only Inductor's own count says
    return min(own, 2 * shaped) if own and shaped else own or shaped


def _inductor_bytes(op: Op) -> float:
    """Inductor's estimate of an Inductor kernel's bytes; 0 where its record has none. It was
    worked out at compile time, for one size of a kernel compiled for many (dynamic shapes),
    so the buffers' sizes bound it."""
    if not op.name.startswith(GENERATED_KERNEL_PREFIX):
        return 0.0
    own = inductor_estimate(op.args)
    return own[1] if own is not None else 0.0


def _generated_flops(op: Op) -> float:
    """FLOPs of an Inductor kernel: a flex_attention's from its shapes (the block mask's
    density is applied later), else a matrix-product template's from its buffers, else
    Inductor's estimate (worked out at compile time)."""
    args = tensors(op.inputs())
    flex = flex_attention_flops(op.name, args)
    if flex is not None:
        return flex[1]
    shaped = template_matmul_flops(op.name, args)
    if shaped > 0:
        return shaped
    own = inductor_estimate(op.args)
    return own[0] if own is not None else 0.0


def op_flops(name: str, inputs: OpInputs, concrete: list[Any] | None = None) -> float:
    """Floating-point operations of one call; 0 when the op or its shapes are not known."""
    if name not in FLOP_OPS:
        return 0.0
    costs = _costs(name, inputs, concrete or [])
    return costs[0] if costs else 0.0


def op_bytes(name: str, inputs: OpInputs, concrete: list[Any] | None = None) -> float:
    """Bytes one call moves through memory, by its family's model (products, convolutions
    and attention; copies, fills and gathers; elementwise ops and reductions)."""
    costs = _costs(name, inputs, concrete or []) if name in FLOP_OPS else None
    if costs:
        return costs[1]
    if name in MOVEMENT:
        args = by_position(inputs)
        try:
            return movement_bytes(name, args, inputs.strides, concrete or []) if args else 0.0
        except (IndexError, ValueError, OverflowError):
            return 0.0
    args = by_position(inputs) or []
    if name in POOL_BACKWARD:
        return pool_backward_bytes(args)
    if name in POOL_FORWARD and (pooled := pool_forward_bytes(name, args, concrete or [])):
        return pooled
    once = elementwise_bytes(name, tensors(inputs), held_bytes(args, inputs.strides))
    if name == LAYER_NORM_BACKWARD:
        return once + layer_norm_backward_reread(args, concrete or [])
    return once


def footprint_of(op: Op) -> float:
    """Distinct bytes one call of `op` touches (its working set): its bytes, but an in-place
    op's tensor once, though it is read and written."""
    name = op.name
    if name in FLOP_OPS or name in MOVEMENT or name in POOL_BACKWARD or name in POOL_FORWARD:
        return bytes_of(op)
    inputs = op.inputs()
    held = held_bytes(by_position(inputs) or [], inputs.strides)
    buffers = elementwise_footprint(op.name, tensors(inputs), held)
    return min(bytes_of(op), buffers) if from_inductor(op) else buffers


def from_inductor(op: Op) -> bool:
    """Whether an op's bytes are Inductor's own estimate (``bytes_of``)."""
    own = _inductor_bytes(op)
    return own > 0 and bytes_of(op) == own


def has_model(name: str) -> bool:
    """Whether an op's bytes come from a model of its family. Others (custom ops, ATen ops
    whose traffic depends on the data, such as ``index`` or ``nonzero``) get the generic
    rule, a guess: rows of them say their estimate is unreliable."""
    return (
        name in FLOP_OPS
        or name in MOVEMENT
        or name.startswith(GENERATED_KERNEL_PREFIX)
        or (name.startswith("aten::") and name not in DATA_DEPENDENT)
    )


def _costs(name: str, inputs: OpInputs, concrete: list[Any]) -> tuple[float, float] | None:
    """(FLOPs, bytes) of an op of FLOP_OPS; None when its shapes do not fit its signature."""
    args = by_position(inputs)
    if args is None:
        return (0.0, 0.0)
    try:
        if name in PRODUCTS:
            return product_costs(name, args, concrete)
        if name in CONV_FORWARD:
            return conv_costs(CONV_FORWARD[name], args, concrete)
        if name in CONV_BACKWARD:
            return conv_backward_costs(*CONV_BACKWARD[name], args, concrete)
        if name in ATTENTION_ARGS:
            return attention_costs(ATTENTION_ARGS[name], args, concrete)
    except (IndexError, ValueError, OverflowError):
        pass
    return None


class OpCost(NamedTuple):
    """What one call of an op costs: ``flops_of``, ``bytes_of`` and, for matmuls,
    ``matmul_dtype``."""

    flops: float
    bytes: float
    dtype: str | None


class _Shapes(msgspec.Struct, gc=False):
    """The args that an op's FLOPs and bytes depend on, undecoded: the memo key (with an
    Inductor kernel's own estimate, which its shapes do not fix: kernel names repeat across
    compiled graphs)."""

    dims: msgspec.Raw = msgspec.field(default=_ABSENT, name="Input Dims")
    types: msgspec.Raw = msgspec.field(default=_ABSENT, name="Input type")
    strides: msgspec.Raw = msgspec.field(default=_ABSENT, name="Input Strides")
    flop: msgspec.Raw = msgspec.field(default=_ABSENT, name="kernel_flop")
    num_gb: msgspec.Raw = msgspec.field(default=_ABSENT, name="kernel_num_gb")


class _ConcreteShapes(_Shapes, gc=False):
    """Those of an op of BY_CONCRETE, whose costs also depend on ``Concrete Inputs``."""

    concrete: msgspec.Raw = msgspec.field(default=_ABSENT, name="Concrete Inputs")


_SHAPES = msgspec.json.Decoder(_Shapes)
_CONCRETE_SHAPES = msgspec.json.Decoder(_ConcreteShapes)
_MANY_SHAPES = msgspec.json.Decoder(list[_ConcreteShapes])


class OpCosts:
    """``OpCost`` of ops, worked out once per distinct signature: the op's name and the raw
    JSON of its ``Input Dims``, ``Input type``, ``Input Strides`` (an expanded input is read
    once) and, for ops of BY_CONCRETE, ``Concrete Inputs``: all that the costs depend on.
    The ops of a trace repeat a few signatures per step; their other args (``External id``,
    ``Ev Idx`` ...) differ. Keep one per trace or analysis."""

    def __init__(self) -> None:
        self._memo: dict[bytes, OpCost] = {}

    def __call__(self, op: Op) -> OpCost:
        name = op.name
        try:
            if name in BY_CONCRETE:
                key = _concrete_key(_CONCRETE_SHAPES.decode(op.args), name)
            else:
                key = _key(_SHAPES.decode(op.args), name)
        except msgspec.MsgspecError:
            return _cost(op)  # args that are not a JSON object: nothing to key on
        cost = self._memo.get(key)
        if cost is None:
            cost = self._memo[key] = _cost(op)
        return cost

    def signatures(self, ops: list[Op]) -> list[bytes] | None:
        """Each op's signature, all that its costs depend on (its name and the raw JSON of
        its shapes, dtypes, strides and, for BY_CONCRETE, Concrete Inputs): one decode for all. None
        when an op's args are malformed."""
        try:  # all args as one JSON array: one call into the decoder
            all_shapes = _MANY_SHAPES.decode(b"[%b]" % b",".join([op.args for op in ops]))
        except msgspec.MsgspecError:
            return None
        names = list(map(_NAME, ops))
        keys = list(map(_key, all_shapes, names))
        if not BY_CONCRETE.isdisjoint(names):
            for i in compress(range(len(names)), map(BY_CONCRETE.__contains__, names)):
                keys[i] = _concrete_key(all_shapes[i], names[i])
        return keys

    def many(self, ops: list[Op]) -> list[OpCost]:
        """``OpCost`` of each op, as calling this on each gives: one decode for all, and no
        Python code run per op but for those of BY_CONCRETE."""
        keys = self.signatures(ops)
        if keys is None:
            return [self(op) for op in ops]  # one op's args are malformed: find which
        memo = self._memo
        for key, op in dict(zip(keys, ops, strict=True)).items():  # one op of each signature
            if key not in memo:
                memo[key] = _cost(op)
        return list(map(memo.__getitem__, keys))


def _key(shapes: _Shapes, name: str) -> bytes:
    """The memo key of an op not of BY_CONCRETE: its shapes', dtypes' and strides' raw JSON
    and its name (and an Inductor kernel's own estimate), NUL-separated."""
    head = (shapes.dims, shapes.types, shapes.strides)
    if shapes.flop is _ABSENT and shapes.num_gb is _ABSENT:
        return _SEPARATOR.join((*head, _ENCODE(name)))
    return _SEPARATOR.join((*head, shapes.flop, shapes.num_gb, _ENCODE(name)))


def _concrete_key(shapes: _ConcreteShapes, name: str) -> bytes:
    """The memo key of an op of BY_CONCRETE. Keys are the raw JSON values (which hold no NUL
    and start with no \\x01) and the name, NUL-separated: they are told apart."""
    return _CONCRETE_MARK + _SEPARATOR.join(
        (shapes.dims, shapes.types, shapes.concrete, shapes.strides, _ENCODE(name))
    )


def flops_range(op: Op) -> tuple[float, float] | None:
    """(low, high) FLOPs of a call whose count the trace cannot pin down (a compiled
    flex_attention: its block mask's density is unknown); None for others."""
    if not op.name.startswith(TEMPLATE_KERNEL_PREFIX):
        return None
    return flex_attention_flops(op.name, tensors(op.inputs()))


def _cost(op: Op) -> OpCost:
    inputs = op.inputs()
    name = op.name
    if name.startswith(GENERATED_KERNEL_PREFIX):
        return OpCost(flops_of(op), bytes_of(op), None)
    concrete = concrete_inputs(op) if name in BY_CONCRETE else []
    flops = op_flops(name, inputs, concrete) if name in FLOP_OPS else 0.0
    dtype = matmul_dtype(inputs, name) if name in MATMULS else None
    return OpCost(flops, op_bytes(name, inputs, concrete), dtype)
