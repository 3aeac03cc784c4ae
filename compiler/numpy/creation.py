"""Array creation: array, asarray, zeros/ones/full/empty (and *_like), arange, linspace, logspace,
eye, identity, iota, tri, diag, meshgrid.

Default dtypes follow jax.numpy: float32 for floats, int32 for Python ints; numpy arrays keep
their dtype (float64 stays float64 — see ``hlo.dtypes``)."""
from __future__ import annotations

import builtins
from typing import Optional

import numpy as np

from .. import dtypes
from ..errors import ArgumentTypeError, DTypeError, ShapeError
from ..lax import structural as ls
from ..lax.common import (
    as_tracer,
    aval_of,
    broadcast_in_dim,
    broadcast_to_shape,
    canonical_axis,
    convert,
    from_nested,
    ir_type,
    reshape,
    static_int,
    static_shape,
    with_weak,
)
from ..tracing.abstract import is_arraylike
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit1


def _dtype_arg(dtype, fname):
    return None if dtype is None else dtypes.canonicalize(dtype, f"{fname}: dtype")


@api_function
def array(object, dtype=None, copy: bool = True, ndmin: int = 0) -> Tracer:
    """An array from an array, a number, or nested lists/tuples of them (which may contain
    traced values)."""
    dt = _dtype_arg(dtype, "array")
    if isinstance(object, Tracer):
        out = object if dt is None else convert(object, dt)
    elif isinstance(object, (list, tuple)):
        out = from_nested(object, dt)
    elif dtypes.is_python_scalar(object):
        out = as_tracer(object) if dt is None else convert(as_tracer(object, dt, "array"), dt)
    elif is_arraylike(object):
        out = as_tracer(object)
        if dt is not None:
            out = convert(out, dt)
    elif object is None:
        raise ArgumentTypeError("array: None is not an array")
    else:
        raise ArgumentTypeError(f"array: cannot make an array from a {type(object).__name__}")
    n = static_int("array: ndmin", ndmin)
    if out.ndim < n:
        out = reshape(out, (1,) * (n - out.ndim) + out.shape)
    return out


@api_function
def astype(x, dtype, /, *, copy: bool = True) -> Tracer:
    """``x`` converted to ``dtype`` (floats to integers truncate toward zero, as numpy)."""
    return convert(as_tracer(x, what="astype"), dtypes.canonicalize(dtype, "astype: dtype"))


@api_function
def asarray(a, dtype=None, order=None, copy=None) -> Tracer:
    """``a`` as an array (a no-op for traced arrays of the right dtype)."""
    return array(a, dtype=dtype, copy=False)


def _fill(fname, shape, value, dtype, weak=False) -> Tracer:
    shape = static_shape(fname, shape)
    return with_weak(broadcast_in_dim(as_tracer(np.asarray(value, dtype)), shape, []), weak)


@api_function
def zeros(shape, dtype=None) -> Tracer:
    return _fill("zeros", shape, 0, _dtype_arg(dtype, "zeros") or dtypes.float32)


@api_function
def ones(shape, dtype=None) -> Tracer:
    return _fill("ones", shape, 1, _dtype_arg(dtype, "ones") or dtypes.float32)


@api_function
def empty(shape, dtype=None) -> Tracer:
    """Same as ``zeros`` (arrays are immutable, so there is nothing to leave uninitialized)."""
    return zeros(shape, dtype)


@api_function
def full(shape, fill_value, dtype=None) -> Tracer:
    """An array of ``shape`` filled with ``fill_value`` (a scalar, or an array that broadcasts
    to ``shape``)."""
    shape = static_shape("full", shape)
    dt = _dtype_arg(dtype, "full")
    v = as_tracer(fill_value, dt, "full") if dt is not None else as_tracer(fill_value, what="full")
    return broadcast_to_shape(v, shape, "full")


def _like(fname, a, dtype, shape):
    av = aval_of(a, fname)
    dt = _dtype_arg(dtype, fname) or av.dtype
    return (av.shape if shape is None else static_shape(fname, shape)), dt, av.weak_type and dtype is None


@api_function
def zeros_like(a, dtype=None, shape=None) -> Tracer:
    s, dt, weak = _like("zeros_like", a, dtype, shape)
    return _fill("zeros_like", s, 0, dt, weak)


@api_function
def ones_like(a, dtype=None, shape=None) -> Tracer:
    s, dt, weak = _like("ones_like", a, dtype, shape)
    return _fill("ones_like", s, 1, dt, weak)


@api_function
def empty_like(a, dtype=None, shape=None) -> Tracer:
    return zeros_like(a, dtype, shape)


