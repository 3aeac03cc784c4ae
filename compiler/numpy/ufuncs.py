"""Elementwise functions of hlo.numpy: arithmetic, powers and logarithms, trigonometry, rounding,
comparisons, logic and bit operations, ``where``, ``clip`` and friends.

Arguments are promoted (jax.numpy's rules, ``hlo.dtypes``) and broadcast (numpy's rules).
Functions that are only defined for floats (sqrt, exp, sin...) promote integers and bools to
float32 (64-bit integers to float64). ``floor_divide`` and ``remainder``/``mod`` follow Python's
sign rules (the result of ``%`` has the divisor's sign), as numpy does.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .. import dtypes
from ..errors import DTypeError, UnsupportedError
from ..lax import special
from ..lax.common import as_tracer, aval_of, broadcast_in_dim, convert, with_weak
from ..lax.elementwise import compare_type
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit1
from .promotion import promote, promote_inexact, promote_numeric, to_bool


def _op(name, *xs, weak=False):
    return emit1(name, list(xs), weak_type=weak)


def _const(v, like: Tracer) -> Tracer:
    return broadcast_in_dim(as_tracer(np.asarray(v, like.dtype)), like.shape, [])


def _cmp(a, b, direction):
    return emit1("compare", [a, b], {"comparison_direction": direction, "compare_type": compare_type(a.dtype)})


def _select(p, a, b, weak=False):
    return emit1("select", [p, a, b], weak_type=weak)


def _isnan(x):
    return emit1("compare", [x, x], {"comparison_direction": "NE", "compare_type": "FLOAT"})


def _define(name: str, fn: Callable, doc: str = "") -> Callable:
    fn.__name__ = fn.__qualname__ = name
    if doc:
        fn.__doc__ = doc
    return api_function(fn)


# --------------------------------------------------------------------------------------------
# arithmetic
# --------------------------------------------------------------------------------------------

@api_function
def add(x1, x2) -> Tracer:
    """x1 + x2 (logical or for bools)."""
    (a, b), dt, weak = promote("add", x1, x2)
    return _op("or" if dtypes.is_bool(dt) else "add", a, b, weak=weak)


@api_function
def subtract(x1, x2) -> Tracer:
    """x1 - x2 (not defined for bools)."""
    (a, b), dt, weak = promote_numeric("subtract", x1, x2)
    return _op("subtract", a, b, weak=weak)


@api_function
def multiply(x1, x2) -> Tracer:
    """x1 * x2 (logical and for bools)."""
    (a, b), dt, weak = promote("multiply", x1, x2)
    return _op("and" if dtypes.is_bool(dt) else "multiply", a, b, weak=weak)


@api_function
def true_divide(x1, x2) -> Tracer:
    """x1 / x2 in floating point (integers divide as float32, 64-bit integers as float64)."""
    (a, b), dt, weak = promote_inexact("true_divide", x1, x2)
    return _op("divide", a, b, weak=weak)


divide = _define("divide", lambda x1, x2: true_divide(x1, x2), "x1 / x2 (same as true_divide).")


def _float_divmod(a: Tracer, b: Tracer):
    """Python's float divmod (as jax.numpy): floor quotient and a remainder with b's sign."""
    mod = _op("remainder", a, b)
    zero = _const(0, a)
    corrected = _select(_cmp(b, zero, "EQ"), a, _op("subtract", a, mod))
    div = _op("divide", corrected, b)
    ind = _op("and", _cmp(mod, zero, "NE"), _cmp(_op("sign", b), _op("sign", mod), "NE"))
    mod = _select(ind, _op("add", mod, b), mod)
    div = _select(ind, _op("subtract", div, _const(1, div)), div)
    return _op("round_nearest_even", div), mod


@api_function
def floor_divide(x1, x2) -> Tracer:
    """x1 // x2: the quotient rounded toward -inf (Python's and numpy's rule)."""
    (a, b), dt, weak = promote_numeric("floor_divide", x1, x2)
    if dtypes.is_unsigned(dt):
        return _op("divide", a, b, weak=weak)
    if dtypes.is_signed(dt):
        q = _op("divide", a, b)
        zero = _const(0, a)
        adjust = _op("and", _cmp(_op("sign", a), _op("sign", b), "NE"),
                     _cmp(_op("remainder", a, b), zero, "NE"))
        return _select(adjust, _op("subtract", q, _const(1, q)), q, weak=weak)
    return with_weak(_float_divmod(a, b)[0], weak)


