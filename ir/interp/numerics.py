"""Element-level semantics of the reference interpreter, vectorized over numpy arrays.

Every function takes and returns numpy arrays whose dtypes are those of hlo element types (bool,
int8..uint64, float16, ml_dtypes.bfloat16, float32, float64) and implements the StableHLO
specification's semantics for one family of ops. Where the spec leaves a case open (integer
division by zero, out-of-range float-to-integer conversion, shift amounts past the bit width) we
follow XLA, which is what StableHLO programs from JAX expect:

* integer ``x / 0`` is -1 (all bits set, also for unsigned types); ``INT_MIN / -1`` is INT_MIN;
  ``x % 0`` is ``x``; ``INT_MIN % -1`` is 0; integer add/sub/mul wrap around.
* shift amounts are read as unsigned; a shift by the bit width or more gives 0 (left and logical
  right) or the sign fill (arithmetic right).
* float -> integer truncates toward zero and saturates at the type's bounds; NaN becomes 0.
  integer -> integer wraps; any -> pred is ``x != 0`` (so NaN is true).
* integer ``power`` with a negative exponent is 0 unless the base is 1 or -1.

Floating-point rounding. Exactly rounded IEEE operations (+, -, *, /, sqrt, fmod, rounding to
integral, min/max, conversions) give the correctly rounded result of the element type: f32 and
f64 compute natively; f16 and bf16 compute in f32 and round once to the type, which is exact for
these operations because f32 carries more than twice their precision plus two bits (this is also
what XLA does for them). Transcendental functions (exp, log, tanh, pow, atan2, ...) have
implementation-defined accuracy in the spec; for f16, bf16 and f32 we compute them in float64
and round once, which is as close to correctly rounded as numpy gets; f64 uses numpy's float64
functions. ``to_float`` rounds float64 and integers to bf16 correctly (ml_dtypes would round
twice, through f32).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..types import SMALL_FLOATS
from . import complex_numerics as cx

F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
# f16, bf16 and the 8-bit and narrower floats: computed in f32, rounded once to the type
NARROW_FLOATS = (F16, BF16) + tuple(t.np_dtype for t in SMALL_FLOATS)
# 2- and 4-bit integers: computed in the 8-bit integer of the same signedness and wrapped back
SUB_BYTE = {np.dtype(ml_dtypes.int2): 2, np.dtype(ml_dtypes.int4): 4,
            np.dtype(ml_dtypes.uint2): 2, np.dtype(ml_dtypes.uint4): 4}
_CONTAINER = {d: np.dtype(np.int8 if ml_dtypes.iinfo(d).min < 0 else np.uint8) for d in SUB_BYTE}

_UINT_OF_WIDTH = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
                  8: np.dtype(np.uint64)}
_SINT_OF_WIDTH = {1: np.dtype(np.int8), 2: np.dtype(np.int16), 4: np.dtype(np.int32),
                  8: np.dtype(np.int64)}

# (exponent bits, explicit mantissa bits) of each float type
FLOAT_FORMAT = {F16: (5, 10), BF16: (8, 7), F32: (8, 23), F64: (11, 52)}
_FLOATS = set(FLOAT_FORMAT) | set(NARROW_FLOATS)


def is_float(dt: np.dtype) -> bool:
    return dt in _FLOATS


def is_int(dt: np.dtype) -> bool:
    return dt.kind in "iu" or dt in SUB_BYTE


def is_complex(dt: np.dtype) -> bool:
    return dt.kind == "c"


def int_info(dt: np.dtype):
    return ml_dtypes.iinfo(dt)


def widened(fn):
    """``fn`` on 2- and 4-bit integers: computed in the 8-bit container type, wrapped back
    (exact for the ops whose result does not depend on the width: add, multiply, divide...)."""
    def g(*xs):
        dt = xs[0].dtype
        if dt in SUB_BYTE:
            c = _CONTAINER[dt]
            return arr(fn(*(arr(x, dt).astype(c) for x in xs)), c).astype(dt)
        return fn(*xs)
    g.__name__ = fn.__name__
    g.__doc__ = fn.__doc__
    return g


def is_bool(dt: np.dtype) -> bool:
    return dt == np.bool_


def uint_view(x: np.ndarray) -> np.ndarray:
    """The bits of ``x`` as unsigned integers of the same width (bool counts as 8 bits)."""
    x = np.asarray(x)
    if x.dtype == np.bool_:
        return x.astype(np.uint8)
    if x.dtype in SUB_BYTE:  # the value's own bits, zero above the width
        return x.astype(_CONTAINER[x.dtype]).view(np.uint8) & np.uint8((1 << SUB_BYTE[x.dtype]) - 1)
    return x.view(_UINT_OF_WIDTH[x.dtype.itemsize])


def sint_view(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x.view(_SINT_OF_WIDTH[x.dtype.itemsize])


def arr(x, dtype) -> np.ndarray:
    """``x`` as an ndarray of exactly ``dtype`` (0-d for scalars)."""
    a = np.asarray(x)
    if a.dtype != dtype:
        a = a.astype(dtype)
    return a


# ----------------------------------------------------------------------------------------------
# Rounding helpers
# ----------------------------------------------------------------------------------------------

def exact(fn, dtype: np.dtype, *xs):
    """Apply an exactly rounded float operation: natively for f32/f64, in f32 for f16/bf16."""
    if dtype in NARROW_FLOATS:
        return arr(fn(*(x.astype(F32) for x in xs)), dtype)
    return arr(fn(*xs), dtype)


def upcast(fn, dtype: np.dtype, *xs):
    """Apply a transcendental function: in float64, rounded once to ``dtype``."""
    if is_complex(dtype):
        return cx.upcast(fn, *xs)
    if dtype == F64:
        return arr(fn(*xs), F64)
    return round_f64(arr(fn(*(x.astype(F64) for x in xs)), F64), dtype)


def round_f64(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round float64 values to a float type, correctly (round to nearest, ties to even)."""
    x = np.asarray(x, dtype=F64)
    if dtype == F64:
        return x
    if dtype in (F32, F16):
        return x.astype(dtype)  # numpy rounds f64 -> f32 and f64 -> f16 directly
    # f64 -> f32 rounding to odd, then f32 -> bf16 (or an 8-bit float) to nearest even: no
    # double-rounding error, since f32 carries more than 8 + 2 bits of precision.
    r = x.astype(F32)
    back = r.astype(F64)
    inexact = (back != x) & np.isfinite(x)
    if inexact.any():
        toward_zero = np.where(np.abs(back) > np.abs(x), np.nextafter(r, np.float32(0)), r)
        odd = (toward_zero.view(np.uint32) | np.uint32(1)).view(F32)
        r = np.where(inexact, odd, r)
    return r.astype(dtype)


