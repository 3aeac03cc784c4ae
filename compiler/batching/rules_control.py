"""Batching rules of control flow (``while``, ``if``, ``case``), of ``fusion`` and ``call``,
and the one-example-at-a-time loop that ops without a batched form fall back to.

- ``if`` / ``case`` with an unbatched predicate or index: the same op with batched branches
  (an output batched in one branch is broadcast in the others). With a batched predicate or
  index every branch runs and a ``select`` per output picks each example's result (``case``
  sends an out-of-range index to its last branch, as the op does).
- ``while``: carries that the body makes batched become batched (repeated to a fixed point).
  A batched condition runs the loop while any example's condition holds; each iteration keeps
  the old carry of the examples that are done (``select``), so every example sees exactly its
  own iterations.
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from hlo.ir import Operation, Region
from hlo.ir.clone import clone_op

from ..autodiff import prims as P
from ..autodiff.backprop import _append, free_values
from ..errors import UnsupportedError
from ..tracing.abstract import ShapedArray, aval_of_type
from ..tracing.tracer import Tracer, current_trace, lift, trace_region
from .interpreter import batch_region_inline
from .table import batch_rule, batched, btype, to_shape


def regions_read_batched(ctx, op: Operation) -> bool:
    return any(ctx.env.get(v)[1] for v in free_values(op.regions)) if op.regions else False


def _aval(t, is_batched: bool, size: int) -> ShapedArray:
    return aval_of_type(btype(t, size) if is_batched else t)


def per_example_loop(ctx, op: Operation, args: Sequence[Tracer], bat: Sequence[bool]):
    """``op`` applied to one example at a time in a ``while`` loop over the batch."""
    B = ctx.size
    free = free_values(op.regions) if op.regions else []
    free_in = [ctx.env.get(v) for v in free]
    accs = [P.zeros((B,) + tuple(rt.shape), rt.dtype.np_dtype) for rt in op.result_types]
    i0 = P.const(0, np.int32)
    avals = [i0.aval] + [a.aval for a in accs]

    def pick(i, t, b):
        t = lift(t)
        if not b:
            return t
        zero = P.const(0, np.int32)
        s = P.dynamic_slice(t, [i] + [zero] * (t.ndim - 1), (1,) + t.shape[1:])
        return P.reshape(s, t.shape[1:])

    def cond(i, *acc):
        return P.compare(i, P.const(B, np.int32), "LT")

    def body(i, *acc):
        mapping = {v: pick(i, t, b)._value for v, t, b in zip(op.operands, args, bat)}
        for v, (t, b) in zip(free, free_in):
            mapping[v] = pick(i, t, b)._value
        new = clone_op(op, mapping)
        trace = current_trace()
        _append(trace, new)
        zero = P.const(0, np.int32)
        outs = [P.add(i, P.const(1, np.int32))]
        for acc, r in zip(acc, new.results):
            t = Tracer(trace, r, aval_of_type(r.type))
            outs.append(P.dynamic_update_slice(acc, P.reshape(t, (1,) + t.shape),
                                               [i] + [zero] * t.ndim))
        return outs

    regions = [trace_region(cond, avals, name="cond").region,
               trace_region(body, avals, name="body").region]
    res = P.emit("while", [i0] + accs, regions=regions)
    return res[1:], [True] * len(accs)


def _trace_batched(ctx, region: Region, in_bat: Sequence[bool], force: Sequence[bool], name: str,
                   wrap=None):
    """Trace a batched copy of ``region`` (arguments batched per ``in_bat``; outputs batched
    where they come out batched or ``force`` says so). Returns (region, output flags as they
    came out)."""
    flags: List[bool] = []

    def fn(*xs):
        outs = batch_region_inline(region, ctx.env, ctx.size, list(zip(xs, in_bat)))
        flags[:] = [b for _, b in outs]
        if wrap is not None:
            return wrap(xs, outs)
        return [batched(t, b, ctx.size) if f else t for (t, b), f in zip(outs, force)]

    avals = [_aval(t, b, ctx.size) for t, b in zip(region.arg_types, in_bat)]
    return trace_region(fn, avals, name=name).region, flags


def _branch_regions(ctx, op: Operation):
    n_out = len(op.result_types)
    force = [False] * n_out
    while True:
        regions, flags = [], []
        for r in op.regions:
            reg, f = _trace_batched(ctx, r, [], force, r.name)
            regions.append(reg)
            flags.append(f)
        joined = [any(f[k] for f in flags) or force[k] for k in range(n_out)]
        if joined == force:
            return regions, joined
        force = joined


def _select_per_example(ctx, pred: Tracer, on_true, on_false) -> Tracer:
    a, b = batched(on_true[0], on_true[1], ctx.size), batched(on_false[0], on_false[1], ctx.size)
    return P.select(to_shape(pred, a.shape), a, b)


@batch_rule("if", "case")
def _branches(ctx, op, args, bat):
    if not bat[0]:
        regions, flags = _branch_regions(ctx, op)
        return P.emit(op.name, args, regions=regions), flags
    outs = [batch_region_inline(r, ctx.env, ctx.size) for r in op.regions]
    idx = args[0]
    result = []
    for k in range(len(op.result_types)):
        acc = outs[-1][k]
        for j in reversed(range(len(outs) - 1)):
            if op.name == "if":
                choose = idx  # branch 0 is the true branch
            else:
                choose = P.compare(idx, P.full(idx.shape, j, idx.dtype), "EQ")
            acc = (_select_per_example(ctx, choose, outs[j][k], acc), True)
        result.append(acc[0])
    return result, [True] * len(result)


@batch_rule("while")
def _while(ctx, op, args, bat):
    cond_r, body_r = op.regions
    carry_b = list(bat)
    while True:
        _, pred_b = _trace_batched(ctx, cond_r, carry_b, [False], "cond")
        if pred_b[0] and not all(carry_b):
            carry_b = [True] * len(carry_b)
            continue
        body, out_b = _trace_batched(ctx, body_r, carry_b, carry_b, "body")
        new = [c or o for c, o in zip(carry_b, out_b)]
        if new == carry_b:
            break
        carry_b = new
    init = [batched(a, b, ctx.size) if c else a for a, b, c in zip(args, bat, carry_b)]
    if not pred_b[0]:
        cond, _ = _trace_batched(ctx, cond_r, carry_b, [False], "cond")
        return P.emit("while", init, regions=[cond, body]), carry_b

    def any_lane(xs, outs):
        return [P.reduce(outs[0][0], P.const(False, np.bool_), [0], "or")]

    def masked_step(xs, outs):
        live = batch_region_inline(cond_r, ctx.env, ctx.size, [(x, True) for x in xs])[0][0]
        return [_select_per_example(ctx, live, o, (x, True)) for x, o in zip(xs, outs)]

    cond, _ = _trace_batched(ctx, cond_r, carry_b, [False], "cond", wrap=any_lane)
    body, _ = _trace_batched(ctx, body_r, carry_b, carry_b, "body", wrap=masked_step)
    return P.emit("while", init, regions=[cond, body]), carry_b


@batch_rule("fusion")
def _fusion(ctx, op, args, bat):
    outs = batch_region_inline(op.regions[0], ctx.env, ctx.size, list(zip(args, bat)))
    return [t for t, _ in outs], [b for _, b in outs]


@batch_rule("call")
def _call(ctx, op, args, bat):
    kw = {"location": op.loc} if op.loc is not None else {}
    raise UnsupportedError(f"hlo.vmap cannot batch a call of @{op.attrs.get('callee')}: traced "
                           "programs hold no calls (run the inline pass on imported IR first)", **kw)
