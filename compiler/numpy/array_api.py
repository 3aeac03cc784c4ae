"""Assorted numpy and array-API functions of hlo.numpy: predicates (isscalar, iterable,
isdtype, array_equiv), copies and reshapes (copy, resize, block, dsplit, rollaxis), vector
products (vecdot, matvec, vecmat), partition/argpartition (a full sort is a valid partition),
sort_complex, geomspace, fromfunction and apply_over_axes."""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes
from ..lax.common import aval_of
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from . import creation as cr
from . import reductions as red
from . import shapes as sh
from . import sorting as so
from . import ufuncs as uf
from .promotion import promote


def isscalar(element) -> bool:
    """True for Python and numpy scalars and 0-d arrays (traced or not), as jax.numpy."""
    if isinstance(element, (Tracer, np.ndarray)):
        return element.ndim == 0
    if isinstance(element, (bool, int, float, complex, np.generic)):
        return True
    return hasattr(element, "__jax_array__") and np.ndim(element) == 0


def iterable(y) -> bool:
    try:
        iter(y)
    except TypeError:
        return False
    return True


_KINDS = {
    "bool": lambda d: d == np.bool_,
    "signed integer": lambda d: dtypes.is_int(d) and dtypes.is_signed(d),
    "unsigned integer": lambda d: dtypes.is_int(d) and not dtypes.is_signed(d),
    "integral": lambda d: dtypes.is_int(d),
    "real floating": lambda d: dtypes.is_float(d),
    "complex floating": lambda d: dtypes.is_complex(d),
    "numeric": lambda d: dtypes.is_int(d) or dtypes.is_float(d) or dtypes.is_complex(d),
}


def isdtype(dtype, kind) -> bool:
    """Whether ``dtype`` is of ``kind``: a dtype, one of the array API's kind names ('bool',
    'signed integer', 'unsigned integer', 'integral', 'real floating', 'complex floating',
    'numeric') or a tuple of them (bfloat16 and the small floats are 'real floating')."""
    d = np.dtype(dtype)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _KINDS:
                raise ValueError(f"isdtype: unknown kind {k!r}; expected one of {sorted(_KINDS)}")
            if _KINDS[k](d):
                return True
        elif d == np.dtype(k):
            return True
    return False


@api_function
def copy(a, order=None) -> Tracer:
    return cr.array(a, copy=True) if not isinstance(a, Tracer) else cr.asarray(a)


def array_equiv(a1, a2) -> Tracer:
    """Whether the arrays broadcast to one shape and are equal there (False when they do not
    broadcast)."""
    s1 = aval_of(a1, "array_equiv").shape
    s2 = aval_of(a2, "array_equiv").shape
    try:
        np.broadcast_shapes(s1, s2)
    except ValueError:
        return cr.asarray(False)
    return _array_equiv(a1, a2)


@api_function
def _array_equiv(a1, a2) -> Tracer:
    return red.all(uf.equal(a1, a2))


@api_function
def resize(a, new_shape) -> Tracer:
    """``a`` flattened, repeated cyclically and reshaped to ``new_shape``."""
    t = cr.asarray(a)
    shape = (int(new_shape),) if isinstance(new_shape, (int, np.integer)) else tuple(int(d) for d in new_shape)
    if builtins.any(d < 0 for d in shape):
        raise ValueError("all elements of `new_shape` must be non-negative")
    n = int(np.prod(shape))
    flat = sh.ravel(t)
    if flat.shape[0] == 0:
        return cr.zeros(shape, t.dtype)
    reps = -(-n // flat.shape[0])
    return sh.reshape(sh.tile(flat, reps)[:n], shape)


def _block_depth(x, depth=0):
    if isinstance(x, list):
        if not x:
            raise ValueError("block: lists cannot be empty")
        depths = {_block_depth(e, depth + 1) for e in x}
        if len(depths) != 1:
            raise ValueError("block: list depths are mismatched")
        return depths.pop()
    if isinstance(x, tuple):
        raise TypeError("block: arrays must be nested in lists, not tuples")
    return depth


@api_function
def block(arrays) -> Tracer:
    """An array assembled from nested lists of blocks (numpy.block)."""
    depth = _block_depth(arrays)
    leaves = []

    def collect(x):
        if isinstance(x, list):
            for e in x:
                collect(e)
        else:
            leaves.append(cr.asarray(x))
    collect(arrays)
    ndim = builtins.max(depth, builtins.max(t.ndim for t in leaves))

    def build(x, level):
        if not isinstance(x, list):
            t = cr.asarray(x)
            return sh.reshape(t, (1,) * (ndim - t.ndim) + t.shape)
        parts = [build(e, level + 1) for e in x]
        return sh.concatenate(parts, axis=-(depth - level))
    return build(arrays, 0)


def dsplit(ary, indices_or_sections):
    t = cr.asarray(ary)
    if t.ndim < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return sh.split(t, indices_or_sections, axis=2)


@api_function
def rollaxis(a, axis, start=0) -> Tracer:
    """numpy.rollaxis: ``axis`` moved to before position ``start``."""
    t = cr.asarray(a)
    n = t.ndim
    axis = axis % n if -n <= axis < n else axis
    if not -n <= start <= n:
        raise ValueError(f"rollaxis: start={start} out of range for a {n}-d array")
    if start < 0:
        start += n
    if axis < start:
        start -= 1
    if axis == start:
        return t
    return sh.moveaxis(t, axis, start)


@api_function
def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None) -> Tracer:
    """``sum(conj(x1) * x2)`` along ``axis`` (broadcasting the others)."""
    from .complexes import conj
    (a, b), _, _ = promote("vecdot", x1, x2)
    if a.shape[axis] != b.shape[axis]:
        raise ValueError(f"vecdot: the arrays' axis {axis} must have one size, got {x1.shape} and {x2.shape}")
    out = red.sum(conj(a) * b, axis=axis)
    return out if preferred_element_type is None else out.astype(preferred_element_type)