def _int_remainder_by_zero_is_zero(a: Tracer, b: Tracer, r: Tracer, weak: bool) -> Tracer:
    """An integer remainder by zero is 0, as numpy's and jax.numpy's ``%`` and ``fmod`` give for
    every integer type (the IR's ``remainder`` keeps XLA's ``x % 0 = x``)."""
    zero = _const(0, a)
    return _select(_cmp(b, zero, "EQ"), zero, r, weak=weak)


@api_function
def remainder(x1, x2) -> Tracer:
    """x1 % x2 with the sign of x2 (Python's and numpy's rule); an integer x1 % 0 is 0."""
    (a, b), dt, weak = promote_numeric("remainder", x1, x2)
    zero = _const(0, a)
    r = _op("remainder", a, b)
    if dtypes.is_unsigned(dt):
        return _int_remainder_by_zero_is_zero(a, b, r, weak)
    fix = _op("and", _cmp(r, zero, "NE"), _cmp(_cmp(r, zero, "LT"), _cmp(b, zero, "LT"), "NE"))
    r = _select(fix, _op("add", r, b), r, weak=weak)
    return _int_remainder_by_zero_is_zero(a, b, r, weak) if dtypes.is_int(dt) else r


mod = _define("mod", lambda x1, x2: remainder(x1, x2), "x1 % x2 with the sign of x2 (same as remainder).")


@api_function
def fmod(x1, x2) -> Tracer:
    """Remainder with the sign of x1 (C's fmod); an integer fmod by 0 is 0."""
    (a, b), dt, weak = promote_numeric("fmod", x1, x2)
    r = _op("remainder", a, b, weak=weak)
    return _int_remainder_by_zero_is_zero(a, b, r, weak) if dtypes.is_int(dt) else r


@api_function
def divmod(x1, x2):
    """(x1 // x2, x1 % x2)."""
    return floor_divide(x1, x2), remainder(x1, x2)


@api_function
def power(x1, x2) -> Tracer:
    """x1 ** x2. A Python int exponent multiplies by repeated squaring (exact for integers)."""
    if isinstance(x2, (int, np.integer)) and not isinstance(x2, (bool, np.bool_)):
        base = as_tracer(x1, what="power")
        if dtypes.is_bool(base.dtype):
            base = convert(base, dtypes.int32)
        if int(x2) < 0 and not dtypes.is_float(base.dtype):
            raise ValueError("power: integers to negative integer powers are not allowed")
        return special.integer_pow(base, int(x2))
    (a, b), dt, weak = promote("power", x1, x2)
    if dtypes.is_bool(dt):
        a, b = convert(a, dtypes.int32), convert(b, dtypes.int32)
        return convert(_op("power", a, b), dtypes.int32)
    return _op("power", a, b, weak=weak)


pow = _define("pow", lambda x1, x2: power(x1, x2), "x1 ** x2 (same as power).")


@api_function
def float_power(x1, x2) -> Tracer:
    (a, b), dt, weak = promote("float_power", x1, x2)
    f = dtypes.float64 if dt.itemsize == 8 or dtypes.is_int(dt) and dt.itemsize >= 4 else dtypes.to_inexact(dt)
    return _op("power", convert(a, f), convert(b, f))


@api_function
def negative(x) -> Tracer:
    (a,), dt, weak = promote_numeric("negative", x)
    return _op("negate", a, weak=weak)


