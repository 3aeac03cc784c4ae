"""jax.lax's convenience functions over hlo.lax's op wrappers: the bitwise_* names, index_in_dim
and its dynamic forms, select_n, split, stack, unstack, tile, empty, broadcast_to_rank,
broadcast_like, broadcast_shapes, dtype, batch_matmul, scatter_sub, reduce_precision,
optimization_barrier and approx_max_k/approx_min_k (exact: the true top k meets any recall
target)."""
from __future__ import annotations

import enum
from typing import Sequence

import numpy as np

from .. import dtypes, tree_util
from ..errors import ShapeError
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit, emit1
from . import elementwise as ew
from .common import as_tracer, canonical_axis, static_int
from .common import broadcast_shapes as _bshapes
from .common import full as _full
from .contractions import dot_general
from .indexing import scatter_add
from .structural import (
    broadcast_in_dim,
    concatenate,
    dynamic_slice_in_dim,
    dynamic_update_slice_in_dim,
    expand_dims,
    reshape,
    slice_in_dim,
)
from .topk import top_k

bitwise_and, bitwise_or, bitwise_xor, bitwise_not = ew.and_, ew.or_, ew.xor, ew.not_


class FftType(enum.IntEnum):
    """The kind of a ``hlo.lax.fft`` (jax.lax.FftType's members and values)."""
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


@api_function
def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True) -> Tracer:
    """The slice at static ``index`` along ``axis`` (negative counts from the end)."""
    x = as_tracer(operand, what="lax.index_in_dim")
    ax = canonical_axis("lax.index_in_dim", axis, x.ndim)
    n = x.shape[ax]
    i = static_int("lax.index_in_dim: index", index)
    i = i + n if i < 0 else i
    if not 0 <= i < n:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size {n}")
    out = slice_in_dim(x, i, i + 1, 1, ax)
    return out if keepdims else reshape(out, x.shape[:ax] + x.shape[ax + 1:])


@api_function
def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices: bool = True) -> Tracer:
    """The slice at traced ``index`` along ``axis`` (clamped into range, as dynamic_slice)."""
    x = as_tracer(operand, what="lax.dynamic_index_in_dim")
    ax = canonical_axis("lax.dynamic_index_in_dim", axis, x.ndim)
    out = dynamic_slice_in_dim(x, index, 1, ax)
    return out if keepdims else reshape(out, x.shape[:ax] + x.shape[ax + 1:])


@api_function
def dynamic_update_index_in_dim(operand, update, index, axis: int, *, allow_negative_indices: bool = True) -> Tracer:
    """``operand`` with the slice at ``index`` along ``axis`` replaced by ``update``."""
    x = as_tracer(operand, what="lax.dynamic_update_index_in_dim")
    u = as_tracer(update, x.dtype, "lax.dynamic_update_index_in_dim: update")
    ax = canonical_axis("lax.dynamic_update_index_in_dim", axis, x.ndim)
    if u.ndim == x.ndim - 1:
        u = expand_dims(u, (ax,))
    return dynamic_update_slice_in_dim(x, u, index, ax)


@api_function
def select_n(which, *cases) -> Tracer:
    """``cases[which]`` elementwise (``which`` boolean for two cases, else an integer)."""
    if not cases:
        raise ValueError("select_n() must have at least one case")
    w = as_tracer(which, what="lax.select_n")
    cs = [as_tracer(c, what="lax.select_n") for c in cases]
    if len(cs) == 1:
        return cs[0]
    if dtypes.is_bool(w.dtype):
        if len(cs) != 2:
            raise ValueError("select_n: a boolean selector picks between exactly two cases")
        return ew.select(w, cs[1], cs[0])
    out = cs[-1]
    for i in range(len(cs) - 2, -1, -1):
        out = ew.select(ew.le(w, _full(w.shape, i, w.dtype) if w.shape else as_tracer(np.asarray(i, w.dtype))),
                        cs[i], out)
    return out


