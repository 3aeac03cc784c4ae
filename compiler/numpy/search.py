"""Searching sorted arrays in hlo.numpy: searchsorted, digitize, interp; and ``unique``, which
needs a static ``size=`` because its result's length depends on the data.

``searchsorted`` counts, for each query, the sorted elements that come before it in numpy's
sort order (NaNs last, -0.0 equal to 0.0). Short arrays (at most ``_COMPARE_ALL_MAX``
elements) compare every query with every element and sum (one fusable reduction); longer ones
run a branch-free binary search of ``ceil(log2(n + 1))`` static steps, each a gather of the
midpoints. Like argsort, results are int32 (hlo's index dtype) whatever the input width.
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes
from ..errors import ShapeError, UnsupportedError
from ..lax.common import as_tracer, convert, reshape, scalar_const
from ..lax.reductions import _lt_total
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit1
from .promotion import promote, promote_inexact

_COMPARE_ALL_MAX = 32
_METHODS = ("scan", "scan_unrolled", "sort", "compare_all")


def _before(a_elem: Tracer, q: Tracer, side: str) -> Tracer:
    """Whether a sorted element ``a_elem`` lies before the insertion point of query ``q``."""
    if side == "left":
        return _lt_total(a_elem, q)
    return emit1("not", [_lt_total(q, a_elem)])


@api_function
def searchsorted(a, v, side: str = "left", sorter=None, *, method: str = "scan") -> Tracer:
    """Indices where the elements of ``v`` would be inserted into the sorted 1-D ``a`` to keep
    it sorted: the first such index (``side="left"``) or the last (``"right"``). ``sorter``
    holds indices that sort ``a``. ``method="compare_all"`` forces the compare-and-count form;
    the others (jax's names) pick by size."""
    from .reductions import sum as _sum
    from .shapes import take
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if method not in _METHODS:
        raise ValueError(f"searchsorted: method must be one of {_METHODS}, got {method!r}")
    (x, q), dt, weak = promote("searchsorted", a, v, broadcast=False)
    if x.ndim != 1:
        raise ShapeError(f"searchsorted: a must be one-dimensional, got shape {x.shape}")
    if sorter is not None:
        x = take(x, sorter, mode="clip")
    n = x.shape[0]
    if n == 0:
        return _full_index(q.shape, 0)
    if n <= _COMPARE_ALL_MAX or method == "compare_all":
        shape = q.shape + (n,)
        xb = emit1("broadcast_in_dim", [x], {"broadcast_dimensions": [q.ndim]},
                   result_types=[_ir_type(shape, x.dtype)])
        qb = emit1("broadcast_in_dim", [q], {"broadcast_dimensions": list(range(q.ndim))},
                   result_types=[_ir_type(shape, q.dtype)])
        hits = convert(_before(xb, qb, side), dtypes.INDEX)
        return _sum(hits, axis=-1, dtype=dtypes.INDEX)
    lo = _full_index(q.shape, 0)
    hi = _full_index(q.shape, n)
    for _ in range(int(np.ceil(np.log2(n + 1)))):
        mid = emit1("shift_right_logical", [emit1("add", [lo, hi]), _full_index(q.shape, 1)])
        elem = take(x, mid, mode="clip")
        right = emit1("and", [_before(elem, q, side), emit1("compare", [lo, hi], {
            "comparison_direction": "LT", "compare_type": "SIGNED"})])
        active = emit1("compare", [lo, hi], {"comparison_direction": "LT", "compare_type": "SIGNED"})
        lo = emit1("select", [right, emit1("add", [mid, _full_index(q.shape, 1)]), lo])
        hi = emit1("select", [emit1("and", [active, emit1("not", [right])]), mid, hi])
    return lo


def _ir_type(shape, dt):
    from ..lax.common import ir_type
    return ir_type(shape, dt)


def _full_index(shape, value) -> Tracer:
    return emit1("broadcast_in_dim", [scalar_const(value, dtypes.INDEX)], {"broadcast_dimensions": []},
                 result_types=[_ir_type(shape, dtypes.INDEX)])


@api_function
def digitize(x, bins, right: bool = False, *, method: str = "scan") -> Tracer:
    """Index of the bin of each element of ``x``; ``bins`` is increasing or decreasing (decided
    at run time from its ends, as jax does)."""
    from .shapes import flip
    from .ufuncs import greater_equal, subtract, where
    b = as_tracer(bins, what="digitize")
    if b.ndim != 1:
        raise ShapeError(f"digitize: bins must be one-dimensional, got shape {b.shape}")
    side = "left" if right else "right"
    if b.shape[0] == 0:
        return searchsorted(b, x, side=side, method=method)
    up = searchsorted(b, x, side=side, method=method)
    down = subtract(np.int32(b.shape[0]), searchsorted(flip(b), x, side=side, method=method))
    return convert(where(greater_equal(b[-1], b[0]), up, down), dtypes.INDEX)


@api_function
def interp(x, xp, fp, left=None, right=None, period=None) -> Tracer:
    """Piecewise-linear interpolation of the points (``xp``, ``fp``) at ``x`` (``xp``
    increasing); ``left``/``right`` replace values outside ``xp`` (default: the end values)."""
    from .shapes import take
    from .ufuncs import abs as _abs
    from .ufuncs import add, divide, greater, less, less_equal, multiply, subtract, where
    if period is not None:
        raise UnsupportedError("interp: period= is not supported; map x into one period with "
                               "hnp.mod before calling interp")
    (xq, xpp, fpp), dt, _ = promote_inexact("interp", x, xp, fp, broadcast=False)
    if xpp.ndim != 1 or fpp.ndim != 1 or xpp.shape != fpp.shape:
        raise ShapeError(f"interp: xp and fp must be one-dimensional and of equal length, got shapes "
                         f"{xpp.shape} and {fpp.shape}")
    n = xpp.shape[0]
    if n == 0:
        raise ShapeError("interp: xp and fp must not be empty")
    i = searchsorted(xpp, xq, side="right")
    i = emit1("clamp", [scalar_const(1 if n > 1 else 0, dtypes.INDEX), i,
                        scalar_const(builtins.max(n - 1, 0), dtypes.INDEX)])
    im1 = emit1("clamp", [scalar_const(0, dtypes.INDEX), subtract(i, np.int32(1)),
                          scalar_const(n - 1, dtypes.INDEX)])
    fi, fim1 = take(fpp, i, mode="clip"), take(fpp, im1, mode="clip")
    xi, xim1 = take(xpp, i, mode="clip"), take(xpp, im1, mode="clip")
    df, dx, delta = subtract(fi, fim1), subtract(xi, xim1), subtract(xq, xim1)
    tiny = float(np.spacing(dtypes.finfo(dt).eps))
    dx0 = less_equal(_abs(dx), tiny)
    f = where(dx0, fim1, add(fim1, multiply(divide(delta, where(dx0, 1.0, dx)), df)))
    f = where(less(xq, xpp[0]), fpp[0] if left is None else left, f)
    f = where(greater(xq, xpp[-1]), fpp[-1] if right is None else right, f)
    return convert(f, dt)


@api_function
def unique(ar, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis=None, *, equal_nan: bool = True, size=None, fill_value=None) -> Tracer:
    """The sorted distinct elements of the flattened ``ar``, padded to the static ``size`` (with
    ``fill_value``, by default the smallest element), as jax.numpy does under jit."""
    from .sorting import sort
    from .ufuncs import not_equal
    if size is None:
        raise UnsupportedError(
            "unique: the number of distinct elements depends on the data, so the result has no "
            "static shape and cannot be compiled; pass size=N (a static upper bound) to get N "
            "elements padded with fill_value, as jax.numpy.unique(..., size=N) does")
    if return_index or return_inverse or return_counts or axis is not None:
        raise UnsupportedError("unique: return_index/return_inverse/return_counts and axis= are "
                               "not supported; only the values with size= are")
    size = int(size)
    x = as_tracer(ar, what="unique")
    s = sort(reshape(x, (x.size,)))
    if x.size == 0:
        raise ShapeError("unique with size= needs a non-empty array (there is no fill value)")
    from .reductions import cumsum
    from .shapes import concatenate
    is_first = concatenate([np.ones((1,), bool), not_equal(s[1:], s[:-1])]) if x.size > 1 else \
        np.ones((1,), bool)
    if dtypes.is_float(s.dtype) and equal_nan and x.size > 1:
        from .ufuncs import isnan, logical_and, logical_not
        both_nan = logical_and(isnan(s[1:]), isnan(s[:-1]))
        is_first = logical_and(is_first, logical_not(concatenate([np.zeros((1,), bool), both_nan])))
    pos = convert(cumsum(convert(is_first, dtypes.INDEX)), dtypes.INDEX)
    from .ufuncs import subtract, where
    pos = where(is_first, subtract(pos, np.int32(1)), np.int32(size))  # size: dropped
    fill = s[0] if fill_value is None else fill_value
    from .creation import full
    out = full((size,), fill, dtype=s.dtype)
    return out.at[pos].set(s)  # index size: out of bounds, dropped
