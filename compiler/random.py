"""hlo.random: jax.random's functions, producing the same bits as jax for the same key.

Keys are raw ``uint32[2]`` arrays, like ``jax.random.PRNGKey`` (jax's default threefry2x32
implementation, with its default ``jax_threefry_partitionable=True``; see ``hlo.lax.threefry``).
A key made by jax (``jax.random.PRNGKey(0)`` or ``jax.random.key_data(jax.random.key(0))``)
works here and vice versa. Typed jax key arrays (``jax.random.key``) are not accepted directly:
pass ``jax.random.key_data(k)``.

Functions: ``key`` (= ``PRNGKey``), ``key_data``, ``split``, ``fold_in``, ``bits``,
``uniform``, ``normal``, ``bernoulli``, ``randint``. Each follows jax.random's algorithm step
by step, so keys, bits, ``randint`` and ``bernoulli`` are bit-identical, and so is ``uniform``
on [0, 1). With other bounds, ``uniform`` computes ``u * (maxval - minval) + minval`` with two
roundings where XLA's CPU and GPU backends contract it into one FMA: the results may differ
in the last bit. ``normal`` goes through ``erf_inv`` (XLA's polynomial, ``hlo.lax.erf_inv``) and
matches to within the rounding of ``log1p``/``sqrt`` and that contraction (a few ulp; more
far in the tails, where erf_inv is ill-conditioned).

Seeds. A Python int seed gives jax's key in its default (32-bit) mode: ``[0, seed mod 2**32]``
for any int64 value. An array seed of 8 to 32 bits gives ``[0, seed as uint32]`` (narrower
signed values sign-extend); a 64-bit array seed keeps its high word, ``[seed >> 32, seed mod
2**32]``, as jax does with x64 enabled (hlo keeps 64-bit arrays 64-bit).

Defaults are jax's default-mode ones: float32 for ``uniform``/``normal``, int32 for
``randint``, uint32 for ``bits``. 64-bit dtypes draw 64 random bits, as jax with x64.

Like every hlo array function, these trace inside ``hlo.jit`` and compile on their own when
called outside (on numpy arrays).
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from .errors import DTypeError, ScalarOverflowError, ShapeError
from .lax import threefry
from .lax.common import (
    as_tracer,
    aval_of,
    broadcast_shapes,
    broadcast_to_shape,
    convert,
    full,
    reshape,
    scalar_const,
    static_shape,
)
from .lax.elementwise import (
    add,
    and_,
    bitcast_convert_type,
    clamp,
    gt,
    le,
    lt,
    mul,
    or_,
    rem,
    select,
    shift_right_logical,
    sub,
)
from .lax.elementwise import max as _max
from .lax.erf_inv import erf_inv
from .lax.structural import slice as _slice
from .tracing.api_util import api_function
from .tracing.tracer import Tracer, lift

__all__ = ["key", "PRNGKey", "key_data", "split", "fold_in", "bits", "uniform", "normal",
           "bernoulli", "randint"]


def _key(what: str, k) -> Tracer:
    t = as_tracer(k, what=f"{what}: key")
    threefry.key_words(what, t)  # checks dtype and shape
    return t


def _dtype(what: str, dtype, default, kinds: str, words: str) -> np.dtype:
    dt = dtypes.canonicalize(default if dtype is None else dtype, f"{what}: dtype")
    kind = "f" if dtypes.is_float(dt) else ("b" if dtypes.is_bool(dt) else dt.kind)
    if kind not in kinds:
        raise DTypeError(f"{what}: dtype must be {words}, got {dtypes.dtype_name(dt)}")
    return dt


def _check_broadcast(what: str, shape, *shapes) -> None:
    """Parameter shapes must broadcast to exactly ``shape`` (jax's ``_check_shape``)."""
    try:
        ok = broadcast_shapes(what, shape, *shapes) == tuple(shape)
    except ShapeError:
        ok = False
    if not ok:
        raise ShapeError(f"{what}: parameter shapes {', '.join(str(tuple(s)) for s in shapes)} must "
                         f"broadcast to the requested shape {tuple(shape)}")


# --------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------

@api_function
def key(seed) -> Tracer:
    """A ``uint32[2]`` PRNG key from an integer scalar seed (see the module docstring)."""
    what = "hlo.random.key"
    if isinstance(seed, (bool, np.bool_)):
        raise DTypeError(f"{what}: the seed must be an integer, got {seed!r}")
    if isinstance(seed, int):
        if not -2 ** 63 <= seed < 2 ** 63:
            raise ScalarOverflowError(f"{what}: seed {seed} does not fit in 64 bits")
        return lift(np.array([0, seed % 2 ** 32], dtype=np.uint32))
    a = aval_of(seed, f"{what}: seed")
    if a.shape != ():
        raise ShapeError(f"{what}: the seed must be a scalar, got {a.str_short()}")
    if not dtypes.is_int(a.dtype):
        raise DTypeError(f"{what}: the seed must be an integer, got {a.str_short()}")
    return threefry.seed(lift(seed))


PRNGKey = key


@api_function
def key_data(keys) -> Tracer:
    """The ``uint32[2]`` data of a key: keys here are raw data already, so this checks and
    returns it (for code written against ``jax.random.key_data``)."""
    return _key("hlo.random.key_data", keys)


def _num_shape(what: str, num) -> tuple:
    if isinstance(num, (tuple, list)):
        return static_shape(what, num)
    return static_shape(what, (num,))


@api_function
def split(key, num=2) -> Tracer:
    """``num`` new keys, ``uint32[num, 2]`` (``num`` may be a shape: ``uint32[*num, 2]``)."""
    what = "hlo.random.split"
    return threefry.split(what, _key(what, key), _num_shape(what, num))


@api_function
def fold_in(key, data) -> Tracer:
    """A new key that depends on ``key`` and the integer scalar ``data`` (taken as uint32)."""
    what = "hlo.random.fold_in"
    k = _key(what, key)
    if isinstance(data, (bool, np.bool_)):
        raise DTypeError(f"{what}: data must be an integer, got {data!r}")
    if isinstance(data, int):
        d = lift(data, dtypes.uint32)
    else:
        a = aval_of(data, f"{what}: data")
        if a.shape != ():
            raise ShapeError(f"{what}: data must be a scalar, got {a.str_short()}")
        if not dtypes.is_int(a.dtype):
            raise DTypeError(f"{what}: data must be an integer, got {a.str_short()}")
        d = convert(lift(data), dtypes.uint32)
    return threefry.fold_in(what, k, d)


# --------------------------------------------------------------------------------------------
# Samplers
# --------------------------------------------------------------------------------------------

@api_function
def bits(key, shape=(), dtype=None) -> Tracer:
    """Uniformly random unsigned integers of ``dtype`` (default uint32)."""
    what = "hlo.random.bits"
    dt = _dtype(what, dtype, dtypes.uint32, "u", "an unsigned integer type")
    return threefry.random_bits(what, _key(what, key), dt.itemsize * 8, static_shape(what, shape))


def _uniform(what: str, k: Tracer, minval, maxval, shape, dt) -> Tracer:
    lo = as_tracer(minval, dt, f"{what}: minval")
    hi = as_tracer(maxval, dt, f"{what}: maxval")
    _check_broadcast(what, shape, lo.shape, hi.shape)
    info = dtypes.finfo(dt)
    nbits, nmant = info.bits, info.nmant
    rng_bits = nbits if nmant >= 8 else 8
    uint = threefry.UINT_OF_BITS[nbits]
    b = threefry.random_bits(what, k, rng_bits, shape)
    b = convert(b, uint)
    # keep nmant random bits as the mantissa of a float in [1, 2), then shift to [0, 1)
    one_bits = np.array(1.0, dt).view(uint)
    fbits = or_(shift_right_logical(b, rng_bits - nmant), scalar_const(one_bits, uint))
    floats = sub(bitcast_convert_type(fbits, dt), scalar_const(1.0, dt))
    span = broadcast_to_shape(sub(hi, lo), shape, what)
    lo = broadcast_to_shape(lo, shape, what)
    return _max(lo, add(mul(floats, span), lo))


@api_function
def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0) -> Tracer:
    """Uniform floats in ``[minval, maxval)`` of ``shape`` and ``dtype`` (default float32)."""
    what = "hlo.random.uniform"
    dt = _dtype(what, dtype, dtypes.float32, "f", "a floating-point type")
    return _uniform(what, _key(what, key), minval, maxval, static_shape(what, shape), dt)


