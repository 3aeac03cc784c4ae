"""Reductions of hlo.numpy: sum, prod, mean, var, std, max/min, argmax/argmin, any/all,
cumulative sums and products, count_nonzero, ptp, average, median and the nan-ignoring variants.

Every reduction takes ``axis`` (None, an int or a tuple) and ``keepdims``. Result dtypes follow
jax.numpy: sums and products of bools and small integers accumulate in int32 (uint32 for
unsigned), mean/var/std of integers are float32 (float64 for 64-bit integers), and float16 /
bfloat16 means and variances accumulate in float32 and round once.
"""
from __future__ import annotations

import builtins

import numpy as np

from hlo.ir.dim_expr import DimExpr

from .. import dtypes
from ..errors import ShapeError
from ..lax import elementwise as ew
from ..lax import reductions as lr
from ..lax.common import (
    as_tracer,
    broadcast_in_dim,
    canonical_axes,
    canonical_axis,
    convert,
    reshape,
    with_weak,
)
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit1
from . import ufuncs


def _keep(x: Tracer, out: Tracer, axes, keepdims: bool) -> Tracer:
    if not keepdims:
        return out
    shape = [1 if i in axes else s for i, s in enumerate(x.shape)]
    return reshape(out, shape)


def _reduce(x: Tracer, axes, op, init) -> Tracer:
    if not axes:
        return x
    init_t = as_tracer(np.asarray(init, dtype=x.dtype))
    body = lr._scalar_body("a reduction", op, [x.dtype], False)
    return emit1("reduce", [x, init_t], {"dimensions": sorted(axes)}, regions=[body])


def _masked(fname, x: Tracer, where, fill) -> Tracer:
    if where is None:
        return x
    from ..lax.common import broadcast_to_shape
    from .promotion import to_bool
    m = broadcast_to_shape(to_bool(as_tracer(where, what=f"{fname}: where")), x.shape, fname)
    return emit1("select", [m, x, broadcast_in_dim(as_tracer(np.asarray(fill, x.dtype)), x.shape, [])])


def _sum_like(fname, a, axis, dtype, keepdims, initial, where, op, identity, dtype_rule):
    x = as_tracer(a, what=fname)
    axes = canonical_axes(fname, axis, x.ndim)
    dt = dtypes.canonicalize(dtype, f"{fname}: dtype") if dtype is not None else dtype_rule(x.dtype)
    if dtypes.is_bool(dt):
        ident = bool(identity)
        opf = ew.or_ if op is ew.add else ew.and_
    else:
        ident, opf = identity, op
    # f16/bf16 accumulate in f32 and round once at the end (as jax.numpy and torch do): a
    # bf16 running sum of 24 normal values was off by up to 0.14.
    cdt = _upcast(dt)
    xc = convert(x, cdt)
    xc = _masked(fname, xc, where, ident)
    out = _reduce(xc, axes, opf, ident)
    if initial is not None:
        out = emit1("add" if op is ew.add else "multiply",
                    [out, broadcast_in_dim(as_tracer(np.asarray(initial, cdt)), out.shape, [])])
    return _keep(x, convert(out, dt), axes, keepdims)


@api_function
def sum(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None) -> Tracer:
    """Sum over ``axis``."""
    _no_out("sum", out)
    return _sum_like("sum", a, axis, dtype, keepdims, initial, where, ew.add, 0, dtypes.sum_dtype)


@api_function
def prod(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None) -> Tracer:
    """Product over ``axis``."""
    _no_out("prod", out)
    return _sum_like("prod", a, axis, dtype, keepdims, initial, where, ew.mul, 1, dtypes.sum_dtype)


def _no_out(fname, out):
    if out is not None:
        raise TypeError(f"{fname}: out= is not supported (arrays are immutable); use the return value")


def _count(x: Tracer, axes) -> int:
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


def _upcast(dt):
    return dtypes.float32 if dt in (dtypes.float16, dtypes.bfloat16) else dt


