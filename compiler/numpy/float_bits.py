"""Functions of a float's bits in hlo.numpy: nextafter, spacing, frexp, ldexp, modf. Built
from bitcasts and integer arithmetic, so they are exact (subnormals included) on every target."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..lax.elementwise import bitcast_convert_type
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from . import ufuncs as uf
from .promotion import promote, promote_inexact

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
_INT = {2: np.int16, 4: np.int32, 8: np.int64}


def _layout(dt):
    info = dtypes.finfo(dt)
    return int(info.nmant), int(info.maxexp) - 1, _UINT[np.dtype(dt).itemsize], int(info.bits)


@api_function
def nextafter(x1, x2) -> Tracer:
    """The next representable float after ``x1`` towards ``x2``."""
    (a, b), dt, _ = promote_inexact("nextafter", x1, x2)
    if dtypes.is_complex(dt):
        raise TypeError("nextafter: complex values are not supported (numpy has none either)")
    _, _, ut, nbits = _layout(dt)
    ab = bitcast_convert_type(a, ut)
    sign = np.array(1 << (nbits - 1), ut)
    mag = ab & np.array((1 << (nbits - 1)) - 1, ut)
    away = (a > 0) == (b > a)  # moving away from zero: the magnitude's bits grow
    stepped = uf.where(away, ab + np.array(1, ut), ab - np.array(1, ut))
    tiny = (bitcast_convert_type(b, ut) & sign) | np.array(1, ut)  # the smallest subnormal, b's sign
    bits_out = uf.where(mag == 0, tiny, stepped)
    out = bitcast_convert_type(bits_out, dt)
    out = uf.where(a == b, b, out)
    return uf.where(uf.logical_or(uf.isnan(a), uf.isnan(b)), np.array(np.nan, dt), out)


@api_function
def spacing(x) -> Tracer:
    """The distance from ``x`` to the next float away from zero (negative for negative ``x``)."""
    (t,), dt, _ = promote_inexact("spacing", x)
    inf = np.array(np.inf, dt)
    return uf.where(t < 0, nextafter(t, -inf) - t, nextafter(t, inf) - t)


@api_function
def frexp(x):
    """``(mantissa, exponent)`` with ``x = mantissa * 2**exponent`` and ``0.5 <= |mantissa| <
    1`` (mantissa ``x`` and exponent 0 for 0, inf and NaN); the exponent is int32."""
    (t,), dt, _ = promote_inexact("frexp", x)
    if dtypes.is_complex(dt):
        raise TypeError("frexp: complex values are not supported")
    nmant, bias, ut, nbits = _layout(dt)
    tiny = float(dtypes.finfo(dt).tiny)
    sub = uf.logical_and(uf.abs(t) < tiny, t != 0)
    scaled = uf.where(sub, t * np.array(2.0 ** nmant, dt), t)
    b = bitcast_convert_type(scaled, ut)
    emask = (1 << (nbits - 1 - nmant)) - 1
    e = ((b >> np.array(nmant, ut)) & np.array(emask, ut)).astype(np.int32) - np.int32(bias - 1)
    e = e - uf.where(sub, np.int32(nmant), np.int32(0))
    mbits = (b & np.array(~(emask << nmant) & ((1 << nbits) - 1), ut)) | np.array((bias - 1) << nmant, ut)
    m = bitcast_convert_type(mbits, dt)
    special = uf.logical_or(t == 0, uf.logical_not(uf.isfinite(t)))
    return uf.where(special, t, m), uf.where(special, np.int32(0), e)


def _pow2(k: Tracer, dt) -> Tracer:
    """2**k exactly, for integer ``k`` in the normal exponent range of ``dt``."""
    nmant, bias, ut, _ = _layout(dt)
    return bitcast_convert_type((k.astype(ut) + np.array(bias, ut)) << np.array(nmant, ut), dt)


@api_function
def ldexp(x1, x2) -> Tracer:
    """``x1 * 2**x2`` (``x2`` integer), with one rounding unless the result is subnormal."""
    from ..lax.common import aval_of
    if not dtypes.is_int(aval_of(x2, "ldexp").dtype):
        raise TypeError(f"ldexp: x2 must be an integer, got {aval_of(x2, 'ldexp').dtype}")
    (m,), dt, _ = promote_inexact("ldexp", x1)
    (e,), _, _ = promote("ldexp", x2, to_dtype=np.int32)
    m, e = _broadcast2(m, e)
    nmant, bias, _, _ = _layout(dt)
    lim = 3 * (bias - 1)
    e = uf.clip(e, -lim, lim)
    p1 = uf.floor_divide(e, 3)
    p2 = uf.floor_divide(e - p1, 2)
    p3 = e - p1 - p2
    return m * _pow2(p1, dt) * _pow2(p2, dt) * _pow2(p3, dt)


def _broadcast2(a: Tracer, b: Tracer):
    from .shapes import broadcast_arrays
    return broadcast_arrays(a, b)


@api_function
def modf(x):
    """``(fractional part, integral part)``, both with ``x``'s sign."""
    (t,), dt, _ = promote_inexact("modf", x)
    whole = uf.where(t >= 0, uf.floor(t), uf.ceil(t))
    return t - whole, whole