# ----------------------------------------------------------------------------------------------
# Conversions
# ----------------------------------------------------------------------------------------------

def _int_to_f64_sticky(x: np.ndarray) -> np.ndarray:
    """Integers to float64, exactly where possible and otherwise rounded to odd, so that a
    second rounding to a narrower float type is still correct."""
    x = np.asarray(x)
    if x.dtype.itemsize < 8:
        return x.astype(F64)
    neg = x < 0 if x.dtype.kind == "i" else np.zeros(x.shape, bool)
    mag = np.where(neg, (~x.astype(np.uint64)) + np.uint64(1), x.astype(np.uint64)) \
        if x.dtype.kind == "i" else x.astype(np.uint64)
    big = mag >= np.uint64(1 << 53)
    if not big.any():
        return x.astype(F64)
    # bit length of each magnitude, then keep its top 53 bits plus a sticky bit
    bl = np.zeros(mag.shape, np.int64)
    m = mag.copy()
    for s in (32, 16, 8, 4, 2, 1):
        hi = m >= (np.uint64(1) << np.uint64(s))
        bl += np.where(hi, s, 0)
        m = np.where(hi, m >> np.uint64(s), m)
    bl += (m > 0).astype(np.int64)
    shift = np.maximum(bl - 53, 0).astype(np.uint64)
    low_mask = (np.uint64(1) << shift) - np.uint64(1)
    sticky = ((mag & low_mask) != 0).astype(np.uint64)
    top = (mag >> shift) | sticky
    val = np.ldexp(top.astype(F64), shift.astype(np.int64))
    return np.where(neg, -val, val)


