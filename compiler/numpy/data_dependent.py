"""hlo.numpy's functions whose result's length depends on the data: nonzero, argwhere,
flatnonzero, compress, extract, the set operations (union1d, intersect1d, setdiff1d, setxor1d)
and unique_values / unique_counts / unique_inverse / unique_all, plus isin.

As in jax.numpy under jit, they take a static ``size=`` (the result has that length: extra
entries are dropped, missing ones are ``fill_value``). Without ``size=``, a call on concrete
arrays (numpy arrays, outside a trace or closed over inside one) measures the size from the
values first, as jax does outside jit; on traced values it raises a TypeError that says to pass
``size=``. Each result is computed with a prefix sum of the selection mask and one scatter."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from . import creation as cr
from . import reductions as red
from . import shapes as sh
from . import sorting as so
from . import ufuncs as uf


def _traced(*xs) -> bool:
    return any(isinstance(x, Tracer) for x in xs)


def _static_size(what: str, size, args, concrete_size) -> int:
    """``size`` as an int; when None, measured with numpy from concrete ``args``."""
    if size is not None:
        try:
            s = int(size)
        except TypeError:
            raise TypeError(f"{what}: size must be a static integer, got {type(size).__name__}") from None
        if s < 0:
            raise ValueError(f"{what}: size must be non-negative, got {s}")
        return s
    if _traced(*args):
        raise TypeError(
            f"{what}: the length of the result depends on the values of a traced array, so it has no "
            f"static shape; pass size=N (a static bound: N entries, padded with fill_value), as "
            f"jax.numpy.{what}(..., size=N) under jit")
    return int(concrete_size(*[np.asarray(a) if a is not None else None for a in args]))


def _select(mask: Tracer, size: int) -> tuple:
    """``(positions, valid)``: the flat indices of the first ``size`` True entries of the 1-D
    ``mask`` (0 past the count) and which of the ``size`` slots are filled."""
    n = mask.shape[0]
    m32 = mask.astype(np.int32)
    pos = red.cumsum(m32) - np.int32(1)
    target = uf.where(mask, pos, np.int32(size))
    idx = cr.zeros((size,), np.int32).at[target].set(cr.arange(n, dtype=np.int32), mode="drop")
    valid = cr.arange(size, dtype=np.int32) < red.sum(m32)
    return idx, valid


# --------------------------------------------------------------------------------------------
# nonzero and friends
# --------------------------------------------------------------------------------------------

def nonzero(a, *, size=None, fill_value=None):
    """Indices of the nonzero elements, one int32 array per dimension."""
    s = _static_size("nonzero", size, (a,), lambda x: np.count_nonzero(x))
    return _nonzero(a, s, fill_value)


@api_function
def _nonzero(a, size: int, fill_value):
    x = cr.asarray(a)
    if x.ndim == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use jnp.atleast_1d(scalar).nonzero() "
                         "instead.")
    idx, valid = _select(sh.ravel(x != 0), size)
    fills = fill_value if isinstance(fill_value, (tuple, list)) else [fill_value] * x.ndim
    if len(fills) != x.ndim:
        raise ValueError(f"nonzero: fill_value must be a scalar or a tuple of length {x.ndim}")
    out, stride = [], math.prod(x.shape)
    for d, n in enumerate(x.shape):
        stride //= n
        i = uf.remainder(uf.floor_divide(idx, np.int32(stride)), np.int32(n)) if n else idx
        out.append(uf.where(valid, i, np.int32(0) if fills[d] is None else cr.asarray(fills[d]).astype(np.int32)))
    return tuple(out)


def flatnonzero(a, *, size=None, fill_value=None):
    """Indices of the nonzero elements of the flattened array."""
    s = _static_size("flatnonzero", size, (a,), lambda x: np.count_nonzero(x))
    return _nonzero(sh.ravel(a), s, fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """The indices of the nonzero elements, one row each: ``(count, a.ndim)``."""
    s = _static_size("argwhere", size, (a,), lambda x: np.count_nonzero(x))
    return _argwhere(a, s, fill_value)


@api_function
def _argwhere(a, size, fill_value):
    x = cr.asarray(a)
    if x.ndim == 0:
        return cr.zeros((size, 0), np.int32)
    return sh.stack(_nonzero(x, size, fill_value), axis=1)


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of ``a`` along ``axis`` (the flattened array when None) where the 1-D
    ``condition`` is true."""
    s = _static_size("compress", size, (condition,), lambda c: np.count_nonzero(c))
    return _compress(condition, a, axis, s, fill_value)


