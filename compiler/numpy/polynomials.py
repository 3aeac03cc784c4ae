"""Convolution and polynomials in hlo.numpy: convolve and correlate (jax's definitions: inputs
promoted to floats, the shorter one slid along the longer), polyval, polyadd, polysub, polymul,
polydiv, polyder, polyint, polyfit, vander; and the calculus helpers trapezoid, gradient and
unwrap."""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..errors import UnsupportedError
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from . import creation as cr
from . import reductions as red
from . import shapes as sh
from . import ufuncs as uf
from .promotion import promote_inexact

_GATHER_MAX = 1 << 22  # window elements gathered at most for the gather-and-dot form


def _conv(what, x, y, mode, op, precision=None, preferred_element_type=None):
    (x, y), dt, _ = promote_inexact(what, x, y, broadcast=False)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"{what}() only support 1-dimensional inputs.")
    if x.shape[0] == 0 or y.shape[0] == 0:
        raise ValueError(f"{what}: inputs cannot be empty, got shapes {x.shape} and {y.shape}.")
    reverse = False
    if op == "correlate":
        from .complexes import conj
        y = conj(y)
        if x.shape[0] < y.shape[0]:
            x, y, reverse = y, x, True
    else:
        if x.shape[0] < y.shape[0]:
            x, y = y, x
        y = sh.flip(y)
    m = y.shape[0]
    if mode == "valid":
        pad = (0, 0)
    elif mode == "same":
        pad = (m // 2, m - m // 2 - 1)
    elif mode == "full":
        pad = (m - 1, m - 1)
    else:
        raise ValueError(f"{what}: mode must be one of 'full', 'same', 'valid', got {mode!r}")
    n_out = x.shape[0] + pad[0] + pad[1] - m + 1
    if dtypes.is_float(dt) and n_out * m > _GATHER_MAX:
        from ..lax.contractions import conv_general_dilated
        out = conv_general_dilated(x[None, None, :], y[None, None, :], (1,), [pad])[0, 0]
    else:
        xp = sh.pad(x, [pad])
        win = sh.take(xp, (np.arange(n_out)[:, None] + np.arange(m)[None, :]).astype(np.int32))
        from .products import matmul
        out = matmul(win, y)
    if reverse:
        out = sh.flip(out)
    return out if preferred_element_type is None else out.astype(preferred_element_type)


@api_function
def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None) -> Tracer:
    """The discrete linear convolution of two 1-D arrays."""
    return _conv("convolve", a, v, mode, "convolve", precision, preferred_element_type)


@api_function
def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None) -> Tracer:
    """The cross-correlation of two 1-D arrays (``v`` conjugated)."""
    return _conv("correlate", a, v, mode, "correlate", precision, preferred_element_type)


def _1d(what, *xs):
    out, dt, _ = promote_inexact(what, *xs, broadcast=False)
    for t in out:
        if t.ndim != 1:
            raise ValueError(f"{what}: polynomial coefficients must be one-dimensional, got shape {t.shape}")
    return out, dt


@api_function
def polyval(p, x, *, unroll=16) -> Tracer:
    """The polynomial with coefficients ``p`` (highest power first) at ``x`` (Horner's rule)."""
    (pt, xt), dt, _ = promote_inexact("polyval", p, x, broadcast=False)
    if pt.ndim != 1:
        raise ValueError(f"polyval: p must be one-dimensional, got shape {pt.shape}")
    y = cr.zeros(xt.shape, dt)
    for i in range(pt.shape[0]):
        y = y * xt + pt[i]
    return y


def _align(a: Tracer, b: Tracer):
    n = max(a.shape[0], b.shape[0])
    return sh.pad(a, [(n - a.shape[0], 0)]), sh.pad(b, [(n - b.shape[0], 0)])


@api_function
def polyadd(a1, a2) -> Tracer:
    (a, b), _ = _1d("polyadd", a1, a2)
    a, b = _align(a, b)
    return a + b


