"""Shape and data-movement ops of hlo.lax: broadcasts, reshapes, transposes, slices (static and
dynamic), concatenation, padding, reversal, iota, full."""
from __future__ import annotations

import builtins
from typing import List, Sequence

import numpy as np

from hlo.ir.dim_expr import DimExpr

from .. import dtypes
from ..errors import ArgumentTypeError, DTypeError, ShapeError
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit1
from .common import as_tracer, canonical_axis, convert, ir_type, static_int, static_shape
from .common import broadcast_in_dim as _bid
from .common import reshape as _reshape


@api_function
def broadcast_in_dim(operand, shape, broadcast_dimensions) -> Tracer:
    """Broadcast ``operand`` to ``shape``; operand dimension i becomes result dimension
    ``broadcast_dimensions[i]`` (it must have size 1 or that dimension's size)."""
    x = as_tracer(operand, what="lax.broadcast_in_dim")
    shape = static_shape("lax.broadcast_in_dim", shape)
    dims = tuple(static_int("lax.broadcast_in_dim: broadcast_dimensions entry", d) for d in broadcast_dimensions)
    if len(dims) != x.ndim:
        raise ShapeError(f"lax.broadcast_in_dim: broadcast_dimensions {dims} needs one entry per "
                         f"operand dimension; operand shape is {x.shape}")
    for i, d in enumerate(dims):
        if not 0 <= d < len(shape) or x.shape[i] not in (1, shape[d]):
            raise ShapeError(f"lax.broadcast_in_dim: operand shape {x.shape} cannot broadcast to "
                             f"{shape} with broadcast_dimensions {dims}")
    if list(dims) != sorted(set(dims)):
        raise ShapeError(f"lax.broadcast_in_dim: broadcast_dimensions {dims} must be strictly increasing")
    return _bid(x, shape, dims)


@api_function
def broadcast(operand, sizes) -> Tracer:
    """Add leading dimensions of ``sizes``."""
    x = as_tracer(operand, what="lax.broadcast")
    sizes = static_shape("lax.broadcast", sizes)
    return _bid(x, sizes + x.shape, list(range(len(sizes), len(sizes) + x.ndim)))


@api_function
def reshape(operand, new_sizes, dimensions=None) -> Tracer:
    """Reshape (row-major); with ``dimensions``, transpose by it first."""
    x = as_tracer(operand, what="lax.reshape")
    new_sizes = static_shape("lax.reshape", new_sizes)
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise ShapeError(f"lax.reshape: cannot reshape {x.shape} ({x.size} elements) to {new_sizes}")
    if dimensions is not None:
        x = transpose(x, dimensions)
    return _reshape(x, new_sizes)


@api_function
def transpose(operand, permutation) -> Tracer:
    """Permute dimensions: result dimension i is operand dimension ``permutation[i]``."""
    x = as_tracer(operand, what="lax.transpose")
    perm = tuple(static_int("lax.transpose: permutation entry", p) for p in permutation)
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"lax.transpose: permutation {perm} is not a permutation of the "
                         f"{x.ndim} dimensions of {x.shape}")
    if perm == tuple(range(x.ndim)):
        return x
    return emit1("transpose", [x], {"permutation": list(perm)}, weak_type=x.weak_type)


@api_function
def squeeze(array, dimensions) -> Tracer:
    """Remove the given size-1 dimensions."""
    x = as_tracer(array, what="lax.squeeze")
    dims = {canonical_axis("lax.squeeze", d, x.ndim) for d in dimensions}
    for d in dims:
        if x.shape[d] != 1:
            raise ShapeError(f"lax.squeeze: dimension {d} of shape {x.shape} has size {x.shape[d]}, not 1")
    return _reshape(x, [s for i, s in enumerate(x.shape) if i not in dims])


@api_function
def expand_dims(array, dimensions) -> Tracer:
    """Insert size-1 dimensions at the given positions of the result."""
    x = as_tracer(array, what="lax.expand_dims")
    nd = x.ndim + len(dimensions)
    dims = sorted(canonical_axis("lax.expand_dims", d, nd) for d in dimensions)
    shape = list(x.shape)
    for d in dims:
        shape.insert(d, 1)
    return _reshape(x, shape)


