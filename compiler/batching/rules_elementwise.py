"""Batching rules of elementwise ops (the op table's ``elementwise`` trait): every operand gets
the batch dimension (an unbatched operand is broadcast along it, a batched scalar operand of
``select``/``clamp`` along the element dimensions) and the op is emitted on ``[B, ...]``
arrays. ``bitcast_convert`` (which may add or drop a minor dimension) keeps its operand."""
from __future__ import annotations

from hlo.ir import ops as op_table

from ..autodiff import prims as P
from .table import batch_rule, batched, btype, to_shape


@batch_rule(*sorted(op_table.with_trait(op_table.ELEMENTWISE)))
def _elementwise(ctx, op, args, bat):
    rt = btype(op.result_types[0], ctx.size)
    xs = [to_shape(batched(a, b, ctx.size), rt.shape) for a, b in zip(args, bat)]
    return [P.emit1(op.name, xs, op.attrs, result_types=[rt])], [True]


@batch_rule("bitcast_convert")
def _bitcast_convert(ctx, op, args, bat):
    rt = btype(op.result_types[0], ctx.size)
    return [P.emit1(op.name, args, op.attrs, result_types=[rt])], [True]


@batch_rule("optimization_barrier")
def _barrier(ctx, op, args, bat):
    return P.emit(op.name, args), list(bat)
