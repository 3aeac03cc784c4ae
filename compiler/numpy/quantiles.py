"""Order statistics and counting in hlo.numpy: quantile, percentile, their nan- forms and
nanmedian (one sort along the reduced axes, then a gather of the two neighbours of each
quantile's position); histogram, histogram2d, histogramdd, histogram_bin_edges and bincount
(scatter-adds into a static number of bins); cov and corrcoef."""
from __future__ import annotations

import builtins
import math

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..lax.common import canonical_axes
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from . import creation as cr
from . import reductions as red
from . import search as se
from . import shapes as sh
from . import sorting as so
from . import ufuncs as uf
from .promotion import promote_inexact

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(what, a, q, axis, method, keepdims, ignore_nan, scale=1.0):
    if method not in _METHODS:
        raise ValueError(f"{what}: method must be one of {_METHODS}, got {method!r}")
    (x,), dt, _ = promote_inexact(what, a)
    if dtypes.is_complex(dt):
        raise TypeError(f"{what}: complex values have no order")
    qt = q.astype(dt) if isinstance(q, Tracer) else cr.asarray(np.asarray(q, dtype=dt))
    if scale != 1.0:
        qt = qt / np.array(scale, dt)
    if axis is None:
        axes = tuple(range(x.ndim))
    else:
        axes = canonical_axes(what, axis, x.ndim, allow_none=False)
    rest = [i for i in range(x.ndim) if i not in axes]
    n = math.prod(x.shape[i] for i in axes)
    if n == 0:
        raise ShapeError(f"{what}: cannot take a quantile over an empty axis")
    src = sh.reshape(sh.transpose(x, rest + list(axes)), [x.shape[i] for i in rest] + [n])
    s = so.sort(src, axis=-1)  # NaNs last
    nan_in = red.any(uf.isnan(src), axis=-1)
    if ignore_nan:
        count = red.sum(uf.logical_not(uf.isnan(src)), axis=-1).astype(dt)
    else:
        count = cr.full(s.shape[:-1], n, dt)
    # positions: rest-shape x q-shape
    cnt = sh.reshape(count, count.shape + (1,) * qt.ndim)
    pos = qt * (cnt - 1)
    lo = uf.floor(pos)
    hi = uf.ceil(pos)
    if method == "lower":
        lo = hi = lo
    elif method == "higher":
        lo = hi
    elif method == "nearest":
        lo = hi = uf.round(pos)
    top = builtins.max(n - 1, 0)
    lo_i = uf.clip(lo, 0, top).astype(np.int32)
    hi_i = uf.clip(hi, 0, top).astype(np.int32)
    flat_q = qt.size
    lo_f = sh.reshape(lo_i, lo_i.shape[:len(rest)] + (flat_q,))
    hi_f = sh.reshape(hi_i, hi_i.shape[:len(rest)] + (flat_q,))
    lo_v = sh.take_along_axis(s, lo_f, axis=-1)
    hi_v = sh.take_along_axis(s, hi_f, axis=-1)
    lo_v = sh.reshape(lo_v, lo_i.shape)
    hi_v = sh.reshape(hi_v, hi_i.shape)
    if method == "linear":
        w = pos - lo
        out = lo_v * (1 - w) + hi_v * w
    elif method == "midpoint":
        out = (lo_v + hi_v) * 0.5
    else:
        out = lo_v
    bad = (count == 0) if ignore_nan else nan_in
    out = uf.where(sh.reshape(bad, bad.shape + (1,) * qt.ndim), np.array(np.nan, dt), out)
    # rest + q  ->  q + rest
    nr = len(rest)
    out = sh.transpose(out, list(range(nr, nr + qt.ndim)) + list(range(nr)))
    if keepdims:
        shape = list(qt.shape) + [1 if i in axes else d for i, d in enumerate(x.shape)]
        out = sh.reshape(out, shape)
    return out


@api_function
def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
             interpolation=None) -> Tracer:
    """The ``q``-th quantiles (``q`` in [0, 1], a scalar or array: its shape leads the result's)
    over ``axis``; NaN where the data has a NaN."""
    if interpolation is not None:
        method = interpolation
    return _quantile("quantile", a, q, axis, method, keepdims, False)


@api_function
def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                interpolation=None) -> Tracer:
    """quantile ignoring NaNs (NaN where a slice is all NaN)."""
    if interpolation is not None:
        method = interpolation
    return _quantile("nanquantile", a, q, axis, method, keepdims, True)


@api_function
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
               interpolation=None) -> Tracer:
    """quantile with ``q`` in percent."""
    if interpolation is not None:
        method = interpolation
    return _quantile("percentile", a, q, axis, method, keepdims, False, 100.0)


@api_function
def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                  interpolation=None) -> Tracer:
    if interpolation is not None:
        method = interpolation
    return _quantile("nanpercentile", a, q, axis, method, keepdims, True, 100.0)