@api_function
def positive(x) -> Tracer:
    (a,), dt, weak = promote("positive", x)
    return a


@api_function
def absolute(x) -> Tracer:
    """|x| (identity for unsigned integers and bools)."""
    (a,), dt, weak = promote("absolute", x)
    if dtypes.is_unsigned(dt) or dtypes.is_bool(dt):
        return a
    return _op("abs", a, weak=weak)


abs = _define("abs", lambda x: absolute(x), "|x| (same as absolute).")
fabs = _define("fabs", lambda x: absolute(promote_inexact("fabs", x)[0][0]), "|x| as a float.")


@api_function
def sign(x) -> Tracer:
    """-1, 0 or 1 (NaN for NaN)."""
    (a,), dt, weak = promote("sign", x)
    if dtypes.is_bool(dt):
        return a
    if dtypes.is_unsigned(dt):
        return convert(_cmp(a, _const(0, a), "GT"), dt, weak)
    return _op("sign", a, weak=weak)


@api_function
def reciprocal(x) -> Tracer:
    """1 / x (keeps integer dtypes, as numpy: integer division)."""
    (a,), dt, weak = promote("reciprocal", x)
    return _op("divide", _const(1, a), a, weak=weak)


@api_function
def square(x) -> Tracer:
    (a,), dt, weak = promote("square", x)
    if dtypes.is_bool(dt):  # as jax.numpy: bools square as int32
        a = convert(a, dtypes.int32)
    return special.integer_pow(a, 2)


def _unary_float(name, ir, doc=""):
    def f(x):
        (a,), dt, weak = promote_inexact(name, x)
        return _op(ir, a, weak=weak)
    return _define(name, f, doc)


def _unary_special(name, fn, doc=""):
    def f(x):
        (a,), dt, weak = promote_inexact(name, x)
        return with_weak(fn(a), weak)
    return _define(name, f, doc)


sqrt = _unary_float("sqrt", "sqrt")
cbrt = _unary_float("cbrt", "cbrt")
exp = _unary_float("exp", "exponential")
expm1 = _unary_float("expm1", "exponential_minus_one")
log = _unary_float("log", "log")
log1p = _unary_float("log1p", "log_plus_one")
sin = _unary_float("sin", "sine")
cos = _unary_float("cos", "cosine")
tan = _unary_float("tan", "tan")
tanh = _unary_float("tanh", "tanh")
rsqrt = _unary_float("rsqrt", "rsqrt")
exp2 = _unary_special("exp2", special.exp2)
arcsin = _unary_special("arcsin", special.asin)
arccos = _unary_special("arccos", special.acos)
arctan = _unary_special("arctan", special.atan)
sinh = _unary_special("sinh", special.sinh)
cosh = _unary_special("cosh", special.cosh)
arcsinh = _unary_special("arcsinh", special.asinh)
arccosh = _unary_special("arccosh", special.acosh)
arctanh = _unary_special("arctanh", special.atanh)
asin, acos, atan, asinh, acosh, atanh = arcsin, arccos, arctan, arcsinh, arccosh, arctanh


def _log_base(name, base):
    def f(x):
        (a,), dt, weak = promote_inexact(name, x)
        return _op("divide", _op("log", a), _op("log", _const(base, a)), weak=weak)
    return _define(name, f, f"Logarithm to base {base}.")


log2 = _log_base("log2", 2.0)
log10 = _log_base("log10", 10.0)


@api_function
def arctan2(x1, x2) -> Tracer:
    (a, b), dt, weak = promote_inexact("arctan2", x1, x2)
    return _op("atan2", a, b, weak=weak)


atan2 = arctan2


