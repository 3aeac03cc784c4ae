"""hlo.lax.zeta, polygamma and bessel_i1e (XLA lowers jax's to chlo ops; these follow the same
methods): the Hurwitz zeta function by Euler-Maclaurin summation (9 terms, then 12 Bernoulli
corrections, as Cephes' zeta.c and XLA's chlo.zeta), polygamma as (-1)^(m+1) m! zeta(m+1, x),
and i1e by its power series below |x| = 30 and its asymptotic series above. Written with
hlo.numpy (f16/bf16 compute in f32). Above hlo.numpy (reached lazily through hlo.lax)."""
from __future__ import annotations

from fractions import Fraction
from math import factorial

import numpy as np

from .. import numpy as jnp
from ..tracing.api_util import api_function
from .gamma_fns import digamma, lgamma
from .special_more import _prepare

_N = 9
# B_2j / (2j)! for j = 1..12 (Bernoulli numbers)
_BERNOULLI = (Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30), Fraction(5, 66),
              Fraction(-691, 2730), Fraction(7, 6), Fraction(-3617, 510), Fraction(43867, 798),
              Fraction(-174611, 330), Fraction(854513, 138), Fraction(-236364091, 2730))
_EM = tuple(float(b / factorial(2 * j + 2)) for j, b in enumerate(_BERNOULLI))


def _zeta(x, q):
    s = jnp.zeros_like(x)
    for k in range(_N):
        s = s + jnp.power(q + float(k), -x)
    w = q + float(_N)
    b = jnp.power(w, -x)
    s = s + w * b / (x - 1.0) + 0.5 * b
    t = x * b / w  # x (x+1) ... (x+2j-2) w^(-x-2j+1), updated as a whole (its parts overflow)
    for j, c in enumerate(_EM):
        s = s + c * t
        t = t * ((x + float(2 * j + 1)) / w) * ((x + float(2 * j + 2)) / w)
    s = jnp.where(x == 1.0, np.inf, s)
    s = jnp.where(x < 1.0, np.nan, s)
    q_int = q == jnp.floor(q)
    pole = (q <= 0.0) & q_int & (x > 1.0)
    s = jnp.where(pole, np.inf, s)
    # q < 0 not an integer: the sum has negative bases, defined for integer x only
    return jnp.where((q <= 0.0) & ~q_int & (x != jnp.floor(x)), np.nan, s)


@api_function
def zeta(x, q):
    """The Hurwitz zeta function sum_k (q + k)^-x (x > 1)."""
    (x, q), dt, _ = _prepare("zeta", x, q)
    return _zeta(x, q).astype(dt)


@api_function
def polygamma(m, x):
    """The m-th derivative of digamma (m a non-negative integer, as a float array)."""
    (m, x), dt, _ = _prepare("polygamma", m, x)
    valid = (m >= 0.0) & (m == jnp.floor(m))
    msafe = jnp.where(valid & (m > 0.0), m, 1.0)
    sign = jnp.where(jnp.fmod(msafe, 2.0) == 0.0, -1.0, 1.0)
    higher = sign * jnp.exp(lgamma(msafe + 1.0)) * _zeta(msafe + 1.0, x)
    out = jnp.where(m == 0.0, digamma(x), higher)
    return jnp.where(valid, out, np.nan).astype(dt)


_SMALL_TERMS = 64   # (x/2)^(2k+1) / (k! (k+1)!) below 30: the 64th term is below 2^-60 of the sum
_LARGE_TERMS = 25   # prod_k (4 - (2k-1)^2) / (8 k x): below 1e-17 from x = 30 on
_SPLIT = 30.0


@api_function
def bessel_i1e(x):
    """exp(-|x|) I1(x), the exponentially scaled modified Bessel function of order one."""
    (x,), dt, _ = _prepare("bessel_i1e", x)
    ax = jnp.abs(x)
    xs = jnp.where(ax < _SPLIT, ax, 1.0)
    half, quarter_sq = xs * 0.5, xs * xs * 0.25
    term, total = half, half
    for k in range(1, _SMALL_TERMS):
        term = term * quarter_sq / float(k * (k + 1))
        total = total + term
    small = total * jnp.exp(-xs)
    xl = jnp.where(ax < _SPLIT, _SPLIT, ax)
    term, total = jnp.ones_like(xl), jnp.ones_like(xl)
    for k in range(1, _LARGE_TERMS):
        term = term * (-(4.0 - (2.0 * k - 1.0) ** 2) / (8.0 * k)) / xl
        total = total + term
    large = total / jnp.sqrt(2.0 * np.pi * xl)
    out = jnp.where(ax < _SPLIT, small, large)
    return jnp.where(x < 0.0, -out, out).astype(dt)