@api_function
def _compress(condition, a, axis, size, fill_value):
    c = cr.asarray(condition)
    x = cr.asarray(a)
    if c.ndim != 1:
        raise ShapeError(f"compress: condition must be one-dimensional, got shape {c.shape}")
    if axis is None:
        x, axis = sh.ravel(x), 0
    axis = axis % x.ndim
    n = x.shape[axis]
    if c.shape[0] > n:
        c = c[:n]
    if size > n:
        raise ValueError("size must be positive and not greater than the size of the array axis; "
                         f"got size={size} for a.shape[axis]={n}")
    idx, valid = _select(c != 0, size)
    taken = sh.take(x, idx, axis=axis, mode="clip")
    vshape = [size if d == axis else 1 for d in range(x.ndim)]
    return uf.where(sh.reshape(valid, vshape), taken, cr.asarray(fill_value).astype(x.dtype))


def extract(condition, arr, *, size=None, fill_value=0):
    """The elements of ``arr`` where ``condition`` is nonzero (both flattened)."""
    s = _static_size("extract", size, (condition,), lambda c: np.count_nonzero(c))
    return _compress(sh.ravel(condition), sh.ravel(arr), 0, s, fill_value)


# --------------------------------------------------------------------------------------------
# Membership and sets
# --------------------------------------------------------------------------------------------

_COMPARE_ALL_MAX = 1 << 16


@api_function
def isin(element, test_elements, assume_unique=False, invert=False, *, method="auto") -> Tracer:
    """Whether each element of ``element`` is in ``test_elements`` (compares all pairs for small
    inputs, else a sort and binary search)."""
    e = cr.asarray(element)
    t = sh.ravel(cr.asarray(test_elements))
    if t.shape[0] == 0:
        out = cr.zeros(e.shape, bool)
    elif method == "compare_all" or (method == "auto" and e.size * t.shape[0] <= _COMPARE_ALL_MAX):
        out = red.any(sh.expand_dims(e, -1) == t, axis=-1)
    else:
        from .search import searchsorted
        st = so.sort(t)
        i = searchsorted(st, e, side="left")
        out = sh.take(st, i, mode="clip") == e
    return uf.logical_not(out) if invert else out


def _sorted_first(x: Tracer):
    """The sorted flattened ``x`` and where each first of a run of equal values is."""
    s = so.sort(sh.ravel(x))
    if s.shape[0] == 0:
        return s, cr.zeros((0,), bool)
    first = sh.concatenate([cr.ones((1,), bool), s[1:] != s[:-1]])
    if dtypes.is_float(s.dtype):
        both_nan = uf.logical_and(uf.isnan(s[1:]), uf.isnan(s[:-1]))
        first = uf.logical_and(first, uf.logical_not(sh.concatenate([cr.zeros((1,), bool), both_nan])))
    return s, first


