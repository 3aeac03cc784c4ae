"""Batching rules of data movement: broadcasts, reshapes, transposes, slices, padding,
concatenation, reversal, and the dynamic slices (a batched start index turns them into a
``gather`` / ``scatter`` with batching dimensions)."""
from __future__ import annotations

import numpy as np

from ..autodiff import prims as P
from .table import all_batched, batch_rule, batched, btype, shift


@batch_rule("broadcast_in_dim")
def _broadcast_in_dim(ctx, op, args, bat):
    dims = [0] + shift(op.attrs["broadcast_dimensions"])
    return [P.emit1(op.name, args, {"broadcast_dimensions": dims},
                    result_types=[btype(op.result_types[0], ctx.size)])], [True]


@batch_rule("reshape")
def _reshape(ctx, op, args, bat):
    return [P.emit1("reshape", args, result_types=[btype(op.result_types[0], ctx.size)])], [True]


@batch_rule("transpose")
def _transpose(ctx, op, args, bat):
    return [P.transpose(args[0], [0] + shift(op.attrs["permutation"]))], [True]


@batch_rule("reverse")
def _reverse(ctx, op, args, bat):
    return [P.reverse(args[0], shift(op.attrs["dimensions"]))], [True]


@batch_rule("slice")
def _slice(ctx, op, args, bat):
    a = op.attrs
    strides = a.get("strides") or [1] * (args[0].ndim - 1)
    return [P.emit1("slice", args, {"start_indices": [0] + list(a["start_indices"]),
                                    "limit_indices": [ctx.size] + list(a["limit_indices"]),
                                    "strides": [1] + list(strides)})], [True]


@batch_rule("concatenate")
def _concatenate(ctx, op, args, bat):
    xs = all_batched(args, bat, ctx.size)
    return [P.emit1("concatenate", xs, {"dimension": op.attrs["dimension"] + 1})], [True]


@batch_rule("pad")
def _pad(ctx, op, args, bat):
    x, pv = args
    a = op.attrs
    lo, hi, it = ([0] + list(a[k]) for k in ("edge_padding_low", "edge_padding_high",
                                              "interior_padding"))
    x = batched(x, bat[0], ctx.size)
    if not bat[1]:
        return [P.pad(x, pv, lo, hi, it)], [True]
    # A per-example padding value: pad with zeros, then choose the padding value where a
    # padded mask of ones says the element is padding.
    padded = P.pad(x, P.const(0, x.dtype), lo, hi, it)
    ones = P.full(x.shape[1:], True, np.bool_)
    mask = P.pad(ones, P.const(False, np.bool_), lo[1:], hi[1:], it[1:])
    mask = P.broadcast_in_dim(mask, padded.shape, range(1, padded.ndim))
    fill = P.broadcast_in_dim(pv, padded.shape, [0])
    return [P.select(mask, padded, fill)], [True]


def _index_vector(ctx, idx, bat, dtype):
    """Per-example scalar start indices as one ``[B, n]`` index array."""
    cols = [P.reshape(batched(P.convert(i, dtype), b, ctx.size), (ctx.size, 1))
            for i, b in zip(idx, bat)]
    return P.concatenate(cols, 1)


def _index_dtype(idx):
    return np.result_type(*[i.dtype for i in idx]) if idx else np.dtype(np.int32)


@batch_rule("dynamic_slice")
def _dynamic_slice(ctx, op, args, bat):
    x, idx = args[0], args[1:]
    sizes = list(op.attrs["slice_sizes"])
    if not any(bat[1:]):
        zero = P.const(0, idx[0].dtype) if idx else P.const(0, np.int32)
        return [P.dynamic_slice(x, [zero] + list(idx), [ctx.size] + sizes)], [True]
    x = batched(x, bat[0], ctx.size)
    r = len(idx)
    iv = _index_vector(ctx, idx, bat[1:], _index_dtype(idx))
    # gather clamps start indices into range exactly as dynamic_slice does.
    out = P.gather(x, iv, offset_dims=list(range(1, r + 1)), collapsed_slice_dims=[],
                   operand_batching_dims=[0], start_indices_batching_dims=[0],
                   start_index_map=list(range(1, r + 1)), index_vector_dim=1,
                   slice_sizes=[1] + sizes)
    return [out], [True]


@batch_rule("dynamic_update_slice")
def _dynamic_update_slice(ctx, op, args, bat):
    x, u, idx = args[0], args[1], args[2:]
    x, u = batched(x, bat[0], ctx.size), batched(u, bat[1], ctx.size)
    if not any(bat[2:]):
        zero = P.const(0, idx[0].dtype) if idx else P.const(0, np.int32)
        return [P.dynamic_update_slice(x, u, [zero] + list(idx))], [True]
    dt = _index_dtype(idx)
    # dynamic_update_slice clamps the start so the update fits; scatter would drop it instead.
    clamped = []
    for d, (i, b) in enumerate(zip(idx, bat[2:])):
        hi = P.full(i.shape, x.shape[d + 1] - u.shape[d + 1], i.dtype)
        clamped.append(P.emit1("clamp", [P.zeros(i.shape, i.dtype), i, hi]))
    r = len(idx)
    iv = _index_vector(ctx, clamped, bat[2:], dt)
    out = P.scatter(x, iv, u, None, update_window_dims=list(range(1, r + 1)),
                    inserted_window_dims=[], input_batching_dims=[0],
                    scatter_indices_batching_dims=[0],
                    scatter_dims_to_operand_dims=list(range(1, r + 1)), index_vector_dim=1,
                    indices_are_sorted=True, unique_indices=True)
    return [out], [True]