@api_function
def polysub(a1, a2) -> Tracer:
    (a, b), _ = _1d("polysub", a1, a2)
    a, b = _align(a, b)
    return a - b


@api_function
def polymul(a1, a2, *, trim_leading_zeros=False) -> Tracer:
    (a, b), _ = _1d("polymul", a1, a2)
    if trim_leading_zeros:
        raise UnsupportedError("polymul: trim_leading_zeros=True gives a data-dependent length; trim on the "
                               "host")
    if a.shape[0] == 0 or b.shape[0] == 0:
        return cr.zeros((1,), a.dtype)
    return _conv("polymul", a, b, "full", "convolve")


@api_function
def polydiv(u, v, *, trim_leading_zeros=False):
    """``(quotient, remainder)`` of polynomial division (the remainder keeps ``u``'s length)."""
    (ua, va), dt = _1d("polydiv", u, v)
    if trim_leading_zeros:
        raise UnsupportedError("polydiv: trim_leading_zeros=True gives a data-dependent length; trim on the "
                               "host")
    m, n = ua.shape[0] - 1, va.shape[0] - 1
    scale = 1.0 / va[0]
    q = cr.zeros((max(m - n + 1, 1),), dt)
    r = ua
    for k in range(0, m - n + 1):
        d = scale * r[k]
        q = q.at[k].set(d)
        r = r.at[k:k + n + 1].add(-d * va)
    return q, r


@api_function
def polyder(p, m=1) -> Tracer:
    """The ``m``-th derivative's coefficients."""
    (pt,), dt = _1d("polyder", p)
    m = int(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive")
    n = pt.shape[0]
    if m == 0:
        return pt
    if m >= n:
        return cr.zeros((0,), dt)
    k = np.arange(n - 1, m - 1, -1)
    coef = np.array([math.prod(range(int(i) - m + 1, int(i) + 1)) for i in k], np.float64)
    return pt[:n - m] * cr.asarray(coef).astype(dt)


@api_function
def polyint(p, m=1, k=None) -> Tracer:
    """The ``m``-th antiderivative's coefficients, with integration constants ``k`` (0)."""
    (pt,), dt = _1d("polyint", p)
    m = int(m)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    ks = cr.zeros((m,), dt) if k is None else sh.broadcast_to(cr.asarray(k).astype(dt), (m,))
    for i in range(m):
        n = pt.shape[0]
        div = np.arange(n, 0, -1, dtype=np.float64)
        pt = sh.concatenate([pt / cr.asarray(div).astype(dt), ks[i:i + 1]])
    return pt


@api_function
def poly(seq_of_zeros) -> Tracer:
    """The coefficients of the monic polynomial with the given roots (1-D); a square matrix's
    characteristic polynomial needs its eigenvalues, which hlo has only for symmetric matrices."""
    (z,), dt, _ = promote_inexact("poly", seq_of_zeros)
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] > 0:
        raise UnsupportedError("poly of a square matrix needs its (general) eigenvalues, which "
                               "hlo.numpy.linalg.eigvals does not have yet; pass the roots")
    if z.ndim != 1:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    a = cr.ones((1,), dt)
    for k in range(z.shape[0]):
        a = _conv("poly", a, sh.stack([cr.ones((), dt), -z[k]]), "full", "convolve")
    return a


@api_function
def vander(x, N=None, increasing=False) -> Tracer:
    """Columns of powers of the 1-D ``x`` (highest first unless ``increasing``)."""
    xt = cr.asarray(x)
    if xt.ndim != 1:
        raise ValueError("x must be a one-dimensional array")
    n = xt.shape[0] if N is None else int(N)
    if n < 0:
        raise ValueError("N must be nonnegative")
    powers = np.arange(n) if increasing else np.arange(n - 1, -1, -1)
    return uf.power(xt[:, None], cr.asarray(powers.astype(np.int32)))