@api_function
def slice(operand, start_indices, limit_indices, strides=None) -> Tracer:
    """Static slice ``operand[start:limit:stride]`` per dimension (in bounds, positive strides)."""
    x = as_tracer(operand, what="lax.slice")
    st = [static_int("lax.slice: start index", s) for s in start_indices]
    li = [s if isinstance(s, DimExpr) else static_int("lax.slice: limit index", s)  # symbolic too
          for s in limit_indices]
    sd = [static_int("lax.slice: stride", s) for s in strides] if strides is not None else [1] * x.ndim
    if not len(st) == len(li) == len(sd) == x.ndim:
        raise ShapeError(f"lax.slice: start, limit and strides need one entry per dimension of {x.shape}")
    for d in range(x.ndim):
        if not 0 <= st[d] <= li[d] <= x.shape[d] or sd[d] <= 0:
            raise ShapeError(f"lax.slice: [{st[d]}:{li[d]}:{sd[d]}] is out of bounds for dimension {d} "
                             f"of shape {x.shape}")
    if st == [0] * x.ndim and li == list(x.shape) and sd == [1] * x.ndim:
        return x
    attrs = {"start_indices": st, "limit_indices": li}
    if any(s != 1 for s in sd):
        attrs["strides"] = sd
    return emit1("slice", [x], attrs, weak_type=x.weak_type)


@api_function
def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0) -> Tracer:
    """Static slice along one axis (negative or None indices count as in Python)."""
    x = as_tracer(operand, what="lax.slice_in_dim")
    ax = canonical_axis("lax.slice_in_dim", axis, x.ndim)
    n = x.shape[ax]
    s, e, _ = builtins.slice(start_index, limit_index).indices(n)
    st, li, sd = [0] * x.ndim, list(x.shape), [1] * x.ndim
    st[ax], li[ax], sd[ax] = s, builtins.max(s, e), stride
    return slice(x, st, li, sd)


def _index_dtype(idx: Sequence[Tracer]) -> np.dtype:
    return dtypes.int64 if any(t.dtype.itemsize == 8 for t in idx) else dtypes.int32


def _start_indices(what: str, x: Tracer, start_indices, allow_negative: bool = True) -> List[Tracer]:
    """Scalar integer Tracers, one per dimension, of one common dtype (negative ones wrap)."""
    if isinstance(start_indices, Tracer) or isinstance(start_indices, np.ndarray):
        arr = as_tracer(start_indices, what=what)
        if arr.ndim != 1:
            raise ShapeError(f"{what}: start_indices must be a sequence of scalars or a 1-D array, got {arr.shape}")
        items = [_reshape(slice(arr, [i], [i + 1]), ()) for i in range(arr.shape[0])]
    else:
        try:
            items = list(start_indices)
        except TypeError:
            raise ArgumentTypeError(f"{what}: start_indices must be a sequence, got {start_indices!r}") from None
    if len(items) != x.ndim:
        raise ShapeError(f"{what}: needs {x.ndim} start indices for shape {x.shape}, got {len(items)}")
    tracers = []
    for i, v in enumerate(items):
        if isinstance(v, Tracer):
            if v.ndim != 0 or not dtypes.is_int(v.dtype):
                raise DTypeError(f"{what}: start index {i} must be an integer scalar, got {v.aval.str_short()}")
            tracers.append(v)
        else:
            tracers.append(None)
    dt = _index_dtype([t for t in tracers if t is not None])
    out = []
    for d, (v, t) in enumerate(zip(items, tracers)):
        if t is None:
            iv = static_int(f"{what}: start index", v)
            if iv < 0 and allow_negative:
                iv += x.shape[d]
            out.append(as_tracer(np.asarray(iv, dtype=dt)))
        else:
            t = convert(t, dt)
            if allow_negative and dtypes.is_signed(dt):
                zero = as_tracer(np.asarray(0, dt))
                t = emit1("select", [emit1("compare", [t, zero], {"comparison_direction": "LT", "compare_type": "SIGNED"}),
                                     emit1("add", [t, as_tracer(np.asarray(x.shape[d], dt))]), t])
            out.append(t)
    return out