@api_function
def normal(key, shape=(), dtype=None) -> Tracer:
    """Standard normal floats: ``sqrt(2) * erf_inv(u)`` for ``u`` uniform in (-1, 1)."""
    what = "hlo.random.normal"
    dt = _dtype(what, dtype, dtypes.float32, "f", "a floating-point type")
    lo = np.nextafter(np.array(-1.0, dt), np.array(0.0, dt))
    u = _uniform(what, _key(what, key), lo, 1.0, static_shape(what, shape), dt)
    return mul(scalar_const(np.sqrt(2), dt), erf_inv(u))


@api_function
def bernoulli(key, p=0.5, shape=None, mode: str = "low") -> Tracer:
    """Booleans that are True with probability ``p`` (a float scalar or array; the result has
    ``shape``, default ``p``'s shape). ``mode="high"`` uses twice the random bits for correct
    sampling of tiny ``p``."""
    what = "hlo.random.bernoulli"
    if mode not in ("low", "high"):
        raise ValueError(f"{what}: mode must be 'low' or 'high', got {mode!r}")
    k = _key(what, key)
    a = aval_of(p, f"{what}: p")
    if not dtypes.is_float(a.dtype):
        raise DTypeError(f"{what}: p must be a floating-point value, got {a.str_short()}")
    pt = as_tracer(p, what=f"{what}: p")
    shape = pt.shape if shape is None else static_shape(what, shape)
    _check_broadcast(what, shape, pt.shape)
    pb = broadcast_to_shape(pt, shape, what)
    if mode == "low":
        return lt(_uniform(what, k, 0.0, 1.0, shape, pt.dtype), pb)
    u = _uniform(what, k, 0.0, 1.0, (2,) + tuple(shape), pt.dtype)
    n = len(shape)
    u1 = reshape(_slice(u, [0] * (n + 1), (1,) + tuple(shape)), shape)
    u2 = reshape(_slice(u, [1] + [0] * n, (2,) + tuple(shape)), shape)
    u2 = mul(u2, 2.0 ** -dtypes.finfo(pt.dtype).nmant)  # the resolution of uniform samples
    return lt(u2, sub(pb, u1))