@api_function
def split(operand, sizes: Sequence[int], axis: int = 0):
    """Pieces of ``sizes`` along ``axis`` (they must add up to its length)."""
    x = as_tracer(operand, what="lax.split")
    ax = canonical_axis("lax.split", axis, x.ndim)
    sizes = [static_int("lax.split: size", s) for s in sizes]
    if sum(sizes) != x.shape[ax] or any(s < 0 for s in sizes):
        raise ShapeError(f"lax.split: sizes {sizes} must be non-negative and add up to {x.shape[ax]}")
    out, start = [], 0
    for s in sizes:
        out.append(slice_in_dim(x, start, start + s, 1, ax))
        start += s
    return out


@api_function
def stack(operands, axis: int = 0) -> Tracer:
    xs = [as_tracer(o, what="lax.stack") for o in operands]
    if not xs:
        raise ValueError("lax.stack needs at least one operand")
    ax = canonical_axis("lax.stack", axis, xs[0].ndim + 1)
    return concatenate([expand_dims(x, (ax,)) for x in xs], ax)


@api_function
def unstack(x, axis: int = 0):
    t = as_tracer(x, what="lax.unstack")
    ax = canonical_axis("lax.unstack", axis, t.ndim)
    return tuple(index_in_dim(t, i, ax, keepdims=False) for i in range(t.shape[ax]))


@api_function
def tile(operand, reps: Sequence[int]) -> Tracer:
    """``operand`` repeated ``reps[d]`` times along each dimension (len(reps) == ndim)."""
    x = as_tracer(operand, what="lax.tile")
    reps = [static_int("lax.tile: reps", r) for r in reps]
    if len(reps) != x.ndim:
        raise ShapeError(f"lax.tile: reps {reps} must have one entry per dimension of {x.shape}")
    big = [d for r, n in zip(reps, x.shape) for d in (r, n)]
    b = broadcast_in_dim(x, big, [2 * i + 1 for i in range(x.ndim)])
    return reshape(b, [r * n for r, n in zip(reps, x.shape)])


def empty(shape, dtype) -> Tracer:
    """An array of ``shape`` and ``dtype`` (zeros: hlo has no uninitialized memory)."""
    return _empty(tuple(int(d) for d in shape), dtypes.canonicalize(dtype, "lax.empty: dtype"))


@api_function
def _empty(shape, dt) -> Tracer:
    return _full(shape, 0, dt)


@api_function
def broadcast_to_rank(x, rank: int) -> Tracer:
    """``x`` with leading 1-dimensions added up to ``rank``."""
    t = as_tracer(x, what="lax.broadcast_to_rank")
    r = static_int("lax.broadcast_to_rank: rank", rank)
    if r <= t.ndim:
        return t
    return reshape(t, (1,) * (r - t.ndim) + t.shape)


@api_function
def broadcast_like(arr, like_arr) -> Tracer:
    a = as_tracer(arr, what="lax.broadcast_like")
    like = as_tracer(like_arr, what="lax.broadcast_like")
    shape = _bshapes("lax.broadcast_like", a.shape, like.shape)
    return broadcast_in_dim(reshape(a, (1,) * (len(shape) - a.ndim) + a.shape), shape, list(range(len(shape))))


def broadcast_shapes(*shapes):
    """The numpy-broadcast shape of the shapes (tuples)."""
    return _bshapes("lax.broadcast_shapes", *[tuple(s) for s in shapes])


def dtype(x) -> np.dtype:
    """The canonical dtype of ``x`` (an array, a traced value, a scalar or a dtype)."""
    if isinstance(x, Tracer):
        return x.dtype
    if isinstance(x, (type, np.dtype, str)) and not isinstance(x, (bool, int, float, complex)):
        return dtypes.canonicalize(x, "lax.dtype")
    from .common import aval_of
    return aval_of(x, "lax.dtype").dtype