@api_function
def dynamic_slice(operand, start_indices, slice_sizes, *, allow_negative_indices: bool = True) -> Tracer:
    """``operand[start:start+size]`` per dimension with traced starts. Negative starts count
    from the end (as jax); starts are then clamped so that the slice fits."""
    x = as_tracer(operand, what="lax.dynamic_slice")
    sizes = static_shape("lax.dynamic_slice: slice_sizes", slice_sizes)
    if len(sizes) != x.ndim or any(s > n for s, n in zip(sizes, x.shape)):
        raise ShapeError(f"lax.dynamic_slice: slice_sizes {sizes} do not fit operand shape {x.shape}")
    idx = _start_indices("lax.dynamic_slice", x, start_indices, allow_negative_indices)
    return emit1("dynamic_slice", [x] + idx, {"slice_sizes": list(sizes)}, weak_type=x.weak_type)


@api_function
def dynamic_update_slice(operand, update, start_indices, *, allow_negative_indices: bool = True) -> Tracer:
    """``operand`` with ``update`` written at ``start_indices`` (clamped so that it fits)."""
    x = as_tracer(operand, what="lax.dynamic_update_slice")
    u = as_tracer(update, x.dtype if dtypes.is_python_scalar(update) else None, "lax.dynamic_update_slice: update")
    if u.dtype != x.dtype:
        raise DTypeError(f"lax.dynamic_update_slice: update dtype {dtypes.dtype_name(u.dtype)} differs "
                         f"from operand dtype {dtypes.dtype_name(x.dtype)}")
    if u.ndim != x.ndim or any(a > b for a, b in zip(u.shape, x.shape)):
        raise ShapeError(f"lax.dynamic_update_slice: update shape {u.shape} does not fit operand shape {x.shape}")
    idx = _start_indices("lax.dynamic_update_slice", x, start_indices, allow_negative_indices)
    return emit1("dynamic_update_slice", [x, u] + idx, weak_type=x.weak_type)


@api_function
def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0) -> Tracer:
    x = as_tracer(operand, what="lax.dynamic_slice_in_dim")
    ax = canonical_axis("lax.dynamic_slice_in_dim", axis, x.ndim)
    starts = [0] * x.ndim
    starts[ax] = start_index
    sizes = list(x.shape)
    sizes[ax] = slice_size
    return dynamic_slice(x, starts, sizes)


@api_function
def dynamic_update_slice_in_dim(operand, update, start_index, axis) -> Tracer:
    x = as_tracer(operand, what="lax.dynamic_update_slice_in_dim")
    ax = canonical_axis("lax.dynamic_update_slice_in_dim", axis, x.ndim)
    starts = [0] * x.ndim
    starts[ax] = start_index
    return dynamic_update_slice(x, update, starts)


@api_function
def concatenate(operands, dimension) -> Tracer:
    """Join arrays of one dtype along ``dimension``."""
    ts = [as_tracer(o, what="lax.concatenate") for o in operands]
    if not ts:
        raise ValueError("lax.concatenate needs at least one operand")
    dim = canonical_axis("lax.concatenate", dimension, ts[0].ndim)
    for t in ts[1:]:
        if t.dtype != ts[0].dtype:
            raise DTypeError(f"lax.concatenate: operands must share a dtype, got "
                             f"{', '.join(dtypes.dtype_name(u.dtype) for u in ts)}")
        if t.ndim != ts[0].ndim or any(i != dim and a != b for i, (a, b) in enumerate(zip(t.shape, ts[0].shape))):
            raise ShapeError(f"lax.concatenate: shapes {', '.join(str(u.shape) for u in ts)} differ "
                             f"outside dimension {dim}")
    if len(ts) == 1:
        return ts[0]
    return emit1("concatenate", ts, {"dimension": dim}, weak_type=all(t.weak_type for t in ts))