@api_function
def mean(a, axis=None, dtype=None, out=None, keepdims: bool = False, where=None) -> Tracer:
    """Arithmetic mean over ``axis``."""
    _no_out("mean", out)
    x = as_tracer(a, what="mean")
    axes = canonical_axes("mean", axis, x.ndim)
    dt = dtypes.canonicalize(dtype, "mean: dtype") if dtype is not None else dtypes.to_inexact(x.dtype)
    cdt = _upcast(dtypes.to_inexact(dt) if not dtypes.is_float(dt) else dt)
    xc = convert(x, cdt)
    if where is None:
        total = _reduce(xc, axes, ew.add, 0)
        if builtins.any(isinstance(x.shape[i], DimExpr) for i in axes):  # a symbolic count: summed ones
            ones = broadcast_in_dim(as_tracer(np.asarray(1, cdt)), x.shape, [])
            res = emit1("divide", [total, _reduce(ones, axes, ew.add, 0)])
        else:
            n = as_tracer(np.asarray(_count(x, axes), cdt))
            res = emit1("divide", [total, broadcast_in_dim(n, total.shape, [])])
    else:
        from ..lax.common import broadcast_to_shape
        from .promotion import to_bool
        m = broadcast_to_shape(to_bool(as_tracer(where, what="mean: where")), x.shape, "mean")
        total = _reduce(_masked("mean", xc, m, 0), axes, ew.add, 0)
        cnt = _reduce(convert(m, cdt), axes, ew.add, 0)
        res = emit1("divide", [total, cnt])
    return _keep(x, convert(res, dt), axes, keepdims)


@api_function
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims: bool = False, where=None,
        correction=None) -> Tracer:
    """Variance over ``axis``: mean of squared deviations, divided by ``n - ddof``."""
    _no_out("var", out)
    x = as_tracer(a, what="var")
    axes = canonical_axes("var", axis, x.ndim)
    if correction is not None:
        ddof = correction
    dt = dtypes.canonicalize(dtype, "var: dtype") if dtype is not None else dtypes.to_inexact(x.dtype)
    cdt = _upcast(dtypes.to_inexact(dt) if not dtypes.is_float(dt) else dt)
    xc = convert(x, cdt)
    if where is not None:
        from ..lax.common import broadcast_to_shape
        from .promotion import to_bool
        m = broadcast_to_shape(to_bool(as_tracer(where, what="var: where")), x.shape, "var")
        cnt = _reduce(convert(m, cdt), axes, ew.add, 0)
        mu = emit1("divide", [_reduce(_masked("var", xc, m, 0), axes, ew.add, 0), cnt])
    else:
        m = None
        cnt = broadcast_in_dim(as_tracer(np.asarray(_count(x, axes), cdt)), [s for i, s in enumerate(x.shape) if i not in axes], [])
        mu = emit1("divide", [_reduce(xc, axes, ew.add, 0), cnt])
    keep_dims = [i for i in range(x.ndim) if i not in axes]
    centered = emit1("subtract", [xc, broadcast_in_dim(mu, x.shape, keep_dims)])
    sq = emit1("multiply", [centered, centered])
    if m is not None:
        sq = _masked("var", sq, m, 0)
    ss = _reduce(sq, axes, ew.add, 0)
    denom = emit1("subtract", [cnt, broadcast_in_dim(as_tracer(np.asarray(ddof, cdt)), cnt.shape, [])])
    res = emit1("divide", [ss, denom])
    return _keep(x, convert(res, dt), axes, keepdims)


@api_function
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims: bool = False, where=None,
        correction=None) -> Tracer:
    """Standard deviation: sqrt of ``var``."""
    v = var(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, where=where,
            correction=correction)
    return emit1("sqrt", [v])


def _extreme(fname, a, axis, keepdims, initial, where, is_max):
    x = as_tracer(a, what=fname)
    axes = canonical_axes(fname, axis, x.ndim)
    if initial is None and builtins.any(x.shape[i] == 0 for i in axes):
        raise ShapeError(f"{fname}: zero-size reduction (shape {x.shape}, axis {axis}) has no "
                         "identity; pass initial=")
    if where is not None and initial is None:
        raise ValueError(f"{fname}: where= needs initial= as well")
    ident = dtypes.min_value(x.dtype) if is_max else dtypes.max_value(x.dtype)
    op = ew.max if is_max else ew.min
    xm = _masked(fname, x, where, ident)
    out = _reduce(xm, axes, op, ident)
    if initial is not None:
        out = emit1("maximum" if is_max else "minimum",
                    [out, broadcast_in_dim(as_tracer(np.asarray(initial, x.dtype)), out.shape, [])])
    return with_weak(_keep(x, out, axes, keepdims), x.weak_type)