@api_function
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False) -> Tracer:
    """The median ignoring NaNs."""
    return _quantile("nanmedian", a, 0.5, axis, "linear", keepdims, True)


# --------------------------------------------------------------------------------------------
# Counting
# --------------------------------------------------------------------------------------------

def _static_length(what, x, length, minlength):
    if length is not None:
        return builtins.max(int(length), int(minlength))
    if isinstance(x, Tracer):
        raise TypeError(
            f"{what}: the number of bins depends on the values of x, which are traced here; pass a "
            "static length= (the result has that many bins), as jax.numpy.bincount(x, length=N) "
            "under jit")
    xa = np.asarray(x)
    return builtins.max(int(minlength), int(xa.max()) + 1 if xa.size else 0)


def bincount(x, weights=None, minlength=0, *, length=None) -> Tracer:
    """Counts (or summed ``weights``) of each value of the non-negative integers ``x`` in
    ``length`` bins (values past the last bin are dropped, negative ones count in bin 0, as
    in jax). ``length`` may be left out when ``x`` is concrete."""
    n = _static_length("bincount", x, length, minlength)
    return _bincount(x, weights, n)


@api_function
def _bincount(x, weights, n) -> Tracer:
    xt = cr.asarray(x)
    if not (dtypes.is_int(xt.dtype) or dtypes.is_bool(xt.dtype)):
        raise TypeError(f"bincount: x must be integers, got {xt.dtype}")
    if xt.ndim != 1:
        raise ShapeError(f"bincount: x must be one-dimensional, got shape {xt.shape}")
    w = cr.ones(xt.shape, np.int32) if weights is None else sh.broadcast_to(cr.asarray(weights), xt.shape)
    idx = uf.clip(xt.astype(np.int32), 0, None) if xt.dtype != np.bool_ else xt.astype(np.int32)
    return cr.zeros((n,), w.dtype).at[idx].add(w, mode="drop")


def _edges(what, a: Tracer, bins, rng, dt):
    if isinstance(bins, (int, np.integer)):
        nb = int(bins)
        if nb < 1:
            raise ValueError(f"{what}: bins must be positive, got {nb}")
        if rng is None:
            lo, hi = red.min(a), red.max(a)
        else:
            lo, hi = cr.asarray(rng[0]).astype(dt), cr.asarray(rng[1]).astype(dt)
        same = lo == hi
        lo, hi = uf.where(same, lo - 0.5, lo), uf.where(same, hi + 0.5, hi)
        k = cr.arange(nb + 1, dtype=dt)
        e = (lo + (hi - lo) * (k / np.array(nb, dt))).astype(dt)
        return uf.where(k == nb, hi.astype(dt), e)  # the last edge is exactly the top
    e = cr.asarray(bins)
    if e.ndim != 1:
        raise ShapeError(f"{what}: bins must be an integer or a one-dimensional array of edges")
    return e.astype(dtypes.promote_types(e.dtype, dt)) if not dtypes.is_float(e.dtype) else e


@api_function
def histogram_bin_edges(a, bins=10, range=None, weights=None) -> Tracer:
    (x,), dt, _ = promote_inexact("histogram_bin_edges", a)
    return _edges("histogram_bin_edges", sh.ravel(x), bins, range, dt)


def _bin_index(x: Tracer, edges: Tracer) -> Tracer:
    """1 + the bin of each value (0 below, len(edges) above; the last edge is in the last bin)."""
    i = se.searchsorted(edges, x, side="right")
    return uf.where(x == edges[-1], np.int32(edges.shape[0] - 1), i)


@api_function
def histogram(a, bins=10, range=None, weights=None, density=None):
    """``(counts, edges)``: counts (or summed ``weights``) of the flattened ``a`` in ``bins``
    bins (a count over ``range``, default the data's min and max, or the edges); values outside
    are dropped. ``density`` normalizes to a probability density."""
    (x,), dt, _ = promote_inexact("histogram", a)
    x = sh.ravel(x)
    edges = _edges("histogram", x, bins, range, dt)
    w = cr.ones(x.shape, dt) if weights is None else sh.ravel(cr.asarray(weights))
    if w.shape != x.shape:
        raise ShapeError(f"histogram: weights must have a's shape, got {w.shape}")
    idx = _bin_index(x, edges)
    counts = cr.zeros((edges.shape[0] + 1,), w.dtype).at[idx].add(w, mode="drop")[1:-1]
    if density:
        width = edges[1:] - edges[:-1]
        counts = counts / width / red.sum(counts)
    return counts, edges