@api_function
def hypot(x1, x2) -> Tracer:
    """sqrt(x1**2 + x2**2) without overflow for large inputs."""
    (a, b), dt, weak = promote_inexact("hypot", x1, x2)
    a, b = _op("abs", a), _op("abs", b)
    hi, lo = _op("maximum", a, b), _op("minimum", a, b)
    zero = _const(0, hi)
    ratio = _select(_cmp(hi, zero, "EQ"), zero, _op("divide", lo, hi))
    r = _op("multiply", hi, _op("sqrt", _op("add", _const(1, hi), _op("multiply", ratio, ratio))))
    inf = _op("or", _cmp(a, _const(np.inf, a), "EQ"), _cmp(b, _const(np.inf, b), "EQ"))
    return _select(inf, _const(np.inf, r), r, weak=weak)


@api_function
def logaddexp(x1, x2) -> Tracer:
    """log(exp(x1) + exp(x2)) without overflow."""
    (a, b), dt, weak = promote_inexact("logaddexp", x1, x2)
    amax = _op("maximum", a, b)
    delta = _op("subtract", a, b)
    r = _op("add", amax, _op("log_plus_one", _op("exponential", _op("negate", _op("abs", delta)))))
    return _select(_isnan(delta), _op("add", a, b), r, weak=weak)


@api_function
def logaddexp2(x1, x2) -> Tracer:
    """log2(2**x1 + 2**x2) without overflow."""
    (a, b), dt, weak = promote_inexact("logaddexp2", x1, x2)
    amax = _op("maximum", a, b)
    delta = _op("subtract", a, b)
    ln2 = _const(math.log(2.0), a)
    r = _op("add", amax, _op("divide", _op("log_plus_one", special.exp2(_op("negate", _op("abs", delta)))), ln2))
    return _select(_isnan(delta), _op("add", a, b), r, weak=weak)


@api_function
def deg2rad(x) -> Tracer:
    (a,), dt, weak = promote_inexact("deg2rad", x)
    return _op("multiply", a, _const(np.pi / 180, a), weak=weak)


@api_function
def rad2deg(x) -> Tracer:
    (a,), dt, weak = promote_inexact("rad2deg", x)
    return _op("multiply", a, _const(180 / np.pi, a), weak=weak)


radians, degrees = deg2rad, rad2deg


@api_function
def sinc(x) -> Tracer:
    """sin(pi x) / (pi x), 1 at 0."""
    (a,), dt, weak = promote_inexact("sinc", x)
    zero = _cmp(a, _const(0, a), "EQ")
    safe = _select(zero, _const(1, a), a)
    pix = _op("multiply", safe, _const(np.pi, a))
    return _select(zero, _const(1, a), _op("divide", _op("sine", pix), pix), weak=weak)


@api_function
def copysign(x1, x2) -> Tracer:
    """|x1| with the sign (bit) of x2."""
    (a, b), dt, weak = promote_inexact("copysign", x1, x2)
    neg = signbit(b)
    aa = _op("abs", a)
    return _select(neg, _op("negate", aa), aa, weak=weak)


@api_function
def heaviside(x1, x2) -> Tracer:
    """0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0."""
    (a, b), dt, weak = promote_inexact("heaviside", x1, x2)
    zero = _const(0, a)
    r = _select(_cmp(a, zero, "LT"), zero, _const(1, a))
    return _select(_cmp(a, zero, "EQ"), b, r, weak=weak)


# --------------------------------------------------------------------------------------------
# rounding
# --------------------------------------------------------------------------------------------

def _rounding(name, ir):
    def f(x):
        (a,), dt, weak = promote(name, x)
        if not dtypes.is_float(dt):
            return a
        return _op(ir, a, weak=weak)
    return _define(name, f, f"Round each element ({ir}); integers are returned unchanged.")


floor = _rounding("floor", "floor")
ceil = _rounding("ceil", "ceil")


@api_function
def rint(x) -> Tracer:
    """Round to the nearest integral value, halfway cases to even (integers become floats)."""
    (a,), dt, weak = promote_inexact("rint", x)
    return _op("round_nearest_even", a, weak=weak)


