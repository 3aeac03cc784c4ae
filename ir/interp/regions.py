"""Running scalar region bodies (reduce, reduce_window, scatter, sort comparators) on many
elements at once, and recognizing bodies that are a single well-known op."""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from .. import ops as op_table
from ..core import Region


def apply_body(it, body: Region, args: Sequence[np.ndarray], env, shape) -> List[np.ndarray]:
    """``body`` applied elementwise to ``args`` (arrays broadcastable to ``shape``): on whole
    arrays when the body is elementwise, otherwise element by element."""
    shape = tuple(shape)
    if it.batchable(body):
        return it.eval_region_batched(body, list(args), env, shape)
    bargs = [np.broadcast_to(a, shape) for a in args]
    out = [np.empty(shape, t.np_dtype) for t in body.output_types]
    for idx in np.ndindex(*shape):
        res = it.eval_region(body, [np.asarray(a[idx]) for a in bargs], env)
        for o, r in zip(out, res):
            o[idx] = r
    return out


def tree_reduce(combine, xs: List[np.ndarray]) -> Optional[List[np.ndarray]]:
    """Reduce the last axis of ``xs`` (variadic, same shapes) by a balanced binary tree whose
    in-order traversal is the elements in order: adjacent pairs are combined level by level
    (an odd element out waits at the end). ``combine(lhs_list, rhs_list)`` is vectorized.
    Returns None for an empty axis."""
    n = xs[0].shape[-1]
    if n == 0:
        return None
    while n > 1:
        h = n // 2
        lhs = [x[..., 0:2 * h:2] for x in xs]
        rhs = [x[..., 1:2 * h:2] for x in xs]
        ys = combine(lhs, rhs)
        if n % 2:
            ys = [np.concatenate([y, x[..., n - 1:]], axis=-1) for y, x in zip(ys, xs)]
        xs = ys
        n = xs[0].shape[-1]
    return [x[..., 0] for x in xs]


_COMMUTATIVE = op_table.with_trait(op_table.COMMUTATIVE)
# The commutative ops as numpy ufuncs on integers and on pred (reduce's and scatter's fast paths
# for a body that is one such op).
INT_UFUNCS = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum,
              "minimum": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
              "xor": np.bitwise_xor}
BOOL_UFUNCS = {"add": np.logical_or, "multiply": np.logical_and, "maximum": np.logical_or,
               "minimum": np.logical_and, "and": np.logical_and, "or": np.logical_or,
               "xor": np.logical_xor}


def single_op_body(body: Region) -> Optional[str]:
    """The op name when ``body`` is ``return(op(arg0, arg1))`` (either operand order) for a
    commutative op on two scalars of one type, else None."""
    if len(body.args) != 2 or len(body.ops) != 1 or len(body.outputs) != 1:
        return None
    op = body.ops[0]
    if op.name not in _COMMUTATIVE or len(op.operands) != 2 or op.regions:
        return None
    a, b = body.args
    x, y = op.operands
    if not ((x is a and y is b) or (x is b and y is a)):
        return None
    if body.outputs[0] is not op.results[0]:
        return None
    t = a.type.without_layout()
    if t.rank or b.type.without_layout() != t or op.results[0].type.without_layout() != t:
        return None
    return op.name
