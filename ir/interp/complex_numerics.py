"""Complex element functions of the reference interpreter (complex64 and complex128).

complex64 values are computed in complex128 and rounded once per part (the analogue of the
float rules in ``numerics``); complex128 uses numpy's functions directly. Where numpy has no
complex function (expm1, log1p, cbrt) or has a different branch convention, the formula is
written out here: they follow XLA's definitions (``xla/client/lib/math.cc`` and the
StableHLO reference interpreter), which is what programs from JAX expect.
"""
from __future__ import annotations

import numpy as np

C64 = np.dtype(np.complex64)
C128 = np.dtype(np.complex128)


def is_complex(dt) -> bool:
    return np.dtype(dt).kind == "c"


def upcast(fn, *xs):
    """``fn`` on complex128 values, rounded to the first operand's complex type."""
    dt = xs[0].dtype
    with np.errstate(all="ignore"):
        r = fn(*(np.asarray(x, C128) for x in xs))
    return np.asarray(r).astype(dt)


def expm1(z):
    a, b = z.real, z.imag
    s = np.sin(0.5 * b)
    re = np.expm1(a) * np.cos(b) - 2.0 * s * s
    im = np.exp(a) * np.sin(b)
    return re + 1j * im


def log1p(z):
    a, b = z.real, z.imag
    small = np.abs(z) < 0.5
    # log|1+z| = 0.5 * log1p(2a + a^2 + b^2), exact near 0; the plain log elsewhere
    re = np.where(small, 0.5 * np.log1p(a * (2.0 + a) + b * b), np.log(np.abs(1.0 + z)))
    return re + 1j * np.arctan2(b, 1.0 + a)


def cbrt(z):
    """The principal cube root, |z|^(1/3) * exp(i arg(z) / 3)."""
    r = np.cbrt(np.abs(z))
    t = np.angle(z) / 3.0
    return r * np.cos(t) + 1j * r * np.sin(t)


def logistic(z):
    return 1.0 / (1.0 + np.exp(-z))


def rsqrt(z):
    return 1.0 / np.sqrt(z)


def sign(z):
    """z / |z|; 0 for 0; NaN parts for a NaN input."""
    m = np.abs(z)
    zero = m == 0
    q = z / np.where(zero, 1.0, m)
    return np.where(zero, 0.0 + 0.0j, q)


def atan2(y, x):
    """XLA's complex atan2: -i * log((x + i y) / sqrt(x^2 + y^2))."""
    return -1j * np.log((x + 1j * y) / np.sqrt(x * x + y * y))


def power(x, y):
    """x ** y; 0 ** 0 is 1, 0 ** y is 0 for Re(y) > 0 (numpy's conventions)."""
    return np.power(x, y)


def lexicographic(a, b):
    """(a < b, a == b) on (real, imag) pairs."""
    lt = (a.real < b.real) | ((a.real == b.real) & (a.imag < b.imag))
    eq = (a.real == b.real) & (a.imag == b.imag)
    return lt, eq


def _extremum(a, b, take_b_when_less: bool):
    """Lexicographic maximum (``take_b_when_less``) or minimum; a NaN in either part of either
    operand wins (the first operand's first)."""
    lt, _ = lexicographic(a, b)
    nan_a = np.isnan(a.real) | np.isnan(a.imag)
    nan_b = np.isnan(b.real) | np.isnan(b.imag)
    r = np.where(lt, b, a) if take_b_when_less else np.where(lt, a, b)
    return np.where(nan_a, a, np.where(nan_b, b, r))


def maximum(a, b):
    return _extremum(a, b, True)


def minimum(a, b):
    return _extremum(a, b, False)


def compare(a, b, direction):
    lt, eq = lexicographic(a, b)
    gt, _ = lexicographic(b, a)
    return {"EQ": eq, "NE": ~eq, "LT": lt, "LE": lt | eq, "GT": gt, "GE": gt | eq}[direction]
