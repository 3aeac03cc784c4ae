"""The inverse error function, computed exactly as XLA computes it (``ErfInv`` in
xla/hlo/builder/lib/math.cc, which jax's ``lax.erf_inv`` lowers to), so that
``hlo.random.normal`` reproduces ``jax.random.normal`` to within the rounding of ``log1p`` and
``sqrt``.

- float32 (and float16/bfloat16, computed in float32 and rounded back): M. Giles'
  single-precision approximation, "Approximating the erfinv function" (GPU Computing Gems,
  2011): with ``w = -log1p(-x*x)``, a degree-8 polynomial in ``w - 2.5`` (``w < 5``) or
  ``sqrt(w) - 3`` (otherwise), times ``x``.
- float64: Giles' double-precision version, three ranges (``w < 6.25``, ``w < 16``, else) with
  polynomials of degree 22, 18 and 16.

``erf_inv(+-1)`` is ``+-inf``; outside ``[-1, 1]`` the result is NaN.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from .common import as_tracer, convert, full, require_kind
from .elementwise import abs as _abs
from .elementwise import add, eq, log1p, lt, mul, neg, select, sqrt, sub

_F32_LT_5 = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
             -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_F32_GE_5 = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
             -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)

_F64_LT_6_25 = (
    -3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
    1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
    6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
    2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
    1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
    4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
    0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
    0.24015818242558961693, 1.6536545626831027356)
_F64_LT_16 = (
    2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
    1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
    2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
    6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
    0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
    -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
    3.0838856104922207635)
_F64_GE_16 = (
    -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
    -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
    2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
    -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
    7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
    1.0103004648645343977, 4.8499064014085844221)


def _c(v, x: Tracer) -> Tracer:
    """The constant ``v`` in ``x``'s dtype and shape (as XLA's ``FullLike``)."""
    return full(x.shape, v, x.dtype)


def _w(x: Tracer) -> Tracer:
    return neg(log1p(mul(x, neg(x))))


def _edges(x: Tracer, result: Tracer) -> Tracer:
    """erf_inv(+-1) = +-inf (the polynomial is indeterminate there)."""
    return select(eq(_abs(x), _c(1.0, x)), mul(x, _c(np.inf, x)), result)


def _erf_inv32(x: Tracer) -> Tracer:
    w = _w(x)
    small = lt(w, _c(5.0, x))
    w = select(small, sub(w, _c(2.5, x)), sub(sqrt(w), _c(3.0, x)))
    coef = [select(small, _c(a, x), _c(b, x)) for a, b in zip(_F32_LT_5, _F32_GE_5)]
    p = coef[0]
    for c in coef[1:]:
        p = add(c, mul(p, w))
    return _edges(x, mul(p, x))


def _erf_inv64(x: Tracer) -> Tracer:
    w = _w(x)
    lt_6_25 = lt(w, _c(6.25, x))
    lt_16 = lt(w, _c(16.0, x))

    def coefficient(i):
        c = _c(_F64_LT_6_25[i], x)
        if i < 19:
            c = select(lt_6_25, c, _c(_F64_LT_16[i], x))
        if i < 17:
            c = select(lt_16, c, _c(_F64_GE_16[i], x))
        return c

    w = select(lt_6_25, sub(w, _c(3.125, x)),
               sub(sqrt(w), select(lt_16, _c(3.25, x), _c(5.0, x))))
    p = coefficient(0)
    for i in range(1, 17):
        p = add(coefficient(i), mul(p, w))
    for i in range(17, 19):
        p = select(lt_16, add(coefficient(i), mul(p, w)), p)
    for i in range(19, 23):
        p = select(lt_6_25, add(coefficient(i), mul(p, w)), p)
    return _edges(x, mul(p, x))


@api_function
def erf_inv(x) -> Tracer:
    """The inverse of ``erf`` on ``[-1, 1]`` (floating-point ``x``), as XLA computes it."""
    t = as_tracer(x, what="erf_inv")
    require_kind("erf_inv", t, "f")
    if t.dtype == dtypes.float64:
        return _erf_inv64(t)
    if t.dtype == dtypes.float32:
        return _erf_inv32(t)
    return convert(_erf_inv32(convert(t, dtypes.float32)), t.dtype)