@api_function
def full_like(a, fill_value, dtype=None, shape=None) -> Tracer:
    s, dt, weak = _like("full_like", a, dtype, shape)
    v = as_tracer(fill_value, dt, "full_like")
    return with_weak(broadcast_to_shape(v, s, "full_like"), weak and dtypes.is_python_scalar(fill_value))


def _static_number(fname, v, what):
    if isinstance(v, Tracer):
        raise ArgumentTypeError(f"{fname}: {what} must be a static number (it sets the array's "
                                "length), not a traced value")
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if isinstance(v, (np.generic,)):
        v = v.item()
    if not isinstance(v, (int, float)):
        raise ArgumentTypeError(f"{fname}: {what} must be a number, got {type(v).__name__}")
    return v


@api_function
def arange(start, stop=None, step=None, dtype=None) -> Tracer:
    """Evenly spaced values in [start, stop) (static bounds); int32 for ints, float32 for floats."""
    s = _static_number("arange", start, "start")
    e = None if stop is None else _static_number("arange", stop, "stop")
    st = None if step is None else _static_number("arange", step, "step")
    if e is None:
        s, e = 0, s
    st = 1 if st is None else st
    if st == 0:
        raise ValueError("arange: step must not be zero")
    dt = _dtype_arg(dtype, "arange")
    is_int = all(isinstance(v, int) for v in (s, e, st))
    if dt is None:
        dt = dtypes.int32 if is_int else dtypes.float32
    n = builtins.max(0, int(np.ceil((e - s) / st)))
    if is_int and not dtypes.is_bool(dt):
        out = emit1("iota", [], {"iota_dimension": 0}, result_types=[ir_type((n,), dt)]) if n else \
            as_tracer(np.zeros((0,), dt))
        if st != 1 and n:
            out = emit1("multiply", [out, broadcast_in_dim(as_tracer(np.asarray(st, dt)), (n,), [])])
        if s != 0 and n:
            out = emit1("add", [out, broadcast_in_dim(as_tracer(np.asarray(s, dt)), (n,), [])])
        return out
    return as_tracer(np.arange(s, e, st, dtype=np.float64 if dtypes.is_float(dt) else None).astype(dt))


@api_function
def linspace(start, stop, num: int = 50, endpoint: bool = True, retstep: bool = False, dtype=None,
             axis: int = 0):
    """``num`` evenly spaced values from ``start`` to ``stop`` (arrays broadcast; as jax)."""
    num = static_int("linspace: num", num)
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    (a, b), cdt, _ = _promote_float("linspace", start, stop)
    dt = _dtype_arg(dtype, "linspace") or cdt
    bshape = a.shape
    ax = canonical_axis("linspace", axis, len(bshape) + 1)
    out_shape = list(bshape)
    out_shape.insert(ax, num)
    div = (num - 1) if endpoint else num
    broadcast_dims = [i for i in range(len(out_shape)) if i != ax]
    if num > 1:
        iota = emit1("iota", [], {"iota_dimension": ax}, result_types=[ir_type(out_shape, cdt)])
        step = emit1("divide", [iota, _bc(div, cdt, out_shape)])
        one = _bc(1, cdt, out_shape)
        aa = broadcast_in_dim(a, out_shape, broadcast_dims)
        bb = broadcast_in_dim(b, out_shape, broadcast_dims)
        out = emit1("add", [emit1("multiply", [aa, emit1("subtract", [one, step])]),
                            emit1("multiply", [bb, step])])
        if endpoint:
            st = [0] * len(out_shape)
            li = list(out_shape)
            li[ax] = num - 1
            head = ls.slice(out, st, li)
            tail_shape = list(out_shape)
            tail_shape[ax] = 1
            out = ls.concatenate([head, broadcast_in_dim(b, tail_shape, broadcast_dims)], ax)
    elif num == 1:
        shape1 = list(out_shape)
        out = broadcast_in_dim(a, shape1, broadcast_dims)
    else:
        out = as_tracer(np.zeros(out_shape, cdt))
    if dtypes.is_int(dt) and not dtypes.is_int(out.dtype):
        out = emit1("floor", [out])
    out = convert(out, dt)
    if retstep:
        delta = emit1("divide", [emit1("subtract", [b, a]), as_tracer(np.asarray(div, cdt))]) if div > 0 else \
            as_tracer(np.asarray(np.nan, cdt))
        return out, delta
    return out


def _bc(v, dt, shape):
    return broadcast_in_dim(as_tracer(np.asarray(v, dt)), shape, [])


def _promote_float(fname, *args):
    from .promotion import promote_inexact
    return promote_inexact(fname, *args)