@api_function
def max(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None) -> Tracer:
    """Maximum over ``axis`` (NaN if any element is NaN)."""
    _no_out("max", out)
    return _extreme("max", a, axis, keepdims, initial, where, True)


@api_function
def min(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None) -> Tracer:
    """Minimum over ``axis`` (NaN if any element is NaN)."""
    _no_out("min", out)
    return _extreme("min", a, axis, keepdims, initial, where, False)


amax, amin = max, min


def _arg(fname, a, axis, keepdims, is_max):
    x = as_tracer(a, what=fname)
    if axis is None:
        flat = reshape(x, (x.size,))
        out = lr._argminmax(flat, 0, dtypes.INDEX, is_max)
        return reshape(out, (1,) * x.ndim) if keepdims else out
    ax = canonical_axis(fname, axis, x.ndim)
    out = lr._argminmax(x, ax, dtypes.INDEX, is_max)
    return _keep(x, out, (ax,), keepdims)


@api_function
def argmax(a, axis=None, out=None, keepdims: bool = False) -> Tracer:
    """Index of the maximum along ``axis`` (of the flattened array when axis is None)."""
    _no_out("argmax", out)
    return _arg("argmax", a, axis, keepdims, True)


@api_function
def argmin(a, axis=None, out=None, keepdims: bool = False) -> Tracer:
    """Index of the minimum along ``axis`` (of the flattened array when axis is None)."""
    _no_out("argmin", out)
    return _arg("argmin", a, axis, keepdims, False)


@api_function
def any(a, axis=None, out=None, keepdims: bool = False, where=None) -> Tracer:
    _no_out("any", out)
    from .promotion import to_bool
    x = to_bool(as_tracer(a, what="any"))
    axes = canonical_axes("any", axis, x.ndim)
    return _keep(x, _reduce(_masked("any", x, where, False), axes, ew.or_, False), axes, keepdims)


@api_function
def all(a, axis=None, out=None, keepdims: bool = False, where=None) -> Tracer:
    _no_out("all", out)
    from .promotion import to_bool
    x = to_bool(as_tracer(a, what="all"))
    axes = canonical_axes("all", axis, x.ndim)
    return _keep(x, _reduce(_masked("all", x, where, True), axes, ew.and_, True), axes, keepdims)


def _cum(fname, a, axis, dtype, lax_fn, reverse=False):
    x = as_tracer(a, what=fname)
    if axis is None:
        x = reshape(x, (x.size,))
        axis = 0
    ax = canonical_axis(fname, axis, x.ndim)
    if dtype is not None:
        dt = dtypes.canonicalize(dtype, f"{fname}: dtype")
    else:
        dt = dtypes.int32 if dtypes.is_bool(x.dtype) else x.dtype
    return lax_fn(convert(x, dt), axis=ax, reverse=reverse)


@api_function
def cumsum(a, axis=None, dtype=None, out=None) -> Tracer:
    """Running sum along ``axis`` (of the flattened array when axis is None)."""
    _no_out("cumsum", out)
    return _cum("cumsum", a, axis, dtype, lr.cumsum)


@api_function
def cumprod(a, axis=None, dtype=None, out=None) -> Tracer:
    """Running product along ``axis`` (of the flattened array when axis is None)."""
    _no_out("cumprod", out)
    return _cum("cumprod", a, axis, dtype, lr.cumprod)


cumulative_sum = cumsum
cumulative_prod = cumprod


@api_function
def count_nonzero(a, axis=None, keepdims: bool = False) -> Tracer:
    from .promotion import to_bool
    x = to_bool(as_tracer(a, what="count_nonzero"))
    return sum(x, axis=axis, dtype=dtypes.INDEX, keepdims=keepdims)


@api_function
def ptp(a, axis=None, out=None, keepdims: bool = False) -> Tracer:
    """max - min over ``axis``."""
    _no_out("ptp", out)
    return ufuncs.subtract(max(a, axis=axis, keepdims=keepdims), min(a, axis=axis, keepdims=keepdims))