@api_function
def trunc(x) -> Tracer:
    """Round toward zero."""
    (a,), dt, weak = promote("trunc", x)
    if not dtypes.is_float(dt):
        return a
    return _select(_cmp(a, _const(0, a), "LT"), _op("ceil", a), _op("floor", a), weak=weak)


fix = _define("fix", lambda x: trunc(x), "Round toward zero (same as trunc).")


@api_function
def round(a, decimals: int = 0) -> Tracer:
    """Round to ``decimals`` decimals, halfway cases to even (as numpy)."""
    from ..lax.common import static_int
    d = static_int("round: decimals", decimals)
    (x,), dt, weak = promote("round", a)
    if not dtypes.is_float(dt):
        if d >= 0:
            return x
        factor = _const(10 ** (-d), x)
        q = floor_divide(x, factor)
        r = _op("subtract", x, _op("multiply", q, factor))
        half = _op("multiply", r, _const(2, x))
        up = _op("or", _cmp(half, factor, "GT"),
                 _op("and", _cmp(half, factor, "EQ"), _cmp(_op("remainder", q, _const(2, q)), _const(0, q), "NE")))
        return _op("multiply", _select(up, _op("add", q, _const(1, q)), q), factor, weak=weak)
    if d == 0:
        return _op("round_nearest_even", x, weak=weak)
    f = _const(10.0 ** d, x)
    return _op("divide", _op("round_nearest_even", _op("multiply", x, f)), f, weak=weak)


around = round
round_ = round


# --------------------------------------------------------------------------------------------
# min / max / clip / where
# --------------------------------------------------------------------------------------------

@api_function
def maximum(x1, x2) -> Tracer:
    """Elementwise maximum; NaN if either is NaN."""
    (a, b), dt, weak = promote("maximum", x1, x2)
    return _op("maximum", a, b, weak=weak)


@api_function
def minimum(x1, x2) -> Tracer:
    """Elementwise minimum; NaN if either is NaN."""
    (a, b), dt, weak = promote("minimum", x1, x2)
    return _op("minimum", a, b, weak=weak)


@api_function
def fmax(x1, x2) -> Tracer:
    """Elementwise maximum ignoring NaNs (NaN only if both are)."""
    (a, b), dt, weak = promote("fmax", x1, x2)
    if not dtypes.is_float(dt):
        return _op("maximum", a, b, weak=weak)
    m = _op("maximum", a, b)
    return _select(_isnan(a), b, _select(_isnan(b), a, m), weak=weak)


@api_function
def fmin(x1, x2) -> Tracer:
    """Elementwise minimum ignoring NaNs (NaN only if both are)."""
    (a, b), dt, weak = promote("fmin", x1, x2)
    if not dtypes.is_float(dt):
        return _op("minimum", a, b, weak=weak)
    m = _op("minimum", a, b)
    return _select(_isnan(a), b, _select(_isnan(b), a, m), weak=weak)


@api_function
def clip(arr=None, min=None, max=None, *, a=None, a_min=None, a_max=None) -> Tracer:
    """Limit values to [min, max] (either bound may be None): ``minimum(maximum(x, min), max)``."""
    x = arr if arr is not None else a
    if x is None:
        raise TypeError("clip: missing the array argument")
    lo = min if min is not None else a_min
    hi = max if max is not None else a_max
    out = as_tracer(x, what="clip") if not isinstance(x, Tracer) else x
    if lo is not None:
        out = maximum(out, lo)
    if hi is not None:
        out = minimum(out, hi)
    return out


@api_function
def where(condition, x=None, y=None) -> Tracer:
    """``x`` where ``condition`` else ``y`` (all three broadcast; x and y promote)."""
    if x is None and y is None:
        raise UnsupportedError("where(condition) with one argument returns arrays whose size "
                               "depends on the data, which hlo cannot compile; use "
                               "where(condition, x, y) or a mask")
    if x is None or y is None:
        raise TypeError("where: give both x and y (or neither)")
    from ..lax.common import broadcast_shapes, broadcast_to_shape
    c = to_bool(as_tracer(condition, what="where: condition"))
    (a, b), dt, weak = promote("where", x, y)
    shape = broadcast_shapes("where", c.shape, a.shape)
    c, a, b = (broadcast_to_shape(t, shape, "where") for t in (c, a, b))
    return _select(c, a, b, weak=weak)