@api_function
def batch_matmul(lhs, rhs, precision=None) -> Tracer:
    """Batched matrix products ``[..., m, k] x [..., k, n]`` (equal batch dimensions)."""
    a = as_tracer(lhs, what="lax.batch_matmul")
    b = as_tracer(rhs, what="lax.batch_matmul")
    if a.ndim < 2 or a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2]:
        raise ShapeError(f"lax.batch_matmul: operands must have one rank >= 2 and equal batch dimensions, got "
                         f"{a.shape} and {b.shape}")
    batch = tuple(range(a.ndim - 2))
    return dot_general(a, b, (((a.ndim - 1,), (b.ndim - 2,)), (batch, batch)), precision=precision)


@api_function
def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
                unique_indices=False, mode=None) -> Tracer:
    """``operand`` with ``updates`` subtracted at the scattered windows."""
    x = as_tracer(operand, what="lax.scatter_sub")
    u = as_tracer(updates, x.dtype, "lax.scatter_sub: updates")
    return scatter_add(x, scatter_indices, ew.neg(u), dimension_numbers, indices_are_sorted=indices_are_sorted,
                       unique_indices=unique_indices, mode=mode)


@api_function
def reduce_precision(operand, exponent_bits: int, mantissa_bits: int) -> Tracer:
    """``operand`` rounded to a float format of ``exponent_bits`` and ``mantissa_bits`` (and
    back to its type): the IR's reduce_precision op."""
    x = as_tracer(operand, what="lax.reduce_precision")
    if not dtypes.is_float(x.dtype):
        raise TypeError(f"lax.reduce_precision: the operand must be floating-point, got {x.dtype}")
    return emit1("reduce_precision", [x], {"exponent_bits": static_int("exponent_bits", exponent_bits),
                                           "mantissa_bits": static_int("mantissa_bits", mantissa_bits)},
                 weak_type=x.weak_type)


@api_function
def optimization_barrier(operand):
    """The values of the pytree ``operand``, unchanged, through one ``optimization_barrier``
    op: no computation moves across it."""
    leaves, tree = tree_util.tree_flatten(operand)
    ts = [as_tracer(v, what="lax.optimization_barrier") for v in leaves]
    if not ts:
        return operand
    outs = emit("optimization_barrier", ts, {}, weak_type=[t.weak_type for t in ts])
    return tree_util.tree_unflatten(tree, list(outs))


def _approx_k(what, operand, k, reduction_dimension, largest):
    x = as_tracer(operand, what=what)
    ax = canonical_axis(what, reduction_dimension, x.ndim)
    last = x.ndim - 1
    if ax != last:
        from .structural import transpose
        perm = [d for d in range(x.ndim) if d != ax] + [ax]
        x = transpose(x, perm)
    v, i = top_k(x if largest else ew.neg(x), k)
    if not largest:
        v = ew.neg(v)
    if ax != last:
        from .structural import transpose
        inv = list(range(x.ndim - 1))
        inv.insert(ax, x.ndim - 1)
        v, i = transpose(v, inv), transpose(i, inv)
    return v, i


@api_function
def approx_max_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """The ``k`` largest values along ``reduction_dimension`` and their indices: computed
    exactly (recall 1)."""
    return _approx_k("lax.approx_max_k", operand, k, reduction_dimension, True)


@api_function
def approx_min_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """The ``k`` smallest values and their indices, computed exactly."""
    return _approx_k("lax.approx_min_k", operand, k, reduction_dimension, False)


_WIDER = {np.dtype(np.int8): np.int16, np.dtype(np.int16): np.int32, np.dtype(np.int32): np.int64,
          np.dtype(np.uint8): np.uint16, np.dtype(np.uint16): np.uint32, np.dtype(np.uint32): np.uint64}


