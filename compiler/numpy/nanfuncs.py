"""The rest of numpy's NaN-ignoring reductions in hlo.numpy: nanvar, nanstd, nanargmax,
nanargmin, nancumsum, nancumprod (the others are in reductions.py and quantiles.py)."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..lax.common import aval_of
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from . import creation as cr
from . import reductions as red
from . import shapes as sh
from . import ufuncs as uf


def _inexact(dt) -> bool:
    return dtypes.is_float(dt) or dtypes.is_complex(dt)


def _keep(a, where):
    t = cr.asarray(a)
    if not _inexact(t.dtype):
        return t, where
    ok = uf.logical_not(uf.isnan(t))
    return t, ok if where is None else uf.logical_and(ok, where)


@api_function
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None) -> Tracer:
    t, w = _keep(a, where)
    v = red.var(t, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=w)
    if w is None:
        return v
    n = red.sum(sh.broadcast_to(w, t.shape), axis=axis, keepdims=keepdims)
    return uf.where(n - ddof <= 0, np.array(np.nan, v.dtype), v)  # numpy: NaN, not 0/-1


@api_function
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None) -> Tracer:
    return uf.sqrt(nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=where))


def _nanarg(what, a, axis, keepdims, fill, pick):
    t = cr.asarray(a)
    if not _inexact(t.dtype):
        return pick(t, axis=axis, keepdims=keepdims)
    nan = uf.isnan(t)
    res = pick(uf.where(nan, np.array(fill, t.dtype), t), axis=axis, keepdims=keepdims)
    return uf.where(red.all(nan, axis=axis, keepdims=keepdims), np.int32(-1), res)


@api_function
def nanargmax(a, axis=None, out=None, keepdims=False) -> Tracer:
    """argmax ignoring NaNs; -1 where a slice is all NaN (as jax.numpy)."""
    return _nanarg("nanargmax", a, axis, keepdims, -np.inf, red.argmax)


@api_function
def nanargmin(a, axis=None, out=None, keepdims=False) -> Tracer:
    """argmin ignoring NaNs; -1 where a slice is all NaN (as jax.numpy)."""
    return _nanarg("nanargmin", a, axis, keepdims, np.inf, red.argmin)


@api_function
def nancumsum(a, axis=None, dtype=None, out=None) -> Tracer:
    """cumsum with NaNs counted as 0."""
    t = cr.asarray(a)
    if _inexact(aval_of(t).dtype):
        t = uf.where(uf.isnan(t), np.array(0, t.dtype), t)
    return red.cumsum(t, axis=axis, dtype=dtype)


@api_function
def nancumprod(a, axis=None, dtype=None, out=None) -> Tracer:
    """cumprod with NaNs counted as 1."""
    t = cr.asarray(a)
    if _inexact(aval_of(t).dtype):
        t = uf.where(uf.isnan(t), np.array(1, t.dtype), t)
    return red.cumprod(t, axis=axis, dtype=dtype)