@api_function
def matvec(x1, x2, /) -> Tracer:
    """The matrix-vector products ``x1[..., m, n] @ x2[..., n] -> [..., m]``."""
    from .products import matmul
    return matmul(x1, sh.expand_dims(cr.asarray(x2), -1))[..., 0]


@api_function
def vecmat(x1, x2, /) -> Tracer:
    """The vector-matrix products ``conj(x1)[..., n] @ x2[..., n, m] -> [..., m]``."""
    from .complexes import conj
    from .products import matmul
    return matmul(sh.expand_dims(conj(cr.asarray(x1)), -2), x2)[..., 0, :]


@api_function
def partition(a, kth, axis=-1) -> Tracer:
    """A partition of ``a`` along ``axis`` around index ``kth``: the sorted array (every
    element before ``kth`` is no larger, every one after no smaller)."""
    t = cr.asarray(a)
    if not -t.shape[axis] <= int(kth) < t.shape[axis]:
        raise ValueError(f"partition: kth={kth} out of bounds for axis of size {t.shape[axis]}")
    return so.sort(t, axis=axis)


@api_function
def argpartition(a, kth, axis=-1) -> Tracer:
    """Indices that partition ``a`` (see partition): the stable argsort."""
    t = cr.asarray(a)
    if not -t.shape[axis] <= int(kth) < t.shape[axis]:
        raise ValueError(f"argpartition: kth={kth} out of bounds for axis of size {t.shape[axis]}")
    return so.argsort(t, axis=axis)


@api_function
def sort_complex(a) -> Tracer:
    """Sorted by real part, then imaginary part, as complex."""
    t = cr.asarray(a)
    dt = t.dtype if dtypes.is_complex(t.dtype) else np.dtype(np.complex128 if t.dtype.itemsize == 8
                                                            else np.complex64)
    return so.sort(t.astype(dt), axis=-1)


@api_function
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0) -> Tracer:
    """``num`` numbers spaced evenly on a log scale from ``start`` to ``stop`` (same sign;
    the ends are exact)."""
    (s0, s1), dt, _ = promote("geomspace", start, stop)
    dt = dtypes.to_inexact(dt)
    s0, s1 = s0.astype(dt), s1.astype(dt)
    sign = uf.sign(s0)
    lo, hi = uf.log10(s0 * sign), uf.log10(s1 * sign)
    out = uf.power(10.0, cr.linspace(lo, hi, num, endpoint=endpoint, axis=0).astype(dt))
    if num > 0:
        out = out.at[0].set(s0 * sign)
        if endpoint and num > 1:
            out = out.at[-1].set(s1 * sign)
    out = out * sign
    if axis != 0:
        out = sh.moveaxis(out, 0, axis)
    return out if dtype is None else out.astype(dtype)


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """``function(*indices)``, the index arrays of ``shape`` given as ``dtype`` (numpy's
    way: one call with whole index grids)."""
    grids = [cr.asarray(g) for g in np.indices(tuple(int(d) for d in shape), dtype=dtype)]
    return function(*grids, **kwargs)


def apply_over_axes(func, a, axes):
    """``func(a, axis)`` applied for each of ``axes`` in turn, keeping the reduced dimension."""
    t = cr.asarray(a)
    for ax in ((axes,) if isinstance(axes, int) else axes):
        r = func(t, ax)
        if r.ndim == t.ndim - 1:
            r = sh.expand_dims(r, ax)
        elif r.ndim != t.ndim:
            raise ValueError("function is not returning an array of the correct shape")
        t = r
    return t
