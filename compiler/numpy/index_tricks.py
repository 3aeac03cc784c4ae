"""Index construction and index-driven updates in hlo.numpy: tril/triu/diag/mask indices,
indices, ix_, unravel_index, ravel_multi_index; select, choose, piecewise, lexsort; the
functional forms of numpy's in-place updates (fill_diagonal, put, place, put_along_axis:
``inplace=False`` returns the updated copy; jax's default ``inplace=True`` is an error, as in
jax, since arrays are immutable); delete and insert with static positions; diagflat."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from . import creation as cr
from . import reductions as red
from . import shapes as sh
from . import ufuncs as uf
from .promotion import promote


def _i32(a) -> Tracer:
    return cr.asarray(np.asarray(a, np.int32))


def _static_int(what, v, name) -> int:
    if isinstance(v, Tracer):
        raise TypeError(f"{what}: {name} must be a static integer, not a traced value")
    return int(v)


@api_function
def tril_indices(n, k=0, m=None):
    """The (row, column) indices of the lower triangle of an ``n x m`` matrix (int32)."""
    n = _static_int("tril_indices", n, "n")
    r, c = np.tril_indices(n, _static_int("tril_indices", k, "k"), None if m is None else int(m))
    return _i32(r), _i32(c)


@api_function
def triu_indices(n, k=0, m=None):
    """The (row, column) indices of the upper triangle of an ``n x m`` matrix (int32)."""
    n = _static_int("triu_indices", n, "n")
    r, c = np.triu_indices(n, _static_int("triu_indices", k, "k"), None if m is None else int(m))
    return _i32(r), _i32(c)


def _shape2(what, arr):
    shape = arr.shape if hasattr(arr, "shape") else np.shape(arr)
    if len(shape) != 2:
        raise ValueError(f"{what}: input array must be 2-D, got shape {tuple(shape)}")
    return shape


def tril_indices_from(arr, k=0):
    n, m = _shape2("tril_indices_from", arr)
    return tril_indices(n, k, m)


def triu_indices_from(arr, k=0):
    n, m = _shape2("triu_indices_from", arr)
    return triu_indices(n, k, m)


@api_function
def diag_indices(n, ndim=2):
    """``ndim`` copies of ``arange(n)``: the main diagonal's indices."""
    n = _static_int("diag_indices", n, "n")
    if n < 0:
        raise ValueError(f"n argument to diag_indices must be nonnegative, got {n}")
    return tuple(_i32(np.arange(n)) for _ in range(int(ndim)))


def diag_indices_from(arr):
    shape = arr.shape if hasattr(arr, "shape") else np.shape(arr)
    if len(shape) < 2 or len(set(shape)) != 1:
        raise ValueError(f"diag_indices_from: all dimensions of the input must be of equal length, got "
                         f"shape {tuple(shape)}")
    return diag_indices(shape[0], len(shape))


def mask_indices(n, mask_func, k=0, *, size=None):
    """The indices where ``mask_func(ones((n, n)), k)`` is nonzero."""
    from .data_dependent import nonzero
    return nonzero(mask_func(np.ones((int(n), int(n)), np.int32), k), size=size)


@api_function
def indices(dimensions, dtype=np.int32, sparse=False):
    """The index grid of ``dimensions``: a stacked array (or, ``sparse``, broadcastable arrays)."""
    dims = tuple(int(d) for d in dimensions)
    out = []
    for i, d in enumerate(dims):
        shape = [1] * len(dims)
        shape[i] = d
        g = sh.reshape(cr.arange(d, dtype=dtype), shape)
        out.append(g if sparse else sh.broadcast_to(g, dims))
    if sparse:
        return tuple(out)
    return sh.stack(out) if out else cr.zeros((0,), dtype)


def ix_(*args):
    """Open mesh from 1-D sequences: each reshaped to broadcast along its own dimension."""
    n = len(args)
    out = []
    for i, a in enumerate(args):
        t = cr.asarray(a)
        if t.ndim != 1:
            raise ValueError(f"ix_: arguments must be 1-dimensional, got shape {t.shape}")
        if t.dtype == np.bool_:
            from .data_dependent import nonzero
            t = nonzero(a)[0]
        out.append(sh.reshape(t, [t.shape[0] if j == i else 1 for j in range(n)]))
    return tuple(out)


