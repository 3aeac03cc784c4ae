"""The batching table: one rule per op name, like the VJP table in ``hlo.autodiff.table``.

A batched value always carries its batch dimension first (``[B, ...]``); an unbatched value is
the per-example value itself. A rule receives the op (of the traced per-example program), its
operands as Tracers of the trace being written and one flag per operand saying whether it is
batched, and returns the results with their flags. It is called only when some operand (or a
value its regions read) is batched; ops that read no batched value are copied unchanged.
Rules emit ops through ``hlo.autodiff.prims`` (no broadcasting or promotion: operands must
already agree); those ops carry the per-example op's source location.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Sequence, Tuple

from hlo.ir import Operation, TensorType

from ..autodiff import prims as P
from ..tracing.tracer import Tracer

Rule = Callable[["BatchContext", Operation, List[Tracer], List[bool]], Tuple[List[Tracer], List[bool]]]

RULES: Dict[str, Rule] = {}

# Rules of ops marked by custom_vjp / custom_jvp / checkpoint, by mark class (rules_custom).
MARK_RULES: Dict[type, Callable] = {}


def batch_rule(*names: str):
    """Register the decorated function as the batching rule of each op in ``names``."""
    def register(fn: Rule) -> Rule:
        for n in names:
            if n in RULES:
                raise ValueError(f"batching rule for '{n}' is defined twice")
            RULES[n] = fn
        return fn
    return register


class BatchContext:
    """What a rule may need besides its operands: the batch size and the environment of values
    (``env.get(value) -> (Tracer, batched)``) for ops whose regions read enclosing values."""

    __slots__ = ("size", "env")

    def __init__(self, size: int, env):
        self.size = size
        self.env = env


def btype(t: TensorType, size: int) -> TensorType:
    """The batched version of a per-example type."""
    return TensorType((size,) + tuple(t.shape), t.dtype)


def batched(x: Tracer, is_batched: bool, size: int) -> Tracer:
    """``x`` with a leading batch dimension (broadcast along it when unbatched)."""
    if is_batched:
        return x
    return P.broadcast_in_dim(x, (size,) + x.shape, range(1, x.ndim + 1))


def to_shape(x: Tracer, shape) -> Tracer:
    """A batched ``x`` of shape ``[B]`` (a per-example scalar) broadcast to ``[B, *shape]``."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    return P.broadcast_in_dim(x, shape, [0])


def move_axis(x: Tracer, src: int, dst: int) -> Tracer:
    src, dst = src % x.ndim, dst % x.ndim
    if src == dst:
        return x
    perm = [d for d in range(x.ndim) if d != src]
    perm.insert(dst, src)
    return P.transpose(x, perm)


def shift(dims: Sequence[int], by: int = 1) -> List[int]:
    return [int(d) + by for d in dims]


def all_batched(args: Sequence[Tracer], bat: Sequence[bool], size: int) -> List[Tracer]:
    return [batched(a, b, size) for a, b in zip(args, bat)]