@api_function
def average(a, axis=None, weights=None, returned: bool = False, keepdims: bool = False):
    """Weighted mean (``weights`` of ``a``'s shape, or 1-D along a single ``axis``)."""
    from .creation import full_like
    from .promotion import promote_inexact
    if weights is None:
        avg = mean(a, axis=axis, keepdims=keepdims)
        if returned:
            x = as_tracer(a, what="average")
            return avg, full_like(avg, _count(x, canonical_axes("average", axis, x.ndim)))
        return avg
    if _shape_of(a) == _shape_of(weights):
        (x, w), _, _ = promote_inexact("average", a, weights)
    else:
        x, w = _weights_along(a, weights, axis)
    wsum = sum(w, axis=axis, keepdims=keepdims)
    avg = ufuncs.true_divide(sum(ufuncs.multiply(x, w), axis=axis, keepdims=keepdims), wsum)
    return (avg, wsum) if returned else avg


def _shape_of(x):
    from ..lax.common import aval_of
    return aval_of(x).shape


def _weights_along(a, weights, axis):
    from .promotion import promote_inexact
    x = as_tracer(a, what="average")
    w = as_tracer(weights, what="average: weights")
    if axis is None or w.ndim != 1 or isinstance(axis, (tuple, list)):
        raise ShapeError(f"average: weights of shape {w.shape} must have the shape of a {x.shape} "
                         "or be 1-D along a single axis")
    ax = canonical_axis("average", axis, x.ndim)
    if w.shape[0] != x.shape[ax]:
        raise ShapeError(f"average: weights of length {w.shape[0]} do not match axis {ax} of shape {x.shape}")
    (xx, ww), _, _ = promote_inexact("average", x, w, broadcast=False)
    return xx, broadcast_in_dim(ww, x.shape, [ax])


@api_function
def median(a, axis=None, keepdims: bool = False) -> Tracer:
    """Median over ``axis`` (NaN if any element along it is NaN)."""
    from .shapes import take
    from .sorting import sort
    x = as_tracer(a, what="median")
    if axis is None:
        src, ax = reshape(x, (x.size,)), 0
        axes = tuple(range(x.ndim))
    else:
        axes = canonical_axes("median", axis, x.ndim)
        if len(axes) != 1:
            from .shapes import moveaxis
            rest = [i for i in range(x.ndim) if i not in axes]
            src = reshape(moveaxis(x, list(axes), list(range(x.ndim - len(axes), x.ndim))),
                          [x.shape[i] for i in rest] + [_count(x, axes)])
            ax = src.ndim - 1
        else:
            src, ax = x, axes[0]
    n = src.shape[ax]
    if n == 0:
        raise ShapeError("median of an empty axis")
    xf = convert(src, dtypes.to_inexact(x.dtype))
    s = sort(xf, axis=ax)
    lo = take(s, (n - 1) // 2, axis=ax)
    hi = take(s, n // 2, axis=ax)
    med = ufuncs.multiply(ufuncs.add(lo, hi), 0.5)
    nan = any(ufuncs.isnan(xf), axis=ax)
    med = ufuncs.where(nan, np.nan, med)
    if keepdims:
        med = reshape(med, [1 if i in axes else d for i, d in enumerate(x.shape)])
    return med


def _nan_variant(name, base, fill_fn):
    def f(a, axis=None, **kw):
        x = as_tracer(a, what=name)
        if dtypes.is_float(x.dtype):
            x = ufuncs.where(ufuncs.isnan(x), fill_fn(x.dtype), x)
        return base(x, axis=axis, **kw)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"{base.__name__} ignoring NaNs."
    return api_function(f)


nansum = _nan_variant("nansum", sum, lambda dt: 0)
nanprod = _nan_variant("nanprod", prod, lambda dt: 1)
nanmax = _nan_variant("nanmax", max, lambda dt: -np.inf)
nanmin = _nan_variant("nanmin", min, lambda dt: np.inf)


@api_function
def nanmean(a, axis=None, dtype=None, keepdims: bool = False) -> Tracer:
    """Mean ignoring NaNs."""
    x = as_tracer(a, what="nanmean")
    if not dtypes.is_float(x.dtype):
        return mean(x, axis=axis, dtype=dtype, keepdims=keepdims)
    return mean(x, axis=axis, dtype=dtype, keepdims=keepdims, where=ufuncs.logical_not(ufuncs.isnan(x)))
