"""Batching of ops marked by ``custom_vjp``, ``custom_jvp`` and ``checkpoint``: the primal
branch is batched like any region (every output batched), and the batched op gets the mark's
batched rules (``mark.batched``: the user's rules under ``vmap``)."""
from __future__ import annotations

from ..autodiff import prims as P
from ..autodiff.marks import MARKS
from .rules_control import _trace_batched


def batch_marked(ctx, op):
    mark = MARKS[op]
    ins = [ctx.env.get(v) for v in mark.args]
    n = len(op.result_types)
    region, _ = _trace_batched(ctx, op.regions[0], [], [True] * n, op.regions[0].name)
    outs = P.emit("case", list(op.operands and [ctx.env.get(op.operands[0])[0]]), regions=[region])
    MARKS[outs[0]._value.owner] = mark.batched([t._value for t, _ in ins], [b for _, b in ins],
                                               ctx.size)
    return outs, [True] * n