@api_function
def trapezoid(y, x=None, dx=1.0, axis=-1) -> Tracer:
    """The integral of ``y`` along ``axis`` by the trapezoidal rule (samples at ``x`` or
    spaced ``dx``)."""
    (yt,), dt, _ = promote_inexact("trapezoid", y)
    yt = sh.moveaxis(yt, axis, -1)
    if x is None:
        d = cr.asarray(dx).astype(dt)
    else:
        xt = cr.asarray(x).astype(dt)
        if xt.ndim == 1:
            d = xt[1:] - xt[:-1]
        else:
            xt = sh.moveaxis(xt, axis, -1)
            d = xt[..., 1:] - xt[..., :-1]
    return red.sum(d * (yt[..., 1:] + yt[..., :-1]) * 0.5, axis=-1)


@api_function
def gradient(f, *varargs, axis=None, edge_order=None):
    """numpy.gradient: second-order central differences inside, first-order at the ends, per
    axis, with scalar spacings or 1-D coordinates."""
    if edge_order not in (None, 1):
        raise UnsupportedError("gradient: only edge_order=1 is supported (as in jax)")
    (ft,), dt, _ = promote_inexact("gradient", f)
    axes = list(range(ft.ndim)) if axis is None else [a % ft.ndim for a in ((axis,) if isinstance(axis, int) else axis)]
    if len(varargs) == 0:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1:
        spacing = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacing = list(varargs)
    else:
        raise TypeError("gradient: invalid number of spacing arguments")
    out = []
    for ax, h in zip(axes, spacing):
        n = ft.shape[ax]
        if n < 2:
            raise ValueError("Shape of array too small to calculate a numerical gradient, at least 2 elements "
                             "are required.")
        g = sh.moveaxis(ft, ax, -1)
        ht = cr.asarray(h).astype(dt)
        if ht.ndim == 0:
            inner = (g[..., 2:] - g[..., :-2]) / (2 * ht)
            first = (g[..., 1:2] - g[..., :1]) / ht
            last = (g[..., -1:] - g[..., -2:-1]) / ht
        else:
            if ht.shape != (n,):
                raise ValueError("gradient: a coordinate array must have the axis's length")
            dx = ht[1:] - ht[:-1]
            d1, d2 = dx[:-1], dx[1:]
            a = -d2 / (d1 * (d1 + d2))
            b = (d2 - d1) / (d1 * d2)
            c = d1 / (d2 * (d1 + d2))
            inner = a * g[..., :-2] + b * g[..., 1:-1] + c * g[..., 2:]
            first = (g[..., 1:2] - g[..., :1]) / dx[0]
            last = (g[..., -1:] - g[..., -2:-1]) / dx[-1]
        r = sh.concatenate([first, inner, last], axis=-1)
        out.append(sh.moveaxis(r, -1, ax))
    return out[0] if len(out) == 1 else out


@api_function
def unwrap(p, discont=None, axis=-1, period=2 * np.pi) -> Tracer:
    """``p`` with jumps larger than ``discont`` (default ``period / 2``) along ``axis`` replaced
    by their complement modulo ``period``."""
    (pt,), dt, _ = promote_inexact("unwrap", p)
    if dtypes.is_complex(dt):
        raise TypeError("unwrap does not support complex inputs")
    if pt.shape[axis] == 0:
        return pt
    half = period / 2
    discont = half if discont is None else discont
    from .differences import diff
    d = diff(pt, axis=axis)
    dd = uf.mod(d + half, period) - half
    dd = uf.where(uf.logical_and(dd == -half, d > 0), np.array(half, dt), dd)
    corr = uf.where(uf.abs(d) < discont, np.array(0, dt), dd - d)
    cum = red.cumsum(corr, axis=axis)
    first = sh.take(pt, np.array([0], np.int32), axis=axis)
    rest = sh.take(pt, np.arange(1, pt.shape[axis], dtype=np.int32), axis=axis) + cum
    return sh.concatenate([first, rest], axis=axis)
