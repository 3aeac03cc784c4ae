"""Handlers of ops that create, move or select elements without arithmetic: constant, iota,
broadcast_in_dim, reshape, transpose, slice, dynamic_slice, dynamic_update_slice, concatenate,
pad, reverse. Results may be read-only numpy views of their operands."""
from __future__ import annotations

import numpy as np

from . import numerics as nm
from .registry import attr, handler


@handler("constant", batchable=True)
def _constant(it, op, ins, env):
    return [op.attrs["value"]]


@handler("iota")
def _iota(it, op, ins, env):
    rt = op.results[0].type
    d = op.attrs["iota_dimension"]
    n = rt.shape[d]
    line = nm.convert(np.arange(n, dtype=np.int64), rt.np_dtype)
    shape = [1] * rt.rank
    shape[d] = n
    return [np.broadcast_to(line.reshape(shape), rt.shape)]


def broadcast_in_dim(x: np.ndarray, dims, shape) -> np.ndarray:
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    x = np.transpose(x, order) if order != list(range(len(dims))) else x
    sorted_dims = [dims[i] for i in order]
    new_shape = [1] * len(shape)
    for i, d in enumerate(sorted_dims):
        new_shape[d] = x.shape[i]
    return np.broadcast_to(x.reshape(new_shape), tuple(shape))


@handler("broadcast_in_dim")
def _broadcast_in_dim(it, op, ins, env):
    return [broadcast_in_dim(ins[0], op.attrs["broadcast_dimensions"], op.results[0].type.shape)]


@handler("reshape")
def _reshape(it, op, ins, env):
    return [np.reshape(ins[0], op.results[0].type.shape)]


@handler("transpose")
def _transpose(it, op, ins, env):
    return [np.transpose(ins[0], op.attrs["permutation"])]


@handler("slice")
def _slice(it, op, ins, env):
    x = ins[0]
    st, li = op.attrs["start_indices"], op.attrs["limit_indices"]
    sd = attr(op, "strides") or (1,) * x.ndim
    return [x[tuple(slice(a, b, c) for a, b, c in zip(st, li, sd))]]


def index_scalar(a: np.ndarray) -> int:
    """A scalar index operand as a Python int (exact for every integer type)."""
    return int(np.asarray(a)[()])


def clamped_starts(starts, operand_shape, sizes):
    return [min(max(index_scalar(s), 0), n - k) for s, n, k in zip(starts, operand_shape, sizes)]


@handler("dynamic_slice")
def _dynamic_slice(it, op, ins, env):
    x = ins[0]
    sizes = op.attrs["slice_sizes"]
    st = clamped_starts(ins[1:], x.shape, sizes)
    return [x[tuple(slice(s, s + k) for s, k in zip(st, sizes))]]


@handler("dynamic_update_slice")
def _dynamic_update_slice(it, op, ins, env):
    x, u = ins[0], ins[1]
    st = clamped_starts(ins[2:], x.shape, u.shape)
    out = np.array(x, copy=True)
    out[tuple(slice(s, s + k) for s, k in zip(st, u.shape))] = u
    return [out]


@handler("concatenate")
def _concatenate(it, op, ins, env):
    return [np.concatenate(ins, axis=op.attrs["dimension"])]


def pad(x: np.ndarray, value: np.ndarray, low, high, interior) -> np.ndarray:
    """``pad`` with possibly negative edge padding (which crops) and interior padding."""
    value = np.asarray(value, dtype=x.dtype)
    if any(interior):
        ishape = tuple(n + max(n - 1, 0) * i for n, i in zip(x.shape, interior))
        inner = np.full(ishape, value, dtype=x.dtype)
        inner[tuple(slice(None, None, i + 1) for i in interior)] = x
    else:
        inner = x
    if not any(low) and not any(high):
        return inner
    out_shape = tuple(lo + hi + n for lo, hi, n in zip(low, high, inner.shape))
    out = np.full(out_shape, value, dtype=x.dtype)
    dst, src = [], []
    for lo, n, m in zip(low, inner.shape, out_shape):
        d0, s0 = max(lo, 0), max(-lo, 0)
        length = min(n - s0, m - d0)
        if length <= 0:
            return out
        dst.append(slice(d0, d0 + length))
        src.append(slice(s0, s0 + length))
    out[tuple(dst)] = inner[tuple(src)]
    return out


@handler("pad")
def _pad(it, op, ins, env):
    return [pad(ins[0], ins[1], op.attrs["edge_padding_low"], op.attrs["edge_padding_high"],
                op.attrs["interior_padding"])]


@handler("reverse")
def _reverse(it, op, ins, env):
    dims = op.attrs["dimensions"]
    return [np.flip(ins[0], axis=tuple(dims)) if dims else ins[0]]


@handler("optimization_barrier", batchable=True)
def _optimization_barrier(it, op, ins, env):
    return list(ins)