def _pack(s: Tracer, keep: Tracer, size: int, fill_value, default_first: bool):
    idx, valid = _select(keep, size)
    vals = sh.take(s, idx, mode="clip") if s.shape[0] else cr.zeros((size,), s.dtype)
    if fill_value is not None:
        fill = cr.asarray(fill_value).astype(s.dtype)
    elif default_first and s.shape[0]:
        fill = vals[0]
    else:
        fill = cr.zeros((), s.dtype)
    return uf.where(valid, vals, fill)


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted distinct values of both arrays."""
    n = _static_size("union1d", size, (ar1, ar2), lambda a, b: np.union1d(a, b).size)
    return _set_op("union", ar1, ar2, n, fill_value)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None, fill_value=None):
    """The sorted distinct values in both arrays."""
    if return_indices:
        from ..errors import UnsupportedError
        raise UnsupportedError("intersect1d: return_indices=True is not supported; compute the indices "
                               "with hnp.searchsorted on the result")
    n = _static_size("intersect1d", size, (ar1, ar2), lambda a, b: np.intersect1d(a, b).size)
    return _set_op("intersect", ar1, ar2, n, fill_value)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted distinct values of ``ar1`` not in ``ar2`` (padding: ``fill_value``, default 0)."""
    n = _static_size("setdiff1d", size, (ar1, ar2), lambda a, b: np.setdiff1d(a, b).size)
    return _set_op("setdiff", ar1, ar2, n, fill_value)


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted distinct values in exactly one of the arrays."""
    n = _static_size("setxor1d", size, (ar1, ar2), lambda a, b: np.setxor1d(a, b).size)
    return _set_op("setxor", ar1, ar2, n, fill_value)


@api_function
def _set_op(op, ar1, ar2, size, fill_value):
    a, b = sh.ravel(cr.asarray(ar1)), sh.ravel(cr.asarray(ar2))
    dt = dtypes.promote_types(a.dtype, b.dtype)
    a, b = a.astype(dt), b.astype(dt)
    if op == "union":
        s, first = _sorted_first(sh.concatenate([a, b]))
        return _pack(s, first, size, fill_value, True)
    if op == "setxor":
        s, first = _sorted_first(sh.concatenate([a, b]))
        keep = uf.logical_and(first, isin(s, a) != isin(s, b))
        return _pack(s, keep, size, fill_value, True)
    s, first = _sorted_first(a)
    inb = isin(s, b)
    keep = uf.logical_and(first, inb if op == "intersect" else uf.logical_not(inb))
    return _pack(s, keep, size, fill_value, op == "intersect")


class UniqueAllResult(NamedTuple):
    values: Tracer
    indices: Tracer
    inverse_indices: Tracer
    counts: Tracer


class UniqueCountsResult(NamedTuple):
    values: Tracer
    counts: Tracer


class UniqueInverseResult(NamedTuple):
    values: Tracer
    inverse_indices: Tracer


def _unique_size(what, x, size):
    return _static_size(what, size, (x,), lambda a: np.unique(a, equal_nan=True).size)


@api_function
def _unique_parts(x, size, fill_value):
    t = cr.asarray(x)
    flat = sh.ravel(t)
    n = flat.shape[0]
    if n == 0:
        raise ShapeError("unique: the array is empty")
    perm = so.argsort(flat)
    s = sh.take(flat, perm)
    _, first = _sorted_first(flat)
    group = red.cumsum(first.astype(np.int32)) - np.int32(1)  # the unique slot of each sorted element
    values = _pack(s, first, size, fill_value, True)
    counts = cr.zeros((size,), np.int32).at[group].add(np.int32(1), mode="drop")
    big = np.int32(np.iinfo(np.int32).max)
    indices = cr.full((size,), big, np.int32).at[group].min(perm, mode="drop")
    indices = uf.where(indices == big, indices[0], indices)
    inverse = cr.zeros((n,), np.int32).at[perm].set(group)
    return values, indices, sh.reshape(inverse, t.shape), counts


def unique_values(x, *, size=None, fill_value=None):
    """The sorted distinct values (array API)."""
    return _unique_parts(x, _unique_size("unique_values", x, size), fill_value)[0]


def unique_counts(x, *, size=None, fill_value=None) -> UniqueCountsResult:
    v, _, _, c = _unique_parts(x, _unique_size("unique_counts", x, size), fill_value)
    return UniqueCountsResult(v, c)


def unique_inverse(x, *, size=None, fill_value=None) -> UniqueInverseResult:
    v, _, inv, _ = _unique_parts(x, _unique_size("unique_inverse", x, size), fill_value)
    return UniqueInverseResult(v, inv)


def unique_all(x, *, size=None, fill_value=None) -> UniqueAllResult:
    """``(values, indices, inverse_indices, counts)``: the sorted distinct values, the first
    index of each, each element's slot in ``values`` and how often each occurs."""
    return UniqueAllResult(*_unique_parts(x, _unique_size("unique_all", x, size), fill_value))


def trim_zeros(filt, trim="fb"):
    """The 1-D ``filt`` without its leading ('f') and/or trailing ('b') zeros. The result's
    length depends on the values and jax gives no size= for it: it needs a concrete array."""
    if trim not in ("f", "b", "fb", "bf"):
        raise ValueError(f"trim_zeros: trim must be 'f', 'b' or 'fb', got {trim!r}")
    if _traced(filt):
        raise TypeError("trim_zeros: the length of the result depends on the values of a traced array; "
                        "call it on a concrete array (outside hlo.jit), or keep the length static with "
                        "hnp.where(mask, x, 0) and the count from hnp.flatnonzero(x, size=...)")
    a = np.asarray(filt)
    if a.ndim != 1:
        raise ValueError(f"trim_zeros: filt must be one-dimensional, got shape {a.shape}")
    nz = np.flatnonzero(a)
    start = int(nz[0]) if nz.size and "f" in trim else (a.size if not nz.size and "f" in trim else 0)
    stop = int(nz[-1]) + 1 if nz.size and "b" in trim else (0 if not nz.size and "b" in trim else a.size)
    return _take_range(filt, start, max(stop, start))


@api_function
def _take_range(x, start, stop):
    return cr.asarray(x)[start:stop]