@api_function
def unravel_index(indices, shape):
    """The coordinates of flat ``indices`` in an array of ``shape`` (negative indices count from
    the end; out-of-range ones are clipped, as in jax)."""
    shape = tuple(int(d) for d in shape)
    idx = cr.asarray(indices)
    if not dtypes.is_int(idx.dtype):
        raise TypeError(f"unravel_index: indices must be integers, got {idx.dtype}")
    total = int(np.prod(shape))
    idx = uf.where(idx < 0, idx + total, idx)
    idx = uf.clip(idx, 0, max(total - 1, 0))
    out = []
    for d in reversed(shape):
        out.append(uf.remainder(idx, d) if d else idx * 0)
        idx = uf.floor_divide(idx, d) if d else idx
    return tuple(reversed(out))


def ravel_multi_index(multi_index, dims, mode="raise", order="C") -> Tracer:
    """Flat indices of the coordinate arrays ``multi_index`` in an array of ``dims``;
    ``mode`` 'clip' or 'wrap' (jax's 'raise' needs concrete indices, checked here)."""
    dims = tuple(int(d) for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(multi_index)} index arrays for {len(dims)} dimensions")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    if mode == "raise":
        if any(isinstance(i, Tracer) for i in multi_index):
            raise TypeError("ravel_multi_index: mode='raise' needs concrete indices; pass mode='clip' or "
                            "mode='wrap' for traced ones, as in jax")
        for i, d in zip(multi_index, dims):
            a = np.asarray(i)
            if a.size and (a.min() < 0 or a.max() >= d):
                raise ValueError("invalid entry in coordinates array")
    return _ravel_multi_index(tuple(multi_index), dims, mode, order)


@api_function
def _ravel_multi_index(multi_index, dims, mode, order) -> Tracer:
    idx = [cr.asarray(i) for i in multi_index]
    if mode == "raise":
        pass  # checked by the caller on concrete indices
    elif mode == "clip":
        idx = [uf.clip(i, 0, d - 1) for i, d in zip(idx, dims)]
    elif mode == "wrap":
        idx = [uf.remainder(i, d) for i, d in zip(idx, dims)]
    else:
        raise ValueError(f"ravel_multi_index: invalid mode={mode!r}; expected 'raise', 'wrap' or 'clip'")
    order_dims = list(range(len(dims)))
    if order == "F":
        order_dims.reverse()
    out, stride = None, 1
    for k in reversed(order_dims):
        term = idx[k].astype(np.int32) * np.int32(stride)
        out = term if out is None else out + term
        stride *= dims[k]
    return out


