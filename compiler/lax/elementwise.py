"""Elementwise ops of hlo.lax: one IR op each, with jax.lax's strictness.

Operands must share one dtype (a Python scalar adopts the dtype of the array operands when its
kind fits: bool for bool, int for int or float, float for float); shapes must be equal, except
that rank-0 operands broadcast. For numpy-style promotion and broadcasting use hlo.numpy.
"""
from __future__ import annotations

import builtins
from typing import List, Tuple

import numpy as np

from .. import dtypes
from ..errors import DTypeError, ShapeError
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit1
from .common import as_tracer, aval_of, broadcast_in_dim, convert, require_kind

_KIND_WORDS = {"f": "floating-point", "i": "signed integer", "u": "unsigned integer", "b": "boolean",
               "c": "complex"}


def operands(what: str, *xs) -> Tuple[List[Tracer], bool]:
    """Strict operands for a lax op (see the module docstring) and the result's weak flag."""
    avals = [aval_of(x, what) for x in xs]
    arrays = [a for x, a in zip(xs, avals) if not dtypes.is_python_scalar(x)]
    if arrays:
        dt = arrays[0].dtype
        for a in arrays[1:]:
            if a.dtype != dt:
                raise DTypeError(f"{what} requires arguments to have the same dtype, got "
                                 f"{', '.join(dtypes.dtype_name(b.dtype) for b in arrays)} "
                                 f"(hlo.numpy.{what.split('.')[-1].rstrip('_')} promotes automatically)")
        for x in xs:
            if dtypes.is_python_scalar(x) and not _scalar_fits_kind(x, dt):
                raise DTypeError(f"{what}: the Python {type(x).__name__} {x!r} does not fit the "
                                 f"arguments' dtype {dtypes.dtype_name(dt)}")
    else:
        dt, _ = dtypes.result_type_of([(a.dtype, a.weak_type) for a in avals])
    shapes = {a.shape for a in avals if a.shape != ()}
    if len(shapes) > 1:
        raise ShapeError(f"{what} requires arguments to have the same shape (or rank 0), got "
                         f"{', '.join(str(a.shape) for a in avals)}")
    shape = shapes.pop() if shapes else ()
    weak = all(a.weak_type for a in avals)
    ts = []
    for x in xs:
        t = as_tracer(x, dt, what)
        if t.shape != shape:
            t = broadcast_in_dim(t, shape, [])
        ts.append(t)
    return ts, weak


def _scalar_fits_kind(x, dt) -> bool:
    if isinstance(x, bool):
        return True
    if isinstance(x, int):
        return not dtypes.is_bool(dt)
    if isinstance(x, builtins.complex):
        return dtypes.is_complex(dt)
    return dtypes.is_float(dt) or dtypes.is_complex(dt)


def unary(ir_name: str, what: str, x, kinds: str) -> Tracer:
    (t,), weak = operands(what, x)
    require_kind(what, t, kinds)
    return emit1(ir_name, [t], weak_type=weak)


def binary(ir_name: str, what: str, x, y, kinds: str) -> Tracer:
    (a, b), weak = operands(what, x, y)
    require_kind(what, a, kinds)
    return emit1(ir_name, [a, b], weak_type=weak)


NUMERIC = "fiuc"
REAL_NUMERIC = "fiu"
FLOAT = "f"
INEXACT = "fc"  # floating-point or complex
SIGNED_OR_FLOAT = "fic"
INTEGRAL = "iub"
INT = "iu"
ANY = "fiubc"


def _u(ir, kinds, doc):
    def f(x):
        return unary(ir, f"lax.{f.__name__}", x, kinds)
    f.__doc__ = doc
    return f


def _b(ir, kinds, doc):
    def f(x, y):
        return binary(ir, f"lax.{f.__name__}", x, y, kinds)
    f.__doc__ = doc
    return f


abs = _u("abs", SIGNED_OR_FLOAT, "|x|.")
neg = _u("negate", NUMERIC, "-x.")
sign = _u("sign", SIGNED_OR_FLOAT, "-1, 0 or 1 (NaN stays NaN; -0.0 stays -0.0).")
floor = _u("floor", FLOAT, "Round toward -inf.")
ceil = _u("ceil", FLOAT, "Round toward +inf.")
exp = _u("exponential", INEXACT, "e**x.")
expm1 = _u("exponential_minus_one", INEXACT, "e**x - 1, accurate near 0.")
log = _u("log", INEXACT, "Natural logarithm.")
log1p = _u("log_plus_one", INEXACT, "log(1 + x), accurate near 0.")
tanh = _u("tanh", INEXACT, "Hyperbolic tangent.")
logistic = _u("logistic", INEXACT, "1 / (1 + e**-x).")
sin = _u("sine", INEXACT, "Sine.")
cos = _u("cosine", INEXACT, "Cosine.")
tan = _u("tan", INEXACT, "Tangent.")
sqrt = _u("sqrt", INEXACT, "Square root.")
rsqrt = _u("rsqrt", INEXACT, "1 / sqrt(x).")
cbrt = _u("cbrt", INEXACT, "Cube root.")
not_ = _u("not", INTEGRAL, "Bitwise (or logical, for bool) not.")
population_count = _u("popcnt", INT, "Number of set bits.")
clz = _u("count_leading_zeros", INT, "Number of leading zero bits.")