def convert(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``convert``: element type conversion with the semantics in the module docstring."""
    x = np.asarray(x)
    src = x.dtype
    dtype = np.dtype(dtype)
    if src == dtype:
        return x
    if is_complex(dtype):  # the real part converts like a float; the imaginary part is zero
        if is_complex(src):
            return x.astype(dtype)
        part = F32 if dtype == cx.C64 else F64
        return convert(x, part).astype(dtype)
    if is_complex(src):  # the imaginary part is dropped
        return convert(np.array(x.real), dtype)
    if src in SUB_BYTE:
        return convert(x.astype(_CONTAINER[src]), dtype)
    if dtype in SUB_BYTE and not is_int(src):  # float/bool -> the container, saturating at the type's bounds
        info = int_info(dtype)
        c = convert(x, _CONTAINER[dtype])
        if is_float(src):
            w = x.astype(F64)
            c = np.where(w > info.max, info.max, np.where(w < info.min, info.min, c))
        return arr(c, _CONTAINER[dtype]).astype(dtype)
    if dtype == np.bool_:
        if is_float(src):
            return x.astype(F32) != 0 if src in NARROW_FLOATS else x != 0
        return x != 0
    if is_bool(src):
        return x.astype(np.uint8).astype(dtype) if dtype not in NARROW_FLOATS else x.astype(F32).astype(dtype)
    if is_float(dtype):
        if is_float(src):
            if src in NARROW_FLOATS:
                return x.astype(F32).astype(dtype)  # exact widening, then one rounding
            if dtype in NARROW_FLOATS and dtype != F16:
                return round_f64(x.astype(F64), dtype) if src == F64 else x.astype(dtype)
            return x.astype(dtype)
        # integer source
        if dtype in NARROW_FLOATS and dtype != F16:
            return round_f64(_int_to_f64_sticky(x), dtype)
        if dtype == F16:
            return _int_to_f64_sticky(x).astype(F16)
        return x.astype(dtype)  # numpy converts int64/uint64 -> f32/f64 with one rounding
    # integer destination
    if is_int(src):
        return x.astype(dtype)  # wraps (two's complement truncation / extension)
    # float -> integer: truncate, saturate, NaN -> 0
    t = np.trunc(x.astype(F64))
    info = np.iinfo(dtype)
    lo, hi = float(info.min), float(info.max) + 1.0  # both exact powers of two (or 0)
    nan = np.isnan(t)
    inrange = (t >= lo) & (t < hi)
    safe = np.where(inrange, t, 0.0)
    out = safe.astype(dtype)
    out = np.where(t >= hi, info.max, out)
    out = np.where(t < lo, info.min, out)
    out = np.where(nan, 0, out)
    return arr(out, dtype)


def bitcast_convert(x: np.ndarray, dtype: np.dtype, result_shape) -> np.ndarray:
    """``bitcast_convert``: reinterpret bits; width changes split or join the last dimension
    (little-endian: element 0 of the new dimension holds the lowest bits). A pred is one bit,
    as in StableHLO: ``pred[..., 64] <-> s64[...]`` packs or unpacks bits, lowest first."""
    x = np.ascontiguousarray(x)
    dtype = np.dtype(dtype)
    result_shape = tuple(result_shape)
    if x.dtype == np.bool_ and dtype == np.bool_:
        return x.reshape(result_shape).copy()
    if x.dtype == np.bool_:  # join bits: groups of 8 along the last dimension make bytes
        nbytes = x.shape[-1] // 8
        packed = np.packbits(x.reshape(x.shape[:-1] + (nbytes, 8)), axis=-1, bitorder="little")
        return np.ascontiguousarray(packed.reshape(x.shape[:-1] + (nbytes,))).view(dtype).reshape(result_shape)
    if dtype == np.bool_:  # split into bits, lowest first
        raw = x.reshape(x.shape + (1,)).view(np.uint8)
        return np.unpackbits(raw, axis=-1, bitorder="little").astype(np.bool_).reshape(result_shape)
    return x.view(dtype).reshape(result_shape)


def reduce_precision(x: np.ndarray, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """``reduce_precision``: round the mantissa to ``mantissa_bits`` (ties to even), then flush
    exponents outside ``exponent_bits`` to signed zero or infinity; NaNs stay NaN (become
    infinity when ``mantissa_bits`` is 0), as the StableHLO reference interpreter does."""
    x = np.asarray(x)
    dt = x.dtype
    if dt not in FLOAT_FORMAT:  # an 8-bit or narrower float: exactly in f32, rounded back
        return arr(reduce_precision(x.astype(F32), exponent_bits, mantissa_bits), dt)
    src_exp, src_man = FLOAT_FORMAT[dt]
    width = dt.itemsize * 8
    u = _UINT_OF_WIDTH[dt.itemsize]
    bits = x.view(u).copy()

    def c(v):
        return u.type(v & ((1 << width) - 1))

    if mantissa_bits < src_man:
        shift = src_man - mantissa_bits
        last_bit_mask = 1 << shift
        base_bias = (last_bit_mask >> 1) - 1
        x_last = (bits & c(last_bit_mask)) >> c(shift)
        bits = (bits + x_last + c(base_bias)) & c(~(last_bit_mask - 1))
    if exponent_bits < src_exp:
        sign_mask = 1 << (width - 1)
        exp_mask = ((1 << src_exp) - 1) << src_man
        bias = (1 << (src_exp - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        max_exp = bias + reduced_bias
        min_exp = bias - reduced_bias
        x_exp = bits & c(exp_mask)
        overflow = x_exp > c(max_exp << src_man)
        underflow = x_exp <= c(min_exp << src_man)
        signed_zero = bits & c(sign_mask)
        signed_inf = signed_zero | c(exp_mask)
        bits = np.where(overflow, signed_inf, bits)
        bits = np.where(underflow, signed_zero, bits)
    out = arr(bits, u).view(dt)
    nan = np.isnan(x.astype(F32) if dt in NARROW_FLOATS else x)
    if nan.any():
        out = np.where(nan, x if mantissa_bits > 0 else np.array(np.inf, dt), out)
    return arr(out, dt)


# ----------------------------------------------------------------------------------------------
# Arithmetic
# ----------------------------------------------------------------------------------------------

@widened
def add(a, b):
    if is_complex(a.dtype):
        return arr(a + b, a.dtype)
    if is_float(a.dtype):
        return exact(np.add, a.dtype, a, b)
    if is_bool(a.dtype):
        return a | b
    return arr(np.add(a, b), a.dtype)


@widened
def subtract(a, b):
    if is_complex(a.dtype):
        return arr(a - b, a.dtype)
    if is_float(a.dtype):
        return exact(np.subtract, a.dtype, a, b)
    return arr(np.subtract(a, b), a.dtype)


@widened
def multiply(a, b):
    if is_complex(a.dtype):
        return arr(a * b, a.dtype)
    if is_float(a.dtype):
        return exact(np.multiply, a.dtype, a, b)
    if is_bool(a.dtype):
        return a & b
    return arr(np.multiply(a, b), a.dtype)


def _int_div_parts(a, b):
    """Safe divisor and masks for integer division/remainder."""
    dt = a.dtype
    zero = b == 0
    safe = np.where(zero, np.ones((), dt), b)
    if dt.kind == "i":
        info = np.iinfo(dt)
        overflow = (a == info.min) & (b == -1)
        safe = np.where(overflow, np.ones((), dt), safe)
    else:
        overflow = None
    return arr(safe, dt), zero, overflow


@widened
def divide(a, b):
    dt = a.dtype
    if is_complex(dt):
        with np.errstate(all="ignore"):
            return arr(a / b, dt)
    if is_float(dt):
        return exact(np.divide, dt, a, b)
    safe, zero, _ = _int_div_parts(a, b)
    if dt.kind == "u":
        q = a // safe
    else:
        q = np.floor_divide(a, safe)
        # numpy floors; the spec truncates toward zero
        fix = (np.remainder(a, safe) != 0) & ((a < 0) != (safe < 0))
        q = q + fix.astype(dt)
    q = np.where(zero, np.array(-1).astype(dt) if dt.kind == "i" else np.array(np.iinfo(dt).max, dt), q)
    return arr(q, dt)


@widened
def remainder(a, b):
    dt = a.dtype
    if is_float(dt):
        return exact(np.fmod, dt, a, b)
    safe, zero, overflow = _int_div_parts(a, b)
    if dt.kind == "i":
        safe = np.where(safe == -1, np.ones((), dt), safe)  # x % -1 == 0, avoids INT_MIN % -1
    r = np.fmod(a, arr(safe, dt))  # C semantics: sign of the dividend
    r = np.where(zero, a, r)
    return arr(r, dt)


@widened
def power(a, b):
    dt = a.dtype
    if is_complex(dt):
        return cx.upcast(cx.power, a, b)
    if is_float(dt):
        return upcast(np.power, dt, a, b)
    # integer exponentiation by squaring, wrapping; exponent read as unsigned after the
    # negative cases are handled (like the StableHLO reference interpreter).
    u = _UINT_OF_WIDTH[dt.itemsize]
    if dt.kind == "i":
        neg = b < 0
        unit = (a == 1) | (a == -1)
        e = np.where(neg & unit, np.abs(b), b)  # |INT_MIN| wraps to INT_MIN: even, like APInt
        zero_out = neg & ~unit
    else:
        e = b
        zero_out = None
    base, e = np.broadcast_arrays(a, arr(e, dt).view(u))
    base, e = base.copy(), e.copy()
    result = np.ones(base.shape, dt)
    one = u.type(1)
    for _ in range(dt.itemsize * 8):
        if not e.any():
            break
        odd = (e & one) != 0
        result = np.where(odd, arr(result * base, dt), result)
        base = arr(base * base, dt)
        e = e >> one
    if zero_out is not None:
        result = np.where(zero_out, np.zeros((), dt), result)
    return arr(result, dt)


@widened
def maximum(a, b):
    dt = a.dtype
    if is_complex(dt):
        return arr(cx.maximum(a, b), dt)
    if not is_float(dt):
        return arr(np.maximum(a, b), dt)
    if dt in NARROW_FLOATS:
        return maximum(a.astype(F32), b.astype(F32)).astype(dt)
    r = np.maximum(a, b)  # propagates NaN
    both_zero = (a == 0) & (b == 0)
    if both_zero.any():
        r = np.where(both_zero, np.where(np.signbit(a), b, a), r)  # max(-0, +0) = +0
    return arr(r, dt)


@widened
def minimum(a, b):
    dt = a.dtype
    if is_complex(dt):
        return arr(cx.minimum(a, b), dt)
    if not is_float(dt):
        return arr(np.minimum(a, b), dt)
    if dt in NARROW_FLOATS:
        return minimum(a.astype(F32), b.astype(F32)).astype(dt)
    r = np.minimum(a, b)
    both_zero = (a == 0) & (b == 0)
    if both_zero.any():
        r = np.where(both_zero, np.where(np.signbit(a), a, b), r)  # min(-0, +0) = -0
    return arr(r, dt)


def atan2(a, b):
    if is_complex(a.dtype):
        return cx.upcast(cx.atan2, a, b)
    return upcast(np.arctan2, a.dtype, a, b)


@widened
def bit_and(a, b):
    return arr(np.bitwise_and(a, b), a.dtype)


@widened
def bit_or(a, b):
    return arr(np.bitwise_or(a, b), a.dtype)


@widened
def bit_xor(a, b):
    return arr(np.bitwise_xor(a, b), a.dtype)


def _shift_parts(a, b):
    dt = a.dtype
    width = dt.itemsize * 8
    u = _UINT_OF_WIDTH[dt.itemsize]
    amount = arr(b, dt).view(u)
    ok = amount < u.type(width)
    amt = np.where(ok, amount, u.type(0)).astype(u)
    return dt, u, ok, amt


@widened
def shift_left(a, b):
    dt, u, ok, amt = _shift_parts(a, b)
    r = arr(a, dt).view(u) << amt
    return arr(np.where(ok, r, u.type(0)), u).view(dt)


def shift_right_logical(a, b):
    if a.dtype in SUB_BYTE:  # the value's own bits, shifted in its width
        w = SUB_BYTE[a.dtype]
        amount = uint_view(arr(b, a.dtype))
        r = np.where(amount < w, uint_view(a) >> np.minimum(amount, 7), 0)
        return arr(r, np.uint8).astype(_CONTAINER[a.dtype]).astype(a.dtype)
    dt, u, ok, amt = _shift_parts(a, b)
    r = arr(a, dt).view(u) >> amt
    return arr(np.where(ok, r, u.type(0)), u).view(dt)


def shift_right_arithmetic(a, b):
    if a.dtype in SUB_BYTE:  # the width's top bit is the sign, also of unsigned types
        w = SUB_BYTE[a.dtype]
        bits = uint_view(a).astype(np.int16)
        signed = np.where(bits >= (1 << (w - 1)), bits - (1 << w), bits)
        amount = uint_view(arr(b, a.dtype)).astype(np.int16)
        r = signed >> np.minimum(amount, w - 1)
        if int_info(a.dtype).min < 0:
            return r.astype(np.int8).astype(a.dtype)
        return (r & ((1 << w) - 1)).astype(np.uint8).astype(a.dtype)
    dt, u, ok, amt = _shift_parts(a, b)
    s = _SINT_OF_WIDTH[dt.itemsize]
    sa = arr(a, dt).view(s)
    r = sa >> amt.astype(s)
    fill = np.where(sa < 0, s.type(-1), s.type(0))
    return arr(np.where(ok, r, fill), s).view(dt)


# ----------------------------------------------------------------------------------------------
# Unary
# ----------------------------------------------------------------------------------------------

@widened
def negate(x):
    if is_float(x.dtype) or is_complex(x.dtype):
        return arr(-x, x.dtype)  # flips the sign bit, also of NaN and zero
    return arr(np.negative(x), x.dtype)


@widened
def abs_(x):
    if is_complex(x.dtype):
        return np.abs(x)  # the modulus, in the part type
    return arr(np.abs(x), x.dtype)


@widened
def sign(x):
    dt = x.dtype
    if is_complex(dt):
        return cx.upcast(cx.sign, x)
    if is_float(dt):
        w = x.astype(F32) if dt in NARROW_FLOATS else x
        r = np.where(w == 0, w, np.sign(w))  # keeps -0.0 and NaN as they are
        return arr(r, dt) if dt not in NARROW_FLOATS else r.astype(dt)
    return arr(np.sign(x), dt)


@widened
def not_(x):
    if is_bool(x.dtype):
        return ~x
    return arr(np.invert(x), x.dtype)


def popcnt(x):
    if x.dtype in SUB_BYTE:
        return arr(np.bitwise_count(uint_view(x)), _CONTAINER[x.dtype]).astype(x.dtype)
    return arr(np.bitwise_count(uint_view(x)), x.dtype)


def count_leading_zeros(x):
    u = uint_view(x)
    width = u.dtype.itemsize * 8
    m = u.copy()
    s = 1
    while s < width:
        m = m | (m >> u.dtype.type(s))
        s *= 2
    if x.dtype in SUB_BYTE:
        width = SUB_BYTE[x.dtype]
        return arr(width - np.bitwise_count(m).astype(np.int64), _CONTAINER[x.dtype]).astype(x.dtype)
    return arr(width - np.bitwise_count(m).astype(np.int64), x.dtype)


def round_nearest_even(x):
    return exact(np.rint, x.dtype, x)


def _round_afz(w):
    t = np.trunc(w)
    frac = np.abs(w - t)  # exact
    return np.where(frac >= 0.5, t + np.copysign(np.ones_like(w), w), t)


def round_nearest_afz(x):
    return exact(_round_afz, x.dtype, x)


def logistic(x):
    if is_complex(x.dtype):
        return cx.upcast(cx.logistic, x)

    def f(w):
        return 1.0 / (1.0 + np.exp(-w))
    return upcast(f, x.dtype, x)


def rsqrt(x):
    if is_complex(x.dtype):
        return cx.upcast(cx.rsqrt, x)
    return upcast(lambda w: 1.0 / np.sqrt(w), x.dtype, x)


def is_finite(x):
    return np.isfinite(x.astype(F32) if x.dtype in NARROW_FLOATS else x)


# ----------------------------------------------------------------------------------------------
# Comparison
# ----------------------------------------------------------------------------------------------

def total_order_key(x: np.ndarray) -> np.ndarray:
    """Signed integers that order floats like IEEE-754 totalOrder:
    -NaN < -inf < ... < -0 < +0 < ... < inf < +NaN."""
    s = sint_view(x)
    flip = s.dtype.type(np.iinfo(s.dtype).max)
    return np.where(s < 0, s ^ flip, s)


_CMP = {"EQ": np.equal, "NE": np.not_equal, "GE": np.greater_equal, "GT": np.greater,
        "LE": np.less_equal, "LT": np.less}


def compare(a, b, direction: str, compare_type=None):
    dt = a.dtype
    fn = _CMP[direction]
    if is_complex(dt):
        return np.asarray(cx.compare(a, b, direction))
    if dt in SUB_BYTE:
        a, b = a.astype(_CONTAINER[dt]), b.astype(_CONTAINER[dt])
    if is_float(dt):
        if compare_type == "TOTALORDER":
            return np.asarray(fn(total_order_key(a), total_order_key(b)))
        if dt in NARROW_FLOATS:
            a, b = a.astype(F32), b.astype(F32)
        return np.asarray(fn(a, b))
    if is_bool(dt):
        return np.asarray(fn(a.astype(np.uint8), b.astype(np.uint8)))
    return np.asarray(fn(a, b))


def order_key(x: np.ndarray, compare_type=None) -> np.ndarray:
    """Unsigned 64-bit keys whose unsigned order is the order ``compare(LT, compare_type)``
    uses on ``x``, for sorting. FLOAT order maps -0 onto +0 and puts NaNs last."""
    dt = x.dtype
    if is_bool(dt):
        return x.astype(np.uint64)
    if dt.kind == "u":
        return x.astype(np.uint64)
    if dt.kind == "i":
        return (x.astype(np.int64).view(np.uint64)) ^ np.uint64(1 << 63)
    w = x.astype(F64)  # exact
    if compare_type != "TOTALORDER":
        w = np.where(w == 0, 0.0, w)
        nan = np.isnan(w)  # unordered under FLOAT; they go last, after +inf, deterministically
        w = np.where(nan, np.inf, w)
    else:
        nan = None
    k = total_order_key(arr(w, F64)).astype(np.int64).view(np.uint64) ^ np.uint64(1 << 63)
    if nan is not None and nan.any():
        k = np.where(nan, np.uint64((1 << 64) - 1), k)
    return k
