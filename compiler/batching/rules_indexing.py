"""Batching rules of ``gather`` and ``scatter``. A batched operand alone makes the batch
dimension one more window (offset) dimension, sliced whole; batched indices make it a
batching dimension of the op (``operand_batching_dims`` / ``input_batching_dims`` paired with
the indices' batching dimension), so each example indexes its own operand. No loops."""
from __future__ import annotations

from hlo.ir.clone import clone_region

from ..autodiff import prims as P
from .rules_control import per_example_loop, regions_read_batched
from .table import all_batched, batch_rule, shift


@batch_rule("gather")
def _gather(ctx, op, args, bat):
    x, idx = args
    a = {k: list(op.attrs.get(k, ())) for k in (
        "offset_dims", "collapsed_slice_dims", "operand_batching_dims",
        "start_indices_batching_dims", "start_index_map", "slice_sizes")}
    ivd = op.attrs["index_vector_dim"]
    out = dict(indices_are_sorted=op.attrs.get("indices_are_sorted", False))
    if bat[0] and not bat[1]:
        out.update(offset_dims=[0] + shift(a["offset_dims"]),
                   collapsed_slice_dims=shift(a["collapsed_slice_dims"]),
                   operand_batching_dims=shift(a["operand_batching_dims"]),
                   start_indices_batching_dims=a["start_indices_batching_dims"],
                   start_index_map=shift(a["start_index_map"]), index_vector_dim=ivd,
                   slice_sizes=[ctx.size] + a["slice_sizes"])
    elif bat[1] and not bat[0]:
        out.update(offset_dims=shift(a["offset_dims"]),
                   collapsed_slice_dims=a["collapsed_slice_dims"],
                   operand_batching_dims=a["operand_batching_dims"],
                   start_indices_batching_dims=shift(a["start_indices_batching_dims"]),
                   start_index_map=a["start_index_map"], index_vector_dim=ivd + 1,
                   slice_sizes=a["slice_sizes"])
    else:
        out.update(offset_dims=shift(a["offset_dims"]),
                   collapsed_slice_dims=shift(a["collapsed_slice_dims"]),
                   operand_batching_dims=[0] + shift(a["operand_batching_dims"]),
                   start_indices_batching_dims=[0] + shift(a["start_indices_batching_dims"]),
                   start_index_map=shift(a["start_index_map"]), index_vector_dim=ivd + 1,
                   slice_sizes=[1] + a["slice_sizes"])
    return [P.gather(x, idx, **out)], [True]


@batch_rule("scatter")
def _scatter(ctx, op, args, bat):
    if regions_read_batched(ctx, op):
        return per_example_loop(ctx, op, args, bat)
    n = (len(args) - 1) // 2
    g = op.attrs.get
    uwd, iwd = list(g("update_window_dims", ())), list(g("inserted_window_dims", ()))
    ibd, sibd = list(g("input_batching_dims", ())), list(g("scatter_indices_batching_dims", ()))
    sdod, ivd = list(g("scatter_dims_to_operand_dims")), g("index_vector_dim")
    inputs = all_batched(args[:n], bat[:n], ctx.size)
    updates = all_batched(args[n + 1:], bat[n + 1:], ctx.size)
    idx = args[n]
    attrs = {"indices_are_sorted": g("indices_are_sorted", False),
             "unique_indices": g("unique_indices", False),
             "inserted_window_dims": shift(iwd), "scatter_dims_to_operand_dims": shift(sdod)}
    if not bat[n]:
        attrs.update(update_window_dims=[0] + shift(uwd), input_batching_dims=shift(ibd),
                     scatter_indices_batching_dims=sibd, index_vector_dim=ivd)
    else:
        attrs.update(update_window_dims=shift(uwd), input_batching_dims=[0] + shift(ibd),
                     scatter_indices_batching_dims=[0] + shift(sibd), index_vector_dim=ivd + 1)
    outs = P.emit("scatter", inputs + [idx] + updates, attrs,
                  regions=[clone_region(op.regions[0], {})])
    return outs, [True] * len(outs)
