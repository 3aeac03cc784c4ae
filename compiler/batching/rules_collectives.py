"""Batching rules of the collectives (``hlo.vmap`` of a function that calls ``hlo.lax.psum``
and the others, inside ``hlo.shard_map``): the batch dimension is one more dimension every
device holds, so each collective runs once on the batched operands, its dimension attributes
shifted past the batch dimension. ``run_parallel`` (the interpreter's grid of programs) runs
one example at a time."""
from __future__ import annotations

from hlo.ir.clone import clone_region

from ..autodiff import prims as P
from .rules_control import per_example_loop
from .table import all_batched, batch_rule


def _shifted(attrs: dict, *names: str) -> dict:
    a = dict(attrs)
    for n in names:
        a[n] = a[n] + 1
    return a


@batch_rule("all_reduce")
def _all_reduce(ctx, op, args, bat):
    xs = all_batched(args, bat, ctx.size)
    outs = P.emit("all_reduce", xs, dict(op.attrs), regions=[clone_region(op.regions[0], {})])
    return outs, [True] * len(outs)


@batch_rule("all_gather")
def _all_gather(ctx, op, args, bat):
    xs = all_batched(args, bat, ctx.size)
    types = [P.ir_type((ctx.size,) + tuple(r.type.shape), r.type.np_dtype) for r in op.results]
    outs = P.emit("all_gather", xs, _shifted(op.attrs, "all_gather_dim"), result_types=types)
    return outs, [True] * len(outs)


@batch_rule("reduce_scatter")
def _reduce_scatter(ctx, op, args, bat):
    xs = all_batched(args, bat, ctx.size)
    r = op.results[0].type
    outs = P.emit("reduce_scatter", xs, _shifted(op.attrs, "scatter_dimension"),
                  result_types=[P.ir_type((ctx.size,) + tuple(r.shape), r.np_dtype)],
                  regions=[clone_region(op.regions[0], {})])
    return outs, [True]


@batch_rule("all_to_all")
def _all_to_all(ctx, op, args, bat):
    xs = all_batched(args, bat, ctx.size)
    outs = P.emit("all_to_all", xs, _shifted(op.attrs, "split_dimension", "concat_dimension"))
    return outs, [True] * len(outs)


@batch_rule("collective_permute", "collective_broadcast")
def _same_op(ctx, op, args, bat):
    xs = all_batched(args, bat, ctx.size)
    return P.emit(op.name, xs, dict(op.attrs)), [True]


@batch_rule("run_parallel")
def _run_parallel(ctx, op, args, bat):
    return per_example_loop(ctx, op, args, bat)
