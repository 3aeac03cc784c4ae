"""Window functions of hlo.numpy (bartlett, blackman, hamming, hanning, kaiser) and the modified
Bessel function ``i0`` (Cephes' Chebyshev expansions, the coefficients numpy uses)."""
from __future__ import annotations

import numpy as np

from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from . import creation as cr
from . import ufuncs as uf
from .promotion import promote_inexact

_I0A = (-4.4153416464793395e-18, 3.3307945188222384e-17, -2.431279846547955e-16, 1.715391285555133e-15, -1.1685332877993451e-14, 7.676185498604936e-14, -4.856446783111929e-13, 2.95505266312964e-12, -1.726826291441556e-11, 9.675809035373237e-11, -5.189795601635263e-10, 2.6598237246823866e-09, -1.300025009986248e-08, 6.046995022541919e-08, -2.670793853940612e-07, 1.1173875391201037e-06, -4.4167383584587505e-06, 1.6448448070728896e-05, -5.754195010082104e-05, 0.00018850288509584165, -0.0005763755745385824, 0.0016394756169413357, -0.004324309995050576, 0.010546460394594998, -0.02373741480589947, 0.04930528423967071, -0.09490109704804764, 0.17162090152220877, -0.3046826723431984, 0.6767952744094761)
_I0B = (-7.233180487874754e-18, -4.830504485944182e-18, 4.46562142029676e-17, 3.461222867697461e-17, -2.8276239805165836e-16, -3.425485619677219e-16, 1.7725601330565263e-15, 3.8116806693526224e-15, -9.554846698828307e-15, -4.150569347287222e-14, 1.54008621752141e-14, 3.8527783827421426e-13, 7.180124451383666e-13, -1.7941785315068062e-12, -1.3215811840447713e-11, -3.1499165279632416e-11, 1.1889147107846439e-11, 4.94060238822497e-10, 3.3962320257083865e-09, 2.266668990498178e-08, 2.0489185894690638e-07, 2.8913705208347567e-06, 6.889758346916825e-05, 0.0033691164782556943, 0.8044904110141088)


def _chbevl(x: Tracer, coefs) -> Tracer:
    b0, b1, b2 = x * 0 + coefs[0], x * 0, x * 0
    for c in coefs[1:]:
        b2, b1 = b1, b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


def i0e(x) -> Tracer:
    """exp(-|x|) * i0(x), the exponentially scaled modified Bessel function of order 0."""
    (t,), dt, _ = promote_inexact("i0", x)
    ax = uf.abs(t)
    small = _chbevl(ax / 2.0 - 2.0, _I0A)
    safe = uf.where(ax > 8.0, ax, 8.0)
    large = _chbevl(32.0 / safe - 2.0, _I0B) / uf.sqrt(safe)
    return uf.where(ax <= 8.0, small, large).astype(dt)


@api_function
def i0(x) -> Tracer:
    """The modified Bessel function of the first kind, order 0."""
    (t,), dt, _ = promote_inexact("i0", x)
    return (uf.exp(uf.abs(t)) * i0e(t)).astype(dt)


def _n(what, M) -> int:
    try:
        return int(M)
    except TypeError:
        raise TypeError(f"{what}: M must be a static integer, got {type(M).__name__}") from None


def _window(values: np.ndarray) -> Tracer:
    return cr.asarray(values.astype(np.float32))


@api_function
def bartlett(M) -> Tracer:
    return _window(np.bartlett(_n("bartlett", M)))


@api_function
def blackman(M) -> Tracer:
    return _window(np.blackman(_n("blackman", M)))


@api_function
def hamming(M) -> Tracer:
    return _window(np.hamming(_n("hamming", M)))


@api_function
def hanning(M) -> Tracer:
    return _window(np.hanning(_n("hanning", M)))


@api_function
def kaiser(M, beta) -> Tracer:
    """The Kaiser window; beta may be traced."""
    m = _n("kaiser", M)
    if m <= 1:
        return cr.ones((max(m, 0),), np.float32)
    n = np.arange(m, dtype=np.float64)
    alpha = (m - 1) / 2.0
    r = np.sqrt(1 - ((n - alpha) / alpha) ** 2).astype(np.float32)
    (b,), _, _ = promote_inexact("kaiser", beta)
    return i0(b * cr.asarray(r)) / i0(b)