@api_function
def select(condlist, choicelist, default=0) -> Tracer:
    """For each element, the value of the first choice whose condition holds, else ``default``."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: condlist and choicelist must have one length, got {len(condlist)} and "
                         f"{len(choicelist)}")
    if not condlist:
        raise ValueError("select with an empty condition list is not possible")
    choices = promote("select", *choicelist, default)[0]
    out = choices[-1]
    for c, v in reversed(list(zip(condlist, choices[:-1]))):
        ct = cr.asarray(c)
        if ct.dtype != np.bool_:
            raise TypeError(f"select: condlist entries must be boolean, got {ct.dtype}")
        out = uf.where(ct, v, out)
    return out


def choose(a, choices, out=None, mode="raise") -> Tracer:
    """``choices[a[i]][i]`` for each index ``i`` (everything broadcast); ``mode`` 'clip' or
    'wrap' ('raise' needs concrete ``a``)."""
    n = len(choices)
    if mode == "raise":
        if isinstance(a, Tracer):
            raise TypeError("choose: mode='raise' needs a concrete index array; pass mode='clip' or "
                            "mode='wrap' for a traced one")
        an = np.asarray(a)
        if an.size and (an.min() < 0 or an.max() >= n):
            raise ValueError("invalid entry in choice array")
    return _choose(a, tuple(choices), mode)


@api_function
def _choose(a, choices, mode) -> Tracer:
    n = len(choices)
    idx = cr.asarray(a)
    if mode == "clip":
        idx = uf.clip(idx, 0, n - 1)
    elif mode == "wrap":
        idx = uf.remainder(idx, n)
    elif mode != "raise":  # (checked by the caller)
        raise ValueError(f"choose: invalid mode={mode!r}")
    arrays = sh.broadcast_arrays(idx, *promote("choose", *choices, broadcast=False)[0])
    idx, cs = arrays[0], arrays[1:]
    out_v = cs[0]
    for i in range(1, n):
        out_v = uf.where(idx == i, cs[i], out_v)
    return out_v


@api_function
def piecewise(x, condlist, funclist, *args, **kw) -> Tracer:
    """numpy.piecewise: ``funclist[i](x)`` (or a constant) where ``condlist[i]`` holds (the last
    true condition wins); one more function than conditions gives the value elsewhere (else 0).
    Every function is evaluated on all of ``x``."""
    t = cr.asarray(x)
    conds = [condlist] if isinstance(condlist, (Tracer, np.ndarray)) and cr.asarray(condlist).ndim == t.ndim \
        and not isinstance(condlist, (list, tuple)) else list(condlist)
    nc, nf = len(conds), len(funclist)
    if nf not in (nc, nc + 1):
        raise ValueError(f"piecewise: with {nc} condition(s), either {nc} or {nc + 1} functions are needed, "
                         f"got {nf}")

    def val(f):
        r = f(t, *args, **kw) if callable(f) else f
        return sh.broadcast_to(cr.asarray(r).astype(t.dtype), t.shape)
    if nf == nc + 1:
        out = val(funclist[-1])
    else:
        out = cr.zeros(t.shape, t.dtype)
    for c, f in zip(conds, funclist[:nc]):
        out = uf.where(cr.asarray(c), val(f), out)
    return out


@api_function
def lexsort(keys, axis=-1) -> Tracer:
    """Indices that sort by the last key first, then the one before, ... (stable; int32)."""
    from ..lax.common import ir_type
    from ..lax.reductions import sort_comparator_region
    from ..tracing.tracer import emit, emit1
    ks = [cr.asarray(k) for k in keys]
    if not ks:
        raise TypeError("lexsort: need sequence of keys with len > 0")
    shape = ks[0].shape
    for k in ks:
        if k.shape != shape:
            raise ShapeError(f"lexsort: all keys must have one shape, got {[k.shape for k in ks]}")
    if not shape:
        raise ShapeError("lexsort: keys must have at least one dimension")
    ax = axis % len(shape)
    ops = list(reversed(ks))
    iota = emit1("iota", [], {"iota_dimension": ax}, result_types=[ir_type(shape, dtypes.INDEX)])
    region = sort_comparator_region([o.dtype for o in ops] + [dtypes.INDEX], len(ops))
    outs = emit("sort", ops + [iota], {"dimension": ax, "is_stable": True}, regions=[region])
    return outs[-1]


def _refuse_inplace(what, inplace):
    if inplace:
        raise ValueError(f"hlo.numpy arrays, like jax.numpy's, are immutable, so {what} cannot be done in place: pass "
                         f"inplace=False to get the updated array, as jax.numpy.{what}(..., inplace=False)")


def fill_diagonal(a, val, wrap=False, *, inplace=True) -> Tracer:
    """``a`` with its main diagonal set to ``val`` (repeated as needed); ``inplace=False``."""
    _refuse_inplace("fill_diagonal", inplace)
    return _fill_diagonal(a, val, wrap)


@api_function
def _fill_diagonal(a, val, wrap):
    t = cr.asarray(a)
    if t.ndim < 2:
        raise ValueError("fill_diagonal: array must be at least 2-d")
    if t.ndim > 2 and len(set(t.shape)) != 1:
        raise ValueError("fill_diagonal: all dimensions of input must be of equal length")
    flat = sh.ravel(t)
    if t.ndim == 2:
        step = t.shape[1] + 1
        end = t.size if wrap else min(t.shape[1] * t.shape[1], t.size)
    else:
        step = 1 + int(np.cumprod(t.shape[:-1]).sum())
        end = t.size
    pos = np.arange(0, end, step)
    v = sh.ravel(cr.asarray(val)).astype(t.dtype)
    if v.shape[0] == 0:
        return t
    vals = sh.take(v, np.arange(len(pos)) % v.shape[0])
    return sh.reshape(flat.at[_i32(pos)].set(vals), t.shape)


def put(a, ind, v, mode=None, *, inplace=True) -> Tracer:
    """The flattened ``a`` with ``v`` (repeated as needed) at the flat indices ``ind``;
    ``inplace=False``."""
    _refuse_inplace("put", inplace)
    return _put(a, ind, v, mode)


@api_function
def _put(a, ind, v, mode):
    t = cr.asarray(a)
    flat = sh.ravel(t)
    i = sh.ravel(cr.asarray(ind))
    vv = sh.ravel(cr.asarray(v)).astype(t.dtype)
    if i.shape[0] == 0 or vv.shape[0] == 0:
        return t
    vals = sh.take(vv, np.arange(i.shape[0]) % vv.shape[0])
    n = flat.shape[0]
    if mode == "clip":
        i = uf.clip(i, 0, n - 1)
    elif mode == "wrap":
        i = uf.remainder(i, n)
    elif mode not in (None, "fill", "raise", "drop"):
        raise ValueError(f"put: invalid mode={mode!r}")
    return sh.reshape(flat.at[i].set(vals, mode="drop" if mode in (None, "fill", "drop", "raise") else None),
                      t.shape)


def place(arr, mask, vals, *, inplace=True) -> Tracer:
    """``arr`` with its elements where ``mask`` is true replaced, in order, by ``vals``
    (repeated as needed); ``inplace=False``."""
    _refuse_inplace("place", inplace)
    return _place(arr, mask, vals)


@api_function
def _place(arr, mask, vals):
    t = cr.asarray(arr)
    m = sh.ravel(cr.asarray(mask)).astype(bool)
    flat = sh.ravel(t)
    v = sh.ravel(cr.asarray(vals)).astype(t.dtype)
    if v.shape[0] == 0:
        return t
    k = red.cumsum(m.astype(np.int32)) - np.int32(1)
    chosen = sh.take(v, uf.remainder(uf.maximum(k, 0), v.shape[0]))
    return sh.reshape(uf.where(m, chosen, flat), t.shape)


def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None) -> Tracer:
    """``arr`` with ``values`` written at ``indices`` along ``axis`` (as take_along_axis
    reads); ``inplace=False``."""
    _refuse_inplace("put_along_axis", inplace)
    return _put_along_axis(arr, indices, values, axis, mode)


@api_function
def _put_along_axis(arr, indices, values, axis, mode):
    t = cr.asarray(arr)
    idx = cr.asarray(indices)
    if axis is None:
        t2 = sh.ravel(t)
        return sh.reshape(_put_along_axis(t2, sh.ravel(idx), sh.ravel(cr.asarray(values)), 0, mode), t.shape)
    ax = axis % t.ndim
    if idx.ndim != t.ndim:
        raise ValueError(f"put_along_axis: indices must have the array's {t.ndim} dimensions, got {idx.ndim}")
    bshape = [max(a, b) if a == 1 or b == 1 else a for a, b in zip(t.shape, idx.shape)]
    bshape[ax] = idx.shape[ax]
    idx = sh.broadcast_to(idx, bshape)
    idx = uf.where(idx < 0, idx + t.shape[ax], idx)
    grids = []
    for d in range(t.ndim):
        if d == ax:
            grids.append(idx)
        else:
            shape = [1] * t.ndim
            shape[d] = bshape[d]
            grids.append(sh.broadcast_to(sh.reshape(cr.arange(bshape[d], dtype=np.int32), shape), bshape))
    v = sh.broadcast_to(cr.asarray(values).astype(t.dtype), bshape)
    return t.at[tuple(grids)].set(v, mode="drop" if mode in (None, "fill", "drop") else mode)


def _static_positions(what, obj):
    if isinstance(obj, Tracer):
        raise TypeError(f"{what}: the positions must be static (Python ints, slices or numpy arrays): the "
                        "result's shape depends on them")
    return obj


@api_function
def delete(arr, obj, axis=None, *, assume_unique_indices=False) -> Tracer:
    """``arr`` without the entries at the static positions ``obj`` along ``axis`` (flattened
    when None)."""
    obj = _static_positions("delete", obj)
    t = cr.asarray(arr)
    if axis is None:
        t, axis = sh.ravel(t), 0
    ax = axis % t.ndim
    keep = np.delete(np.arange(t.shape[ax]), obj)
    return sh.take(t, _i32(keep), axis=ax)


@api_function
def insert(arr, obj, values, axis=None) -> Tracer:
    """``arr`` with ``values`` inserted before the static positions ``obj`` along ``axis``
    (flattened when None), with numpy's rules for how ``values`` broadcast."""
    obj = _static_positions("insert", obj)
    t = cr.asarray(arr)
    v = cr.asarray(values).astype(t.dtype)
    if axis is None:
        t, axis = sh.ravel(t), 0
    ax = axis % t.ndim
    src = np.arange(t.size).reshape(t.shape)
    marks = -1 - np.arange(max(v.size, 1)).reshape(v.shape if v.size else (1,))
    plan = np.insert(src, obj, marks if v.size else -1, axis=ax)  # numpy decides the layout
    from_arr = plan >= 0
    a_idx = np.where(from_arr, plan, 0).astype(np.int32)
    v_idx = np.where(from_arr, 0, -1 - plan).astype(np.int32)
    flat_a = sh.take(sh.ravel(t), _i32(a_idx.ravel()))
    flat_v = sh.take(sh.ravel(v), _i32(v_idx.ravel())) if v.size else flat_a
    out = uf.where(cr.asarray(from_arr.ravel()), flat_a, flat_v)
    return sh.reshape(out, plan.shape)


@api_function
def diagflat(v, k=0) -> Tracer:
    """A 2-D array with the flattened ``v`` on diagonal ``k``."""
    return cr.diag(sh.ravel(cr.asarray(v)), k)