@api_function
def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """The D-dimensional histogram of ``sample`` (N points of D coordinates): ``(counts,
    [edges per dimension])``."""
    (s,), dt, _ = promote_inexact("histogramdd", sample)
    if s.ndim == 1:
        s = s[:, None]
    if s.ndim != 2:
        raise ShapeError(f"histogramdd: sample must be (N, D), got shape {s.shape}")
    N, D = s.shape
    bins_l = list(bins) if isinstance(bins, (list, tuple)) else [bins] * D
    rng_l = list(range) if range is not None else [None] * D
    if len(bins_l) != D or len(rng_l) != D:
        raise ValueError(f"histogramdd: bins and range need one entry per dimension ({D})")
    edges = [_edges("histogramdd", s[:, d], bins_l[d], rng_l[d], dt) for d in builtins.range(D)]
    nbins = [e.shape[0] + 1 for e in edges]
    flat = cr.zeros((N,), np.int32)
    for d in builtins.range(D):
        flat = flat * np.int32(nbins[d]) + _bin_index(s[:, d], edges[d])
    w = cr.ones((N,), np.int32) if weights is None else sh.ravel(cr.asarray(weights))  # as jax
    counts = cr.zeros((math.prod(nbins),), w.dtype).at[flat].add(w, mode="drop")
    counts = sh.reshape(counts, nbins)
    counts = counts[tuple(slice(1, -1) for _ in builtins.range(D))]
    if density:
        counts = counts / red.sum(counts)
        for d in builtins.range(D):
            width = edges[d][1:] - edges[d][:-1]
            counts = counts / sh.reshape(width, [-1 if i == d else 1 for i in builtins.range(D)])
    return counts, edges


@api_function
def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """``(counts, xedges, yedges)`` of the points ``(x[i], y[i])``."""
    s = sh.stack([sh.ravel(cr.asarray(x)), sh.ravel(cr.asarray(y))], axis=1)
    if isinstance(bins, (list, tuple)) and len(bins) != 2:
        bins = [bins, bins]
    counts, edges = histogramdd(s, bins, range, weights, density)
    return counts, edges[0], edges[1]


# --------------------------------------------------------------------------------------------
# Covariance
# --------------------------------------------------------------------------------------------

@api_function
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None) -> Tracer:
    """numpy.cov: the covariance matrix of the variables (rows, or columns with
    ``rowvar=False``), with frequency and analytic weights."""
    (x,), dt, _ = promote_inexact("cov", m)
    if x.ndim > 2:
        raise ShapeError(f"cov: m has more than 2 dimensions ({x.shape})")
    x = sh.atleast_2d(x)
    if not rowvar and x.shape[0] != 1:
        x = x.T
    if y is not None:
        (yt,), _, _ = promote_inexact("cov", y)
        yt = sh.atleast_2d(yt)
        if not rowvar and yt.shape[0] != 1:
            yt = yt.T
        x = sh.concatenate([x, yt.astype(x.dtype)], axis=0)
    x = x.astype(dtypes.promote_types(x.dtype, dt))
    if ddof is None:
        ddof = 0 if bias else 1
    w = None
    if fweights is not None:
        fw = cr.asarray(fweights)
        if fw.ndim != 1 or fw.shape[0] != x.shape[1]:
            raise ShapeError("cov: fweights must be one-dimensional with one weight per observation")
        w = fw.astype(x.dtype)
    if aweights is not None:
        aw = cr.asarray(aweights)
        if aw.ndim != 1 or aw.shape[0] != x.shape[1]:
            raise ShapeError("cov: aweights must be one-dimensional with one weight per observation")
        w = aw.astype(x.dtype) if w is None else w * aw.astype(x.dtype)
    if w is None:
        avg = red.mean(x, axis=1)
        w_sum = np.array(x.shape[1], x.dtype)
        fact = w_sum - ddof
    else:
        w_sum = red.sum(w)
        avg = red.sum(x * w, axis=1) / w_sum
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = w_sum - ddof
        else:
            fact = w_sum - ddof * red.sum(w * aw.astype(x.dtype)) / w_sum
    fact = uf.maximum(fact, 0.0)
    xc = x - avg[:, None]
    xw = xc if w is None else xc * w
    from .complexes import conj
    from .products import matmul
    c = matmul(xw, conj(xc).T) / fact
    return sh.squeeze(c) if c.shape == (1, 1) else c


@api_function
def corrcoef(x, y=None, rowvar=True) -> Tracer:
    """Pearson correlation coefficients (cov normalized by the standard deviations, real
    parts clipped to [-1, 1])."""
    c = cov(x, y, rowvar)
    if c.ndim == 0:
        return c / c
    from .complexes import imag, real
    d = sh.diagonal(c)
    sd = uf.sqrt(real(d)) if dtypes.is_complex(c.dtype) else uf.sqrt(d)
    c = c / sd[:, None] / sd[None, :]
    if dtypes.is_complex(c.dtype):
        return uf.clip(real(c), -1, 1) + 1j * uf.clip(imag(c), -1, 1)
    return uf.clip(c, -1, 1)
