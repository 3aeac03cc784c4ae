"""Batching rules of reductions, sorting and contractions. The batch dimension becomes one
more kept dimension of a reduction or sort, a batching dimension of ``dot_general`` (or a free
one when only one side is batched: no loop either way), and part of the batch, feature or
feature-group dimensions of a ``convolution``. Ops whose scalar bodies read a batched value,
reductions with batched initial values (jax refuses these) and grouped convolutions with a
batched kernel run one example at a time (``rules_control.per_example_loop``)."""
from __future__ import annotations

from hlo.ir import TensorType
from hlo.ir.clone import clone_region

from ..autodiff import prims as P
from .rules_control import per_example_loop, regions_read_batched
from .table import all_batched, batch_rule, move_axis, shift


@batch_rule("reduce")
def _reduce(ctx, op, args, bat):
    n = len(args) // 2
    if any(bat[n:]) or regions_read_batched(ctx, op):
        return per_example_loop(ctx, op, args, bat)
    xs = all_batched(args[:n], bat[:n], ctx.size)
    outs = P.emit("reduce", xs + list(args[n:]), {"dimensions": shift(op.attrs["dimensions"])},
                  regions=[clone_region(op.regions[0], {})])
    return outs, [True] * len(outs)


@batch_rule("reduce_window")
def _reduce_window(ctx, op, args, bat):
    n = len(args) // 2
    if any(bat[n:]) or regions_read_batched(ctx, op):
        return per_example_loop(ctx, op, args, bat)
    a = dict(op.attrs)
    a["window_dimensions"] = [1] + list(a["window_dimensions"])
    for k in ("window_strides", "base_dilations", "window_dilations"):
        if a.get(k):
            a[k] = [1] + list(a[k])
    if a.get("padding"):
        a["padding"] = [[0, 0]] + [list(p) for p in a["padding"]]
    xs = all_batched(args[:n], bat[:n], ctx.size)
    outs = P.emit("reduce_window", xs + list(args[n:]), a,
                  regions=[clone_region(op.regions[0], {})])
    return outs, [True] * len(outs)


@batch_rule("sort")
def _sort(ctx, op, args, bat):
    if regions_read_batched(ctx, op):
        return per_example_loop(ctx, op, args, bat)
    rank = args[0].ndim - (1 if bat[0] else 0)
    a = dict(op.attrs)
    a["dimension"] = a.get("dimension", -1) % rank + 1
    outs = P.emit("sort", all_batched(args, bat, ctx.size), a,
                  regions=[clone_region(op.regions[0], {})])
    return outs, [True] * len(outs)


@batch_rule("dot_general")
def _dot_general(ctx, op, args, bat):
    lhs, rhs = args
    g = op.attrs.get
    lb, rb = list(g("lhs_batching_dimensions", ())), list(g("rhs_batching_dimensions", ()))
    lc, rc = list(g("lhs_contracting_dimensions", ())), list(g("rhs_contracting_dimensions", ()))
    dt = op.result_types[0].dtype.np_dtype
    if bat[0] and bat[1]:
        out = P.dot_general(lhs, rhs, [0] + shift(lb), [0] + shift(rb), shift(lc), shift(rc), dt)
        return [out], [True]
    if bat[0]:
        out = P.dot_general(lhs, rhs, shift(lb), rb, shift(lc), rc, dt)
        return [move_axis(out, len(lb), 0)], [True]
    out = P.dot_general(lhs, rhs, lb, shift(rb), lc, shift(rc), dt)
    n_lhs_free = lhs.ndim - len(lb) - len(lc)
    return [move_axis(out, len(lb) + n_lhs_free, 0)], [True]


def _merge_into(x, target: int):
    """Batched ``x``: the batch dimension merged into (major to) per-example axis ``target``."""
    y = move_axis(x, 0, target)
    shape = y.shape[:target] + (y.shape[target] * y.shape[target + 1],) + y.shape[target + 2:]
    return P.reshape(y, shape)


def _split_out(y, axis: int, size: int):
    shape = y.shape[:axis] + (size, y.shape[axis] // size) + y.shape[axis + 1:]
    return move_axis(P.reshape(y, shape), axis, 0)


@batch_rule("convolution")
def _convolution(ctx, op, args, bat):
    a = dict(op.attrs)
    fgc, bgc = a.get("feature_group_count", 1), a.get("batch_group_count", 1)
    lhs, rhs = args
    B = ctx.size
    rt = op.result_types[0]
    shape = list(rt.shape)
    if bat[0] and not bat[1] and bgc == 1:
        lhs = _merge_into(lhs, a["input_batch_dimension"])
        axis = a["output_batch_dimension"]
    elif bat[1] and not bat[0] and fgc == 1 and bgc == 1:
        rhs = _merge_into(rhs, a["kernel_output_feature_dimension"])
        axis = a["output_feature_dimension"]
    elif bat[0] and bat[1] and fgc == 1 and bgc == 1:
        lhs = _merge_into(lhs, a["input_feature_dimension"])
        rhs = _merge_into(rhs, a["kernel_output_feature_dimension"])
        a["feature_group_count"] = B
        axis = a["output_feature_dimension"]
    else:
        return per_example_loop(ctx, op, args, bat)
    shape[axis] *= B
    out = P.emit1("convolution", [lhs, rhs], a, result_types=[TensorType(tuple(shape), rt.dtype)])
    return [_split_out(out, axis, B)], [True]