add = _b("add", ANY, "x + y.")
sub = _b("subtract", NUMERIC, "x - y.")
mul = _b("multiply", ANY, "x * y.")
div = _b("divide", NUMERIC, "x / y; integer division rounds toward zero.")
rem = _b("remainder", REAL_NUMERIC, "Remainder with the sign of x (C fmod).")
pow = _b("power", NUMERIC, "x ** y.")
max = _b("maximum", ANY, "Elementwise maximum (NaN propagates).")
min = _b("minimum", ANY, "Elementwise minimum (NaN propagates).")
atan2 = _b("atan2", INEXACT, "Arc tangent of x / y, using the signs of both.")
and_ = _b("and", INTEGRAL, "Bitwise (or logical) and.")
or_ = _b("or", INTEGRAL, "Bitwise (or logical) or.")
xor = _b("xor", INTEGRAL, "Bitwise (or logical) xor.")
shift_left = _b("shift_left", INT, "x << y.")
shift_right_arithmetic = _b("shift_right_arithmetic", INT, "x >> y, filling with the sign bit.")
shift_right_logical = _b("shift_right_logical", INT, "x >> y, filling with zeros.")

_NAMES = {"abs": abs, "neg": neg, "sign": sign, "floor": floor, "ceil": ceil, "exp": exp,
          "expm1": expm1, "log": log, "log1p": log1p, "tanh": tanh, "logistic": logistic, "sin": sin,
          "cos": cos, "tan": tan, "sqrt": sqrt, "rsqrt": rsqrt, "cbrt": cbrt, "not_": not_,
          "population_count": population_count, "clz": clz, "add": add, "sub": sub, "mul": mul,
          "div": div, "rem": rem, "pow": pow, "max": max, "min": min, "atan2": atan2, "and_": and_,
          "or_": or_, "xor": xor, "shift_left": shift_left,
          "shift_right_arithmetic": shift_right_arithmetic, "shift_right_logical": shift_right_logical}
for _n, _f in list(_NAMES.items()):
    _f.__name__ = _f.__qualname__ = _n
    _NAMES[_n] = api_function(_f)
globals().update(_NAMES)
del _n, _f


def compare_type(dt) -> str:
    if dtypes.is_float(dt) or dtypes.is_complex(dt):
        return "FLOAT"
    if dtypes.is_signed(dt):
        return "SIGNED"
    return "UNSIGNED"


def compare(x, y, direction: str, what: str = "lax.compare") -> Tracer:
    (a, b), _ = operands(what, x, y)
    return emit1("compare", [a, b], {"comparison_direction": direction,
                                     "compare_type": compare_type(a.dtype)})


def _cmp(direction):
    def f(x, y):
        return compare(x, y, direction, f"lax.{f.__name__}")
    f.__doc__ = f"Elementwise comparison ({direction}); the result is bool."
    return f


eq, ne, lt, le, gt, ge = (_cmp(d) for d in ("EQ", "NE", "LT", "LE", "GT", "GE"))
for _n, _f in (("eq", eq), ("ne", ne), ("lt", lt), ("le", le), ("gt", gt), ("ge", ge)):
    _f.__name__ = _f.__qualname__ = _n
    globals()[_n] = api_function(_f)
del _n, _f


@api_function
def is_finite(x) -> Tracer:
    """True where x is neither infinite nor NaN."""
    (t,), _ = operands("lax.is_finite", x)
    require_kind("lax.is_finite", t, FLOAT)
    return emit1("is_finite", [t])


ROUND_AWAY_FROM_ZERO = 0
ROUND_TO_NEAREST_EVEN = 1


class RoundingMethod:
    AWAY_FROM_ZERO = ROUND_AWAY_FROM_ZERO
    TO_NEAREST_EVEN = ROUND_TO_NEAREST_EVEN


@api_function
def round(x, rounding_method=ROUND_AWAY_FROM_ZERO) -> Tracer:
    """Round to an integral value: halfway cases away from zero (default) or to even."""
    ir = {ROUND_AWAY_FROM_ZERO: "round_nearest_afz", ROUND_TO_NEAREST_EVEN: "round_nearest_even"}.get(int(rounding_method))
    if ir is None:
        raise ValueError(f"lax.round: unknown rounding_method {rounding_method!r}")
    return unary(ir, "lax.round", x, FLOAT)


@api_function
def square(x) -> Tracer:
    """x * x."""
    (t,), weak = operands("lax.square", x)
    require_kind("lax.square", t, NUMERIC)
    return emit1("multiply", [t, t], weak_type=weak)


