"""Functions with no op of their own, built from the IR's elementwise ops: inverse and
hyperbolic trigonometry, ``exp2``, the error function, and ``integer_pow``.

float16 and bfloat16 inputs compute in float32 and round once at the end (as XLA does for
these decompositions). The error function uses Cephes' rational approximations (erf for
|x| <= 1, erfc above), evaluated in the input's precision (float32 or float64).
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from .. import dtypes
from ..errors import ArgumentTypeError
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit1
from . import elementwise as ew
from .common import as_tracer, broadcast_in_dim, convert, require_kind


def _float_op(what: str, x, body: Callable[[Tracer], Tracer]) -> Tracer:
    (t,), weak = ew.operands(what, x)
    require_kind(what, t, "f")
    narrow = t.dtype in (dtypes.float16, dtypes.bfloat16)
    w = convert(t, dtypes.float32) if narrow else t
    out = body(w)
    if narrow:
        out = convert(out, t.dtype)
    return convert(out, out.dtype, weak_type=weak)


def _c(v, like: Tracer) -> Tracer:
    """A constant of ``like``'s dtype and shape."""
    return broadcast_in_dim(as_tracer(np.asarray(v, like.dtype)), like.shape, [])


def _sel(p, a, b):
    return emit1("select", [p, a, b])


def _cmp(a, b, d):
    return emit1("compare", [a, b], {"comparison_direction": d, "compare_type": "FLOAT"})


def _op(name, *xs):
    return emit1(name, list(xs))


def _polevl(x: Tracer, coefs: Sequence[float]) -> Tracer:
    """c0*x^n + ... + cn (Horner)."""
    acc = _c(coefs[0], x)
    for c in coefs[1:]:
        acc = _op("add", _op("multiply", acc, x), _c(c, x))
    return acc


def _p1evl(x: Tracer, coefs: Sequence[float]) -> Tracer:
    """x^n + c0*x^(n-1) + ... (leading coefficient 1)."""
    return _polevl(x, [1.0] + list(coefs))


# Cephes ndtr.c coefficients.
_T = [9.60497373987051638749e0, 9.00260197203842689217e1, 2.23200534594684319226e3,
      7.00332514112805075473e3, 5.55923013010394962768e4]
_U = [3.35617141647503099647e1, 5.21357949780152679795e2, 4.59432382970980127987e3,
      2.26290000613890934246e4, 4.92673942608635921086e4]
_P = [2.46196981473530512524e-10, 5.64189564831068821977e-1, 7.46321056442269912687e0,
      4.86371970985681366614e1, 1.96520832956077098242e2, 5.26445194995477358631e2,
      9.34528527171957607540e2, 1.02755188689515710272e3, 5.57535335369399327526e2]
_Q = [1.32281951154744992508e1, 8.67072140885989742329e1, 3.54937778887819891062e2,
      9.75708501743205489753e2, 1.82390916687909736289e3, 2.24633760818710981792e3,
      1.65666309194161350182e3, 5.57535340817727675546e2]
_R = [5.64189583547755073984e-1, 1.27536670759978104416e0, 5.01905042251180477414e0,
      6.16021097993053585195e0, 7.40974269950448939160e0, 2.97886665372100240670e0]
_S = [2.26052863220117276590e0, 9.39603524938001434673e0, 1.20489539808096656605e1,
      1.70814450747565897222e1, 9.60896809063285878198e0, 3.36907645100081516050e0]


def _erfc_abs(ax: Tracer) -> Tracer:
    """erfc(|x|) for |x| >= 1 (garbage below 1; callers select)."""
    z = _op("exponential", _op("negate", _op("multiply", ax, ax)))
    small = _cmp(ax, _c(8.0, ax), "LT")
    p = _sel(small, _polevl(ax, _P), _polevl(ax, _R))
    q = _sel(small, _p1evl(ax, _Q), _p1evl(ax, _S))
    y = _op("divide", _op("multiply", z, p), q)
    underflow = _cmp(ax, _c(27.0 if ax.dtype == dtypes.float64 else 10.0, ax), "GT")
    return _sel(underflow, _c(0.0, ax), y)


def _erf_small(x: Tracer) -> Tracer:
    z = _op("multiply", x, x)
    return _op("divide", _op("multiply", x, _polevl(z, _T)), _p1evl(z, _U))


def _erf(x: Tracer) -> Tracer:
    ax = _op("abs", x)
    big = _op("subtract", _c(1.0, x), _erfc_abs(ax))
    big = _sel(_cmp(x, _c(0.0, x), "LT"), _op("negate", big), big)
    return _sel(_cmp(ax, _c(1.0, x), "LE"), _erf_small(x), big)


def _erfc(x: Tracer) -> Tracer:
    ax = _op("abs", x)
    y = _erfc_abs(ax)
    y = _sel(_cmp(x, _c(0.0, x), "LT"), _op("subtract", _c(2.0, x), y), y)
    return _sel(_cmp(ax, _c(1.0, x), "LT"), _op("subtract", _c(1.0, x), _erf_small(x)), y)