# --------------------------------------------------------------------------------------------
# floating-point classification
# --------------------------------------------------------------------------------------------

def _float_or_false(name, x):
    (a,), dt, weak = promote(name, x)
    return a, dtypes.is_float(dt)


@api_function
def isnan(x) -> Tracer:
    a, isf = _float_or_false("isnan", x)
    return _isnan(a) if isf else broadcast_in_dim(as_tracer(np.asarray(False)), a.shape, [])


@api_function
def isinf(x) -> Tracer:
    a, isf = _float_or_false("isinf", x)
    if not isf:
        return broadcast_in_dim(as_tracer(np.asarray(False)), a.shape, [])
    return _cmp(_op("abs", a), _const(np.inf, a), "EQ")


@api_function
def isfinite(x) -> Tracer:
    a, isf = _float_or_false("isfinite", x)
    if not isf:
        return broadcast_in_dim(as_tracer(np.asarray(True)), a.shape, [])
    return _op("is_finite", a)


@api_function
def isposinf(x) -> Tracer:
    a, isf = _float_or_false("isposinf", x)
    if not isf:
        return broadcast_in_dim(as_tracer(np.asarray(False)), a.shape, [])
    return _cmp(a, _const(np.inf, a), "EQ")


@api_function
def isneginf(x) -> Tracer:
    a, isf = _float_or_false("isneginf", x)
    if not isf:
        return broadcast_in_dim(as_tracer(np.asarray(False)), a.shape, [])
    return _cmp(a, _const(-np.inf, a), "EQ")


@api_function
def signbit(x) -> Tracer:
    """True where the sign bit is set (also for -0.0 and negative NaNs)."""
    (a,), dt, weak = promote("signbit", x)
    if dtypes.is_unsigned(dt) or dtypes.is_bool(dt):
        return broadcast_in_dim(as_tracer(np.asarray(False)), a.shape, [])
    if dtypes.is_signed(dt):
        return _cmp(a, _const(0, a), "LT")
    from ..lax.common import ir_type
    idt = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[dt.itemsize]
    bits = emit1("bitcast_convert", [a], result_types=[ir_type(a.shape, idt)])
    return _cmp(bits, broadcast_in_dim(as_tracer(np.asarray(0, idt)), a.shape, []), "LT")


@api_function
def nan_to_num(x, copy: bool = True, nan=0.0, posinf=None, neginf=None) -> Tracer:
    """NaN -> ``nan``, +inf -> ``posinf`` (default: the largest finite value), -inf -> ``neginf``."""
    (a,), dt, weak = promote("nan_to_num", x)
    if not dtypes.is_float(dt):
        return a
    info = dtypes.finfo(dt)
    hi = float(info.max) if posinf is None else posinf
    lo = float(info.min) if neginf is None else neginf
    out = _select(_isnan(a), _const(nan, a), a)
    out = _select(_cmp(out, _const(np.inf, a), "EQ"), _const(hi, a), out)
    out = _select(_cmp(out, _const(-np.inf, a), "EQ"), _const(lo, a), out)
    return with_weak(out, weak)


# --------------------------------------------------------------------------------------------
# comparisons and logic
# --------------------------------------------------------------------------------------------

def _comparison(name, direction):
    def f(x1, x2):
        (a, b), dt, weak = promote(name, x1, x2)
        return _cmp(a, b, direction)
    return _define(name, f, f"Elementwise x1 {direction} x2 (bool result).")


equal = _comparison("equal", "EQ")
not_equal = _comparison("not_equal", "NE")
less = _comparison("less", "LT")
less_equal = _comparison("less_equal", "LE")
greater = _comparison("greater", "GT")
greater_equal = _comparison("greater_equal", "GE")


