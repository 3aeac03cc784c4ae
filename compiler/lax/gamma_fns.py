"""hlo.lax.lgamma and hlo.lax.digamma: XLA's Lanczos approximation (g = 7, 9 terms) with the
reflection formula below 1/2, written with hlo's elementwise ops (f16/bf16 compute in f32)."""
from __future__ import annotations

import math

from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from .special import _c, _cmp, _float_op, _op, _sel

_G = 7.0
_BASE = 0.99999999999980993227684700473478
_COEFFS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283,
           771.3234287776530788486528258894, -176.61502916214059906584551354,
           12.507343278686904814458936853, -0.13857109526572011689554707,
           9.984369578019570859563e-6, 1.50563273514931155834e-7)


def _z(x):
    reflect = _cmp(x, _c(0.5, x), "LT")
    z = _sel(reflect, _op("negate", x), _op("subtract", x, _c(1.0, x)))
    return reflect, z


def _log_t(z):
    t = _op("add", z, _c(_G + 0.5, z))
    log_t = _op("add", _c(math.log(_G + 0.5), z), _op("log_plus_one", _op("divide", z, _c(_G + 0.5, z))))
    return t, log_t


def _lgamma(x: Tracer) -> Tracer:
    reflect, z = _z(x)
    s = _c(_BASE, x)
    for i, c in enumerate(_COEFFS):
        s = _op("add", s, _op("divide", _c(c, x), _op("add", z, _c(i + 1.0, x))))
    t, log_t = _log_t(z)
    log_y = _op("add", _op("add", _c(0.5 * math.log(2 * math.pi), x),
                           _op("multiply", _op("subtract", _op("add", z, _c(0.5, x)), _op("divide", t, log_t)),
                               log_t)),
                _op("log", s))
    ax = _op("abs", x)
    # the reflection's input: x where it is used, 0.25 elsewhere (no inf or NaN there, so none
    # reaches the gradient through the select)
    xr = _op("abs", _sel(reflect, x, _c(0.25, x)))
    frac = _op("subtract", xr, _op("floor", xr))
    reduced = _sel(_cmp(frac, _c(0.5, x), "GT"), _op("subtract", _c(1.0, x), frac), frac)
    denom = _op("log", _op("sine", _op("multiply", _c(math.pi, x), reduced)))
    finite = _op("is_finite", denom)
    reflection = _sel(finite, _op("subtract", _op("subtract", _c(math.log(math.pi), x), denom), log_y),
                      _op("negate", denom))
    out = _sel(reflect, reflection, log_y)
    is_inf = _cmp(ax, _c(math.inf, x), "EQ")
    return _sel(is_inf, _c(math.inf, x), out)


def _digamma(x: Tracer) -> Tracer:
    reflect, z = _z(x)
    num, den = _c(0.0, x), _c(_BASE, x)
    for i, c in enumerate(_COEFFS):
        zi = _op("add", z, _c(i + 1.0, x))
        num = _op("subtract", num, _op("divide", _c(c, x), _op("multiply", zi, zi)))
        den = _op("add", den, _op("divide", _c(c, x), zi))
    t, log_t = _log_t(z)
    y = _op("subtract", _op("add", log_t, _op("divide", num, den)), _op("divide", _c(_G, x), t))
    xr = _sel(reflect, x, _c(0.25, x))  # (as in _lgamma: keeps the unused branch finite)
    reduced = _op("add", xr, _op("abs", _op("floor", _op("add", xr, _c(0.5, x)))))
    arg = _op("multiply", _c(math.pi, x), reduced)
    reflection = _op("subtract", y, _op("divide", _op("multiply", _c(math.pi, x), _op("cosine", arg)),
                                        _op("sine", arg)))
    out = _sel(reflect, reflection, y)
    pole = _op("and", _cmp(x, _c(0.0, x), "LE"), _cmp(x, _op("floor", x), "EQ"))
    return _sel(pole, _c(math.nan, x), out)


@api_function
def lgamma(x) -> Tracer:
    """log |Gamma(x)| (+inf at the poles and at +-inf)."""
    return _float_op("lax.lgamma", x, _lgamma)


@api_function
def digamma(x) -> Tracer:
    """The logarithmic derivative of Gamma (NaN at 0 and the negative integers)."""
    return _float_op("lax.digamma", x, _digamma)