@api_function
def pad(operand, padding_value, padding_config) -> Tracer:
    """Pad with ``padding_value``: ``padding_config`` has one ``(low, high, interior)`` per
    dimension (low/high may be negative, which crops)."""
    x = as_tracer(operand, what="lax.pad")
    pv = as_tracer(padding_value, x.dtype if dtypes.is_python_scalar(padding_value) else None, "lax.pad: padding_value")
    if pv.dtype != x.dtype or pv.ndim != 0:
        raise DTypeError(f"lax.pad: padding_value must be a scalar of the operand's dtype "
                         f"{dtypes.dtype_name(x.dtype)}, got {pv.aval.str_short()}")
    cfg = [tuple(static_int("lax.pad: padding_config entry", v) for v in c) for c in padding_config]
    if len(cfg) != x.ndim or any(len(c) != 3 for c in cfg):
        raise ShapeError(f"lax.pad: padding_config needs one (low, high, interior) per dimension of {x.shape}")
    for d, (lo, hi, it) in enumerate(cfg):
        n = x.shape[d]
        if it < 0 or lo + hi + n + max(n - 1, 0) * it < 0:
            raise ShapeError(f"lax.pad: padding {cfg[d]} is invalid for dimension {d} of size {n}")
    if all(c == (0, 0, 0) for c in cfg):
        return x
    return emit1("pad", [x, pv], {"edge_padding_low": [c[0] for c in cfg],
                                  "edge_padding_high": [c[1] for c in cfg],
                                  "interior_padding": [c[2] for c in cfg]}, weak_type=x.weak_type)


@api_function
def rev(operand, dimensions) -> Tracer:
    """Reverse the order of elements along ``dimensions``."""
    x = as_tracer(operand, what="lax.rev")
    dims = sorted({canonical_axis("lax.rev", d, x.ndim) for d in dimensions})
    if not dims:
        return x
    return emit1("reverse", [x], {"dimensions": dims}, weak_type=x.weak_type)


@api_function
def iota(dtype, size) -> Tracer:
    """``[0, 1, ..., size-1]`` of ``dtype``."""
    return broadcasted_iota(dtype, (size,), 0)


@api_function
def broadcasted_iota(dtype, shape, dimension) -> Tracer:
    """An array of ``shape`` whose value is the index along ``dimension``."""
    dt = dtypes.canonicalize(dtype, "lax.iota: dtype")
    shape = static_shape("lax.broadcasted_iota", shape)
    dim = canonical_axis("lax.broadcasted_iota", dimension, len(shape))
    if dtypes.is_bool(dt):
        raise DTypeError("lax.iota: dtype bool is not allowed")
    return emit1("iota", [], {"iota_dimension": dim}, result_types=[ir_type(shape, dt)])


@api_function
def full(shape, fill_value, dtype=None) -> Tracer:
    """An array of ``shape`` filled with ``fill_value`` (a scalar)."""
    shape = static_shape("lax.full", shape)
    if dtype is not None:
        v = as_tracer(fill_value, dtypes.canonicalize(dtype), "lax.full")
    else:
        v = as_tracer(fill_value, what="lax.full")
    if v.ndim != 0:
        raise ShapeError(f"lax.full: fill_value must be a scalar, got shape {v.shape}")
    return _bid(v, shape, [])


@api_function
def full_like(x, fill_value, dtype=None, shape=None) -> Tracer:
    from .common import aval_of
    a = aval_of(x, "lax.full_like")
    return full(a.shape if shape is None else shape, fill_value, a.dtype if dtype is None else dtype)


@api_function
def collapse(operand, start_dimension, stop_dimension=None) -> Tracer:
    """Merge dimensions ``[start, stop)`` into one."""
    x = as_tracer(operand, what="lax.collapse")
    stop = x.ndim if stop_dimension is None else stop_dimension
    s = canonical_axis("lax.collapse", start_dimension, x.ndim + 1) if x.ndim else 0
    shape = list(x.shape[:s]) + [int(np.prod(x.shape[s:stop], dtype=np.int64))] + list(x.shape[stop:])
    return _reshape(x, shape)