@api_function
def logspace(start, stop, num: int = 50, endpoint: bool = True, base=10.0, dtype=None, axis: int = 0):
    from .ufuncs import power
    lin = linspace(start, stop, num, endpoint=endpoint, axis=axis)
    out = power(base, lin)
    return out if dtype is None else convert(out, dtypes.canonicalize(dtype))


@api_function
def eye(N: int, M: Optional[int] = None, k: int = 0, dtype=None) -> Tracer:
    """A 2-D array with ones on the k-th diagonal."""
    n = static_int("eye: N", N)
    m = n if M is None else static_int("eye: M", M)
    k = static_int("eye: k", k)
    dt = _dtype_arg(dtype, "eye") or dtypes.float32
    mask = _diag_mask((n, m), k, "EQ")
    return convert(mask, dt)


def _diag_mask(shape, k, direction) -> Tracer:
    """bool mask ``col - row (direction) k`` for the last two dims of ``shape``."""
    r = emit1("iota", [], {"iota_dimension": len(shape) - 2}, result_types=[ir_type(shape, dtypes.int32)])
    c = emit1("iota", [], {"iota_dimension": len(shape) - 1}, result_types=[ir_type(shape, dtypes.int32)])
    diff = emit1("subtract", [c, r])
    kk = broadcast_in_dim(as_tracer(np.asarray(k, dtypes.int32)), shape, [])
    return emit1("compare", [diff, kk], {"comparison_direction": direction, "compare_type": "SIGNED"})


@api_function
def identity(n: int, dtype=None) -> Tracer:
    return eye(n, dtype=dtype)


@api_function
def tri(N: int, M: Optional[int] = None, k: int = 0, dtype=None) -> Tracer:
    """Ones at and below the k-th diagonal."""
    n = static_int("tri: N", N)
    m = n if M is None else static_int("tri: M", M)
    dt = _dtype_arg(dtype, "tri") or dtypes.float32
    return convert(_diag_mask((n, m), static_int("tri: k", k), "LE"), dt)


@api_function
def iota(shape, dtype=None, axis: int = 0) -> Tracer:
    """An array of ``shape`` (an int or a tuple) whose values are the index along ``axis``
    (int32 unless ``dtype`` says otherwise): ``iota(4)`` is ``[0, 1, 2, 3]``."""
    shape = static_shape("iota", shape)
    dt = _dtype_arg(dtype, "iota") or dtypes.int32
    if not shape:
        raise ShapeError("iota: the shape needs at least one dimension")
    ax = canonical_axis("iota", axis, len(shape))
    if dtypes.is_bool(dt):
        raise DTypeError("iota: dtype bool is not allowed")
    return emit1("iota", [], {"iota_dimension": ax}, result_types=[ir_type(shape, dt)])


@api_function
def diag(v, k: int = 0) -> Tracer:
    """The k-th diagonal of a 2-D array, or a 2-D array with a 1-D array on its k-th diagonal."""
    from .shapes import diagonal
    from .ufuncs import where
    x = as_tracer(v, what="diag")
    k = static_int("diag: k", k)
    if x.ndim == 2:
        return diagonal(x, offset=k)
    if x.ndim != 1:
        raise ShapeError(f"diag: expected a 1-D or 2-D array, got shape {x.shape}")
    n = x.shape[0] + abs(k)
    mask = _diag_mask((n, n), k, "EQ")
    # value at (i, j) on the diagonal is v[min(i, j)]
    if k >= 0:
        row = ls.pad(x, as_tracer(np.zeros((), x.dtype)), [(0, abs(k), 0)])
        vals = broadcast_in_dim(row, (n, n), [0])
    else:
        col = ls.pad(x, as_tracer(np.zeros((), x.dtype)), [(0, abs(k), 0)])
        vals = broadcast_in_dim(col, (n, n), [1])
    return where(mask, vals, as_tracer(np.zeros((), x.dtype)))


@api_function
def meshgrid(*xi, indexing: str = "xy", sparse: bool = False, copy: bool = True):
    """Coordinate arrays from 1-D coordinate vectors ("xy": Cartesian, "ij": matrix indexing)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    ts = [as_tracer(x, what="meshgrid") for x in xi]
    for t in ts:
        if t.ndim != 1:
            raise ShapeError(f"meshgrid: expects 1-D arrays, got shape {t.shape}")
    shape = [t.shape[0] for t in ts]
    if indexing == "xy" and len(ts) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, t in enumerate(ts):
        d = i
        if indexing == "xy" and len(ts) >= 2 and i < 2:
            d = 1 - i
        if sparse:
            s = [1] * len(ts)
            s[d] = t.shape[0]
            out.append(reshape(t, s))
        else:
            out.append(broadcast_in_dim(t, shape, [d]))
    return out