def _int_bound(what: str, v) -> Tracer:
    """A randint bound as an integer Tracer: Python ints are int32 when they fit (jax's
    default) and int64 otherwise; float bounds are truncated to int (as jax's ``astype(int)``)."""
    if isinstance(v, int) and not isinstance(v, bool):
        if -2 ** 31 <= v < 2 ** 31:
            return lift(np.int32(v))
        if -2 ** 63 <= v < 2 ** 63:
            return lift(np.int64(v))
        raise ScalarOverflowError(f"{what}: bound {v} does not fit in 64 bits")
    t = as_tracer(v, what=what)
    if dtypes.is_bool(t.dtype):
        raise DTypeError(f"{what}: expected an integer bound, got {t.aval.strip_weak()}")
    if dtypes.is_float(t.dtype):
        return convert(t, dtypes.int64 if t.dtype.itemsize == 8 else dtypes.int32)
    return t


def _convert_and_clip(x: Tracer, dt) -> Tracer:
    """``x`` converted to the integer type ``dt``, saturating instead of wrapping."""
    xi, di = np.iinfo(x.dtype), np.iinfo(dt)
    lo, hi = max(di.min, xi.min), min(di.max, xi.max)
    return convert(clamp(scalar_const(lo, x.dtype), x, scalar_const(hi, x.dtype)), dt)


def _randint(what: str, k: Tracer, lo: Tracer, hi: Tracer, shape, dt) -> Tracer:
    """jax's ``_randint``: ``2 * nbits`` random bits reduced modulo the span."""
    _check_broadcast(what, shape, lo.shape, hi.shape)
    info = np.iinfo(dt)
    hi_limit = scalar_const(min(info.max, np.iinfo(hi.dtype).max), hi.dtype)
    out_of_range = broadcast_to_shape(gt(hi, hi_limit), shape, what)
    lo = broadcast_to_shape(_convert_and_clip(lo, dt), shape, what)
    hi = broadcast_to_shape(_convert_and_clip(hi, dt), shape, what)
    nbits = info.bits
    # jax: k1, k2 = split(key); higher, lower = random_bits(k1, ...), random_bits(k2, ...)
    both = threefry.random_bits_per_key(threefry.split(what, k, (2,)), nbits, shape)
    n = len(shape)
    higher = reshape(_slice(both, [0] * (n + 1), (1,) + tuple(shape)), shape)
    lower = reshape(_slice(both, [1] + [0] * n, (2,) + tuple(shape)), shape)
    uint = threefry.UINT_OF_BITS[nbits]
    span = convert(sub(hi, lo), uint)
    span = select(le(hi, lo), full(shape, 1, uint), span)  # an empty range returns minval
    # maxval past the dtype's range: one more value (may wrap to 0: then rem does nothing)
    span = select(and_(out_of_range, gt(hi, lo)), add(span, 1), span)
    multiplier = rem(full(shape, 2 ** (nbits // 2), uint), span)
    multiplier = rem(mul(multiplier, multiplier), span)
    offset = add(mul(rem(higher, span), multiplier), rem(lower, span))
    offset = rem(offset, span)
    return add(lo, convert(offset, dt))


@api_function
def randint(key, shape, minval, maxval, dtype=None) -> Tracer:
    """Integers in ``[minval, maxval)`` of ``dtype`` (default int32); ``minval``/``maxval``
    are scalars or arrays broadcasting to ``shape``. As in jax, an empty range gives
    ``minval``, and types narrower than 32 bits are sampled as int32 and converted."""
    what = "hlo.random.randint"
    k = _key(what, key)
    dt = _dtype(what, dtype, dtypes.int32, "iu", "an integer type")
    shape = static_shape(what, shape)
    lo = _int_bound(f"{what}: minval", minval)
    hi = _int_bound(f"{what}: maxval", maxval)
    info = np.iinfo(dt)
    if info.bits < 32:
        i32 = dtypes.int32
        lo = clamp(scalar_const(info.min, i32), convert(lo, i32), scalar_const(info.max, i32))
        hi = clamp(scalar_const(info.min, i32), convert(hi, i32), scalar_const(info.max + 1, i32))
        return convert(_randint(what, k, lo, hi, shape, i32), dt)
    return _randint(what, k, lo, hi, shape, dt)


# The other samplers (exponential, categorical, permutation, choice, the gamma family, ...):
# compiler/random_dists.py, built on the ones above.
from .random_dists import *  # noqa: F403
from .random_dists import __all__ as _more

__all__ = __all__ + _more


def _install_missing_names():  # hnp.foo: "did you mean ...?", and whether jax has it
    from hlo.base import missing
    missing.install(__name__)


_install_missing_names()