@api_function
def mulhi(x, y, /) -> Tracer:
    """The high half of the double-width product of two integers of one type."""
    from .common import convert
    a = as_tracer(x, what="lax.mulhi")
    b = as_tracer(y, a.dtype, "lax.mulhi")
    if a.dtype != b.dtype or not dtypes.is_int(a.dtype):
        raise TypeError(f"lax.mulhi: operands must be integers of one type, got {a.dtype} and {b.dtype}")
    dt = np.dtype(a.dtype)
    bits = dt.itemsize * 8
    if dt in _WIDER:
        w = np.dtype(_WIDER[dt])
        p = ew.mul(convert(a, w), convert(b, w))
        shift = ew.shift_right_arithmetic if dt.kind == "i" else ew.shift_right_logical
        return convert(shift(p, as_tracer(np.asarray(bits, w))), dt)
    # 64 bits: the unsigned product of 32-bit halves, then the signed correction
    u = np.dtype(np.uint64)
    au, bu = convert(a, u) if dt.kind == "i" else a, convert(b, u) if dt.kind == "i" else b
    c32, mask = as_tracer(np.asarray(32, u)), as_tracer(np.asarray(0xFFFFFFFF, u))
    a_lo, a_hi = ew.and_(au, mask), ew.shift_right_logical(au, c32)
    b_lo, b_hi = ew.and_(bu, mask), ew.shift_right_logical(bu, c32)
    lo_lo, hi_lo = ew.mul(a_lo, b_lo), ew.mul(a_hi, b_lo)
    lo_hi, hi_hi = ew.mul(a_lo, b_hi), ew.mul(a_hi, b_hi)
    cross = ew.add(ew.add(ew.shift_right_logical(lo_lo, c32), ew.and_(hi_lo, mask)), ew.and_(lo_hi, mask))
    hi = ew.add(ew.add(ew.add(hi_hi, ew.shift_right_logical(hi_lo, c32)), ew.shift_right_logical(lo_hi, c32)),
                ew.shift_right_logical(cross, c32))
    if dt.kind == "u":
        return hi
    zeros = ew.mul(au, as_tracer(np.asarray(0, u)))
    neg_a = ew.lt(a, as_tracer(np.asarray(0, dt)))
    neg_b = ew.lt(b, as_tracer(np.asarray(0, dt)))
    hi = ew.sub(ew.sub(hi, ew.select(neg_a, bu, zeros)), ew.select(neg_b, au, zeros))
    return convert(hi, dt)


@api_function
def index_take(src, idxs, axes: Sequence[int]) -> Tracer:
    """``src`` indexed by one index array per axis of ``axes`` (wrapping modulo the axis size),
    as jax.lax.index_take."""
    from .common import convert
    from .indexing import GatherDimensionNumbers, gather
    s = as_tracer(src, what="lax.index_take")
    axes = tuple(canonical_axis("lax.index_take", a, s.ndim) for a in axes)
    ids = [as_tracer(i, what="lax.index_take") for i in idxs]
    if len(ids) != len(axes) or not ids:
        raise ValueError("lax.index_take: one index array per axis is needed")
    ids = [convert(i, dtypes.INDEX) if i.dtype != dtypes.INDEX else i for i in ids]
    ind = concatenate([expand_dims(i, (1,)) for i in ids], 1)
    sizes = as_tracer(np.array([s.shape[a] for a in axes], dtypes.INDEX))
    ind = ew.rem(ew.add(ew.rem(ind, broadcast_in_dim(sizes, ind.shape, [1])), broadcast_in_dim(sizes, ind.shape, [1])),
                 broadcast_in_dim(sizes, ind.shape, [1]))
    slice_sizes = [1 if d in axes else s.shape[d] for d in range(s.ndim)]
    dnums = GatherDimensionNumbers(offset_dims=tuple(range(1, s.ndim - len(axes) + 1)), collapsed_slice_dims=axes,
                                   start_index_map=axes)
    return gather(s, ind, dnums, tuple(slice_sizes))