@api_function
def erf(x) -> Tracer:
    """The error function."""
    return _float_op("lax.erf", x, _erf)


@api_function
def erfc(x) -> Tracer:
    """1 - erf(x), accurate for large x."""
    return _float_op("lax.erfc", x, _erfc)


@api_function
def exp2(x) -> Tracer:
    """2 ** x."""
    return _float_op("lax.exp2", x, lambda t: _op("exponential", _op("multiply", t, _c(math.log(2.0), t))))


@api_function
def atan(x) -> Tracer:
    return _float_op("lax.atan", x, lambda t: _op("atan2", t, _c(1.0, t)))


def _asin(t):
    one = _c(1.0, t)
    return _op("multiply", _c(2.0, t), _op("atan2", t, _op("add", one, _op("sqrt", _op("subtract", one, _op("multiply", t, t))))))


def _acos(t):
    one = _c(1.0, t)
    r = _op("multiply", _c(2.0, t), _op("atan2", _op("sqrt", _op("subtract", one, _op("multiply", t, t))), _op("add", one, t)))
    return _sel(_cmp(t, _c(-1.0, t), "EQ"), _c(math.pi, t), r)


@api_function
def asin(x) -> Tracer:
    return _float_op("lax.asin", x, _asin)


@api_function
def acos(x) -> Tracer:
    return _float_op("lax.acos", x, _acos)


def _sinh(t):
    ln_half = _c(math.log(0.5), t)
    big = _op("subtract", _op("exponential", _op("add", t, ln_half)),
              _op("exponential", _op("subtract", ln_half, t)))
    small = _op("multiply", _c(0.5, t), _op("subtract", _op("exponential_minus_one", t),
                                                _op("exponential_minus_one", _op("negate", t))))
    return _sel(_cmp(_op("abs", t), _c(1.0, t), "LT"), small, big)


def _cosh(t):
    ln_half = _c(math.log(0.5), t)
    return _op("add", _op("exponential", _op("add", t, ln_half)), _op("exponential", _op("subtract", ln_half, t)))


@api_function
def sinh(x) -> Tracer:
    return _float_op("lax.sinh", x, _sinh)


@api_function
def cosh(x) -> Tracer:
    return _float_op("lax.cosh", x, _cosh)


def _sqrt_max(t):
    return math.sqrt(float(np.finfo(t.dtype).max))


def _asinh(t):
    ax = _op("abs", t)
    one = _c(1.0, t)
    x2 = _op("multiply", ax, ax)
    mid = _op("log_plus_one", _op("add", ax, _op("divide", x2, _op("add", one, _op("sqrt", _op("add", one, x2))))))
    large = _op("add", _op("log", ax), _c(math.log(2.0), t))
    r = _sel(_cmp(ax, _c(_sqrt_max(t), t), "GE"), large, mid)
    return _sel(_cmp(t, _c(0.0, t), "LT"), _op("negate", r), r)


def _acosh(t):
    one = _c(1.0, t)
    mid = _op("log", _op("add", t, _op("sqrt", _op("multiply", _op("add", t, one), _op("subtract", t, one)))))
    large = _op("add", _op("log", t), _c(math.log(2.0), t))
    return _sel(_cmp(t, _c(_sqrt_max(t), t), "GE"), large, mid)


def _atanh(t):
    one = _c(1.0, t)
    r = _op("multiply", _c(0.5, t), _op("log_plus_one", _op("divide", _op("multiply", _c(2.0, t), t), _op("subtract", one, t))))
    return _sel(_cmp(_op("abs", t), one, "GT"), _c(np.nan, t), r)


@api_function
def asinh(x) -> Tracer:
    return _float_op("lax.asinh", x, _asinh)


@api_function
def acosh(x) -> Tracer:
    return _float_op("lax.acosh", x, _acosh)


@api_function
def atanh(x) -> Tracer:
    return _float_op("lax.atanh", x, _atanh)


@api_function
def integer_pow(x, y: int) -> Tracer:
    """x ** y for a static int y, by repeated squaring (exact for integers; as jax for floats)."""
    if isinstance(y, Tracer) or not isinstance(y, (int, np.integer)) or isinstance(y, bool):
        raise ArgumentTypeError(f"lax.integer_pow: the exponent must be a static Python int, got {y!r}")
    (t,), weak = ew.operands("lax.integer_pow", x)
    require_kind("lax.integer_pow", t, "fiuc")
    y = int(y)
    if y == 0:
        return convert(_c(1, t), t.dtype, weak_type=weak)
    neg, n = y < 0, abs(y)
    if neg and not dtypes.is_float(t.dtype):
        raise ArgumentTypeError("lax.integer_pow: negative exponents need a floating-point base")
    acc, base = None, t
    while n > 0:
        if n & 1:
            acc = base if acc is None else _op("multiply", acc, base)
        n >>= 1
        if n > 0:
            base = _op("multiply", base, base)
    if neg:
        acc = _op("divide", _c(1, t), acc)
    return convert(acc, acc.dtype, weak_type=weak)
