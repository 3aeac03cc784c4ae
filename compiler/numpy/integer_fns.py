"""Integer functions of hlo.numpy: gcd and lcm (Euclid's algorithm, all elements at once in one
``while_loop``), bitwise_count, and packbits/unpackbits."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..lax.common import aval_of
from ..lax.control_flow import while_loop
from ..lax.elementwise import population_count
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from . import reductions as red
from . import shapes as sh
from . import ufuncs as uf
from .promotion import promote


def _ints(what, *xs):
    out, dt, _ = promote(what, *xs)
    if not (dtypes.is_int(dt) or dtypes.is_bool(dt)):
        raise TypeError(f"{what}: arguments must be integers, got {dt}")
    return out, dt


@api_function
def gcd(x1, x2) -> Tracer:
    """Greatest common divisor of ``|x1|`` and ``|x2|`` (0 for gcd(0, 0))."""
    (a, b), dt = _ints("gcd", x1, x2)
    a, b = uf.abs(a), uf.abs(b)

    def cond(s):
        return red.any(s[1] != 0)

    def body(s):
        a, b = s
        nz = b != 0
        safe = uf.where(nz, b, np.array(1, dt))
        return uf.where(nz, b, a), uf.where(nz, uf.remainder(a, safe), np.array(0, dt))
    return while_loop(cond, body, (a, b))[0]


@api_function
def lcm(x1, x2) -> Tracer:
    """Least common multiple of ``|x1|`` and ``|x2|`` (0 if either is 0)."""
    (a, b), dt = _ints("lcm", x1, x2)
    g = gcd(a, b)
    safe = uf.where(g == 0, np.array(1, dt), g)
    return uf.where(g == 0, np.array(0, dt), uf.abs(uf.floor_divide(a, safe) * b))


@api_function
def bitwise_count(x) -> Tracer:
    """The number of 1 bits in ``|x|`` (uint8)."""
    t = promote("bitwise_count", x)[0][0]
    if not (dtypes.is_int(t.dtype) or dtypes.is_bool(t.dtype)):
        raise TypeError(f"bitwise_count: the argument must be an integer, got {t.dtype}")
    if dtypes.is_bool(t.dtype):
        return t.astype(np.uint8)
    return population_count(uf.abs(t) if t.dtype.kind == "i" else t).astype(np.uint8)


@api_function
def packbits(a, axis=None, bitorder: str = "big") -> Tracer:
    """Booleans (or integers, nonzero = 1) packed 8 to a uint8 along ``axis`` (the flattened
    array when None), zero-padded to a multiple of 8."""
    if bitorder not in ("big", "little"):
        raise ValueError(f"packbits: bitorder must be 'big' or 'little', got {bitorder!r}")
    dt = aval_of(a, "packbits").dtype
    if not (dtypes.is_int(dt) or dtypes.is_bool(dt)):
        raise TypeError(f"packbits: expected an integer or boolean array, got {dt}")
    t = sh.ravel(a) if axis is None else promote("packbits", a)[0][0]
    ax = 0 if axis is None else axis % t.ndim
    bits = (t != 0).astype(np.uint8)
    n = t.shape[ax]
    pad = (-n) % 8
    if pad:
        widths = [(0, 0)] * t.ndim
        widths[ax] = (0, pad)
        bits = sh.pad(bits, widths)
    shape = list(bits.shape)
    shape[ax:ax + 1] = [(n + pad) // 8, 8]
    bits = sh.reshape(bits, shape)
    w = np.array([1 << (7 - i) if bitorder == "big" else 1 << i for i in range(8)], np.uint8)
    w = w.reshape([8 if d == ax + 1 else 1 for d in range(len(shape))])
    return red.sum(bits * w, axis=ax + 1, dtype=np.uint8)


@api_function
def unpackbits(a, axis=None, count=None, bitorder: str = "big") -> Tracer:
    """The bits of a uint8 array as 0/1 uint8 values along ``axis`` (flattened when None);
    ``count`` keeps that many (negative: drops from the end)."""
    if bitorder not in ("big", "little"):
        raise ValueError(f"unpackbits: bitorder must be 'big' or 'little', got {bitorder!r}")
    t = promote("unpackbits", a)[0][0]
    if t.dtype != np.uint8:
        raise TypeError(f"unpackbits: expected a uint8 array, got {t.dtype}")
    if axis is None:
        t, ax = sh.ravel(t), 0
    else:
        ax = axis % t.ndim
    shifts = np.array([7 - i if bitorder == "big" else i for i in range(8)], np.uint8)
    xe = sh.expand_dims(t, ax + 1)
    shifts = shifts.reshape([8 if d == ax + 1 else 1 for d in range(t.ndim + 1)])
    bits = (xe >> shifts) & np.uint8(1)
    shape = list(t.shape)
    shape[ax] *= 8
    out = sh.reshape(bits, shape)
    if count is not None:
        n = shape[ax]
        keep = count if count >= 0 else max(n + count, 0)
        if keep <= n:
            out = sh.take(out, np.arange(keep), axis=ax)
        else:
            widths = [(0, 0)] * out.ndim
            widths[ax] = (0, keep - n)
            out = sh.pad(out, widths)
    return out