def _logical(name, ir):
    def f(x1, x2):
        (a, b), dt, weak = promote(name, x1, x2)
        return _op(ir, to_bool(a), to_bool(b))
    return _define(name, f, f"Elementwise logical {ir} (bool result).")


logical_and = _logical("logical_and", "and")
logical_or = _logical("logical_or", "or")
logical_xor = _logical("logical_xor", "xor")


@api_function
def logical_not(x) -> Tracer:
    (a,), dt, weak = promote("logical_not", x)
    return _op("not", to_bool(a))


def _bitwise(name, ir):
    def f(x1, x2):
        (a, b), dt, weak = promote(name, x1, x2)
        if dtypes.is_float(dt):
            raise DTypeError(f"{name} is only defined for integers and bools, got "
                             f"{dtypes.dtype_name(dt)} arguments")
        return _op(ir, a, b, weak=weak)
    return _define(name, f, f"Elementwise bitwise {ir} (integers and bools).")


bitwise_and = _bitwise("bitwise_and", "and")
bitwise_or = _bitwise("bitwise_or", "or")
bitwise_xor = _bitwise("bitwise_xor", "xor")


@api_function
def bitwise_not(x) -> Tracer:
    (a,), dt, weak = promote("bitwise_not", x)
    if dtypes.is_float(dt):
        raise DTypeError(f"bitwise_not is only defined for integers and bools, got {dtypes.dtype_name(dt)}")
    return _op("not", a, weak=weak)


invert = bitwise_invert = bitwise_not


@api_function
def left_shift(x1, x2) -> Tracer:
    (a, b), dt, weak = promote("left_shift", x1, x2)
    if not dtypes.is_int(dt):
        raise DTypeError(f"left_shift is only defined for integers, got {dtypes.dtype_name(dt)}")
    return _op("shift_left", a, b, weak=weak)


@api_function
def right_shift(x1, x2) -> Tracer:
    """x1 >> x2: arithmetic for signed integers, logical for unsigned."""
    (a, b), dt, weak = promote("right_shift", x1, x2)
    if not dtypes.is_int(dt):
        raise DTypeError(f"right_shift is only defined for integers, got {dtypes.dtype_name(dt)}")
    ir = "shift_right_arithmetic" if dtypes.is_signed(dt) else "shift_right_logical"
    return _op(ir, a, b, weak=weak)


bitwise_left_shift, bitwise_right_shift = left_shift, right_shift


@api_function
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False) -> Tracer:
    """|a - b| <= atol + rtol * |b| elementwise (infinities equal only to themselves)."""
    (x, y), dt, weak = promote("isclose", a, b)
    if not dtypes.is_float(dt):
        return _cmp(x, y, "EQ")
    diff = _op("abs", _op("subtract", x, y))
    tol = _op("add", _const(atol, x), _op("multiply", _const(rtol, x), _op("abs", y)))
    close = _cmp(diff, tol, "LE")
    both_inf = _op("and", isinf(x), isinf(y))
    close = _select(both_inf, _cmp(x, y, "EQ"), _op("and", close, _op("is_finite", y)))
    close = _op("or", close, _cmp(x, y, "EQ"))
    if equal_nan:
        close = _op("or", close, _op("and", _isnan(x), _isnan(y)))
    return close


@api_function
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False) -> Tracer:
    from .reductions import all as _all
    return _all(isclose(a, b, rtol, atol, equal_nan))


@api_function
def array_equal(a1, a2, equal_nan: bool = False) -> Tracer:
    """True if both have the same shape and elements (a shape mismatch gives False)."""
    from .reductions import all as _all
    s1, s2 = aval_of(a1).shape, aval_of(a2).shape
    if s1 != s2:
        return as_tracer(np.asarray(False))
    eq = equal(a1, a2)
    if equal_nan:
        eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
    return _all(eq)