@api_function
def reciprocal(x) -> Tracer:
    """1 / x."""
    (t,), weak = operands("lax.reciprocal", x)
    require_kind("lax.reciprocal", t, NUMERIC)
    one = as_tracer(np.ones((), t.dtype))
    return emit1("divide", [broadcast_in_dim(one, t.shape, []), t], weak_type=weak)


@api_function
def convert_element_type(x, new_dtype) -> Tracer:
    """Convert to ``new_dtype`` (float to int truncates toward zero; to bool is x != 0)."""
    dt = dtypes.canonicalize(new_dtype, "lax.convert_element_type: new_dtype")
    t = as_tracer(x, what="lax.convert_element_type")
    return convert(t, dt)


@api_function
def bitcast_convert_type(x, new_dtype) -> Tracer:
    """Reinterpret the bits as ``new_dtype`` (a narrower type adds a trailing dimension, a wider
    one consumes it)."""
    from .common import ir_type
    dt = dtypes.canonicalize(new_dtype, "lax.bitcast_convert_type: new_dtype")
    t = as_tracer(x, what="lax.bitcast_convert_type")
    src, dst = t.dtype.itemsize, dt.itemsize
    if (t.dtype == np.bool_) != (dt == np.bool_):  # as jax: a pred is one bit in the IR's op
        raise DTypeError(f"lax.bitcast_convert_type does not support bool values unless the operand "
                         f"and destination types match; got {t.aval.str_short()} to "
                         f"{dtypes.dtype_name(dt)}")
    if src == dst:
        shape = t.shape
    elif src > dst:
        shape = t.shape + (src // dst,)
    else:
        if not t.shape or t.shape[-1] != dst // src:
            raise ShapeError(f"lax.bitcast_convert_type: converting {t.aval.str_short()} to "
                             f"{dtypes.dtype_name(dt)} needs a last dimension of size {dst // src}")
        shape = t.shape[:-1]
    return emit1("bitcast_convert", [t], result_types=[ir_type(shape, dt)])


@api_function
def select(pred, on_true, on_false) -> Tracer:
    """``on_true`` where ``pred`` else ``on_false``; ``pred`` is bool, a scalar or of the
    operands' shape."""
    (a, b), weak = operands("lax.select", on_true, on_false)
    p = as_tracer(pred, what="lax.select: pred")
    if p.dtype != dtypes.bool_:
        raise DTypeError(f"lax.select: pred must be bool, got {p.aval.str_short()}")
    if p.shape not in ((), a.shape):
        raise ShapeError(f"lax.select: pred must be a scalar or have the operands' shape {a.shape}, "
                         f"got {p.shape}")
    return emit1("select", [p, a, b], weak_type=weak)


@api_function
def clamp(min, x, max) -> Tracer:
    """x limited to [min, max] (bounds are scalars or of x's shape)."""
    t = as_tracer(x, what="lax.clamp")
    lo = as_tracer(min, t.dtype if dtypes.is_python_scalar(min) else None, "lax.clamp: min")
    hi = as_tracer(max, t.dtype if dtypes.is_python_scalar(max) else None, "lax.clamp: max")
    for b, w in ((lo, "min"), (hi, "max")):
        if b.dtype != t.dtype:
            raise DTypeError(f"lax.clamp: {w} must have x's dtype {dtypes.dtype_name(t.dtype)}, "
                             f"got {dtypes.dtype_name(b.dtype)}")
        if b.shape not in ((), t.shape):
            raise ShapeError(f"lax.clamp: {w} must be a scalar or have x's shape {t.shape}, got {b.shape}")
    return emit1("clamp", [lo, t, hi], weak_type=t.weak_type)


@api_function
def complex(x, y) -> Tracer:
    """x + i y from real and imaginary parts (float32 -> complex64, float64 -> complex128)."""
    (a, b), weak = operands("lax.complex", x, y)
    if a.dtype not in (dtypes.float32, dtypes.float64):
        raise DTypeError(f"lax.complex: expected float32 or float64 parts, got {a.aval.str_short()}")
    return emit1("complex", [a, b], weak_type=weak)


@api_function
def real(x) -> Tracer:
    """The real part (a float array; of a float array, itself)."""
    (t,), weak = operands("lax.real", x)
    require_kind("lax.real", t, INEXACT)
    return emit1("real", [t], weak_type=weak)


@api_function
def imag(x) -> Tracer:
    """The imaginary part (a float array; of a float array, zeros)."""
    (t,), weak = operands("lax.imag", x)
    require_kind("lax.imag", t, INEXACT)
    return emit1("imag", [t], weak_type=weak)


@api_function
def conj(x) -> Tracer:
    """The complex conjugate (of a real array, itself)."""
    (t,), weak = operands("lax.conj", x)
    require_kind("lax.conj", t, INEXACT)
    if not dtypes.is_complex(t.dtype):
        return t
    return complex(real(t), neg(imag(t)))
