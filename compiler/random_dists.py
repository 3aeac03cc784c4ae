"""The rest of jax.random's samplers (``hlo.random`` re-exports them), each following jax's
algorithm from the same uniform/normal bits, so for the same key they give jax's values to a
few ulp: exponential, gumbel, laplace, logistic, cauchy, lognormal, pareto, rayleigh,
weibull_min, triangular, truncated_normal, wald, maxwell, double_sided_maxwell, rademacher,
geometric, categorical, choice, permutation (jax's rounds of sorting by random 32-bit keys:
the same permutation as jax), multivariate_normal, orthogonal.

The gamma family (gamma, loggamma, beta, dirichlet, chisquare, f, t, generalized_normal, ball)
draws with Marsaglia and Tsang's rejection method as jax does, but vectorized: every element
redraws in one ``while_loop`` until all have accepted, from keys folded with the iteration
number. The distribution is jax's; the values are not jax's (jax runs one loop per element).
poisson, binomial and multinomial run jax's algorithms (Knuth's and Hormann's for poisson,
inversion and BTRS for binomial), which loop over the whole array as hlo does: jax's values.
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes
from . import numpy as hnp
from .errors import DTypeError, ShapeError
from .lax.common import static_shape
from .lax.control_flow import while_loop
from .lax.erf_inv import erf_inv
from .lax.special import erf
from .lax.topk import top_k
from .random import _check_broadcast, _dtype, _key, bernoulli, bits, fold_in, normal, randint, split, uniform
from .tracing.api_util import api_function
from .tracing.tracer import Tracer


def _fdt(what, dtype):
    return _dtype(what, dtype, dtypes.float32, "f", "a floating-point type")


def _param_shape(what, shape, *params):
    """``shape``, or the broadcast shape of the parameters when None (checked against them)."""
    pshapes = [np.shape(p) if not isinstance(p, Tracer) else p.shape for p in params]
    if shape is None:
        return tuple(np.broadcast_shapes(*pshapes)) if pshapes else ()
    shape = static_shape(what, shape)
    _check_broadcast(what, shape, *pshapes)
    return shape


def _as(x, dt, shape=None):
    t = hnp.asarray(x).astype(dt)
    return t if shape is None else hnp.broadcast_to(t, shape)


# --------------------------------------------------------------------------------------------
# Transforms of one uniform or normal draw
# --------------------------------------------------------------------------------------------

@api_function
def exponential(key, shape=(), dtype=None) -> Tracer:
    """Exponential(1): ``-log1p(-u)``."""
    dt = _fdt("hlo.random.exponential", dtype)
    u = uniform(key, shape, dt)
    return -hnp.log1p(-u)


@api_function
def gumbel(key, shape=(), dtype=None, mode: str = "low") -> Tracer:
    """Standard Gumbel: ``-log(-log(u))`` for ``u`` uniform in [tiny, 1)."""
    what = "hlo.random.gumbel"
    dt = _fdt(what, dtype)
    shape = static_shape(what, shape)
    if mode not in ("low", "high"):
        raise ValueError(f"{what}: mode must be 'low' or 'high', got {mode!r}")
    info = dtypes.finfo(dt)
    if mode == "high":
        u = uniform(key, (2,) + shape, dt)
        high, low = u[0], u[1]
        x = hnp.where(high >= 0.5, high, high + 2.0 ** -info.nmant * low + float(info.tiny))
        return -hnp.log(-hnp.log1p(-x))
    return -hnp.log(-hnp.log(uniform(key, shape, dt, minval=float(info.tiny), maxval=1.0)))


@api_function
def laplace(key, shape=(), dtype=None) -> Tracer:
    dt = _fdt("hlo.random.laplace", dtype)
    u = uniform(key, shape, dt, minval=-1.0 + float(dtypes.finfo(dt).epsneg), maxval=1.0)
    return hnp.sign(u) * hnp.log1p(-hnp.abs(u))


@api_function
def logistic(key, shape=(), dtype=None) -> Tracer:
    dt = _fdt("hlo.random.logistic", dtype)
    x = uniform(key, shape, dt, minval=float(dtypes.finfo(dt).tiny), maxval=1.0)
    return hnp.log(x) - hnp.log1p(-x)


@api_function
def cauchy(key, shape=(), dtype=None) -> Tracer:
    dt = _fdt("hlo.random.cauchy", dtype)
    u = uniform(key, shape, dt, minval=float(dtypes.finfo(dt).eps), maxval=1.0)
    return hnp.tan(np.pi * (u - 0.5)).astype(dt)


@api_function
def lognormal(key, sigma=np.float32(1), shape=None, dtype=None) -> Tracer:
    what = "hlo.random.lognormal"
    dt = _fdt(what, dtype)
    shape = _param_shape(what, shape, sigma)
    return hnp.exp(normal(key, shape, dt) * _as(sigma, dt))


@api_function
def pareto(key, b, shape=None, dtype=None) -> Tracer:
    what = "hlo.random.pareto"
    dt = _fdt(what, dtype)
    shape = _param_shape(what, shape, b)
    return hnp.exp(exponential(key, shape, dt) / _as(b, dt))


@api_function
def rayleigh(key, scale, shape=None, dtype=None) -> Tracer:
    what = "hlo.random.rayleigh"
    dt = _fdt(what, dtype)
    shape = _param_shape(what, shape, scale)
    u = uniform(key, shape, dt)
    return _as(scale, dt, shape) * hnp.sqrt(hnp.log(u) * -2.0)


@api_function
def weibull_min(key, scale, concentration, shape=(), dtype=None) -> Tracer:
    dt = _fdt("hlo.random.weibull_min", dtype)
    u = uniform(key, shape, dt, minval=0, maxval=1)
    return hnp.power(-hnp.log1p(-u), 1.0 / _as(concentration, dt)) * _as(scale, dt)


@api_function
def triangular(key, left, mode, right, shape=None, dtype=None) -> Tracer:
    what = "hlo.random.triangular"
    dt = _fdt(what, dtype)
    shape = _param_shape(what, shape, left, mode, right)
    lo, md, hi = (_as(v, dt, shape) for v in (left, mode, right))
    fc = (md - lo) / (hi - lo)
    u = uniform(key, shape, dt)
    out1 = lo + hnp.sqrt(u * (hi - lo) * (md - lo))
    out2 = hi - hnp.sqrt((1 - u) * (hi - lo) * (hi - md))
    return hnp.where(u < fc, out1, out2)


@api_function
def truncated_normal(key, lower, upper, shape=None, dtype=None) -> Tracer:
    """Standard normal values conditioned on ``lower < x < upper`` (inverse CDF of a uniform
    draw between the bounds' CDFs), clipped strictly inside the bounds."""
    what = "hlo.random.truncated_normal"
    dt = _fdt(what, dtype)
    shape = _param_shape(what, shape, lower, upper)
    sqrt2 = np.array(np.sqrt(2), dt)
    lo, hi = _as(lower, dt), _as(upper, dt)
    a, b = erf(lo / sqrt2), erf(hi / sqrt2)
    u = uniform(key, shape, dt, minval=a, maxval=b)
    out = sqrt2 * erf_inv(u)
    from .autodiff import stop_gradient
    return hnp.clip(out, hnp.nextafter(stop_gradient(lo), np.array(np.inf, dt)),
                    hnp.nextafter(stop_gradient(hi), np.array(-np.inf, dt)))


@api_function
def wald(key, mean, shape=None, dtype=None) -> Tracer:
    what = "hlo.random.wald"
    dt = _fdt(what, dtype)
    shape = _param_shape(what, shape, mean)
    k1, k2 = split(key)
    m = _as(mean, dt, shape)
    v = normal(k1, shape, dt)
    z = uniform(k2, shape, dt)
    y = v * v
    sqrt_term = hnp.sqrt(4 * m * y + (m * m) * (y * y))
    x = m + (m * m) * y / 2 - m / 2 * sqrt_term
    return hnp.where(z <= m / (m + x), x, (m * m) / x)


@api_function
def rademacher(key, shape=(), dtype=None) -> Tracer:
    """-1 or 1 with equal probability (integers, int32 by default)."""
    dt = dtypes.canonicalize(dtype, "hlo.random.rademacher: dtype") if dtype is not None else dtypes.int32
    b = bernoulli(key, 0.5, static_shape("hlo.random.rademacher", shape))
    return (2 * b.astype(dt) - 1).astype(dt)


@api_function
def maxwell(key, shape=(), dtype=None) -> Tracer:
    """The norm of three standard normals."""
    what = "hlo.random.maxwell"
    dt = _fdt(what, dtype)
    x = normal(key, static_shape(what, shape) + (3,), dt)
    return hnp.sqrt(hnp.sum(x * x, axis=-1))


@api_function
def double_sided_maxwell(key, loc, scale, shape=(), dtype=None) -> Tracer:
    what = "hlo.random.double_sided_maxwell"
    dt = _fdt(what, dtype)
    pshape = tuple(np.broadcast_shapes(np.shape(loc) if not isinstance(loc, Tracer) else loc.shape,
                                       np.shape(scale) if not isinstance(scale, Tracer) else scale.shape))
    shape = static_shape(what, shape)
    shape = (shape or pshape) + pshape
    km, kr = split(key)
    m = maxwell(km, shape, dt)
    s = rademacher(kr, shape, dt)
    return s * m * _as(scale, dt) + _as(loc, dt)


@api_function
def geometric(key, p, shape=None, dtype=None) -> Tracer:
    """The number of Bernoulli(p) trials up to the first success (int32 by default)."""
    what = "hlo.random.geometric"
    dt = _dtype(what, dtype, dtypes.int32, "iu", "an integer type")
    shape = _param_shape(what, shape, p)
    pt = hnp.asarray(p)
    if not dtypes.is_float(pt.dtype):
        pt = pt.astype(dtypes.float32)
    u = uniform(key, shape, pt.dtype)
    u = hnp.where(u == 0, 1, u)
    g = hnp.floor(hnp.log(u) / hnp.broadcast_to(hnp.log1p(-pt), shape)) + 1
    return g.astype(dt)


# --------------------------------------------------------------------------------------------
# Discrete choices
# --------------------------------------------------------------------------------------------

@api_function
def categorical(key, logits, axis: int = -1, shape=None, replace: bool = True, mode=None) -> Tracer:
    """Indices drawn with probabilities ``softmax(logits)`` along ``axis`` (argmax of logits
    plus Gumbel noise; without replacement: the top ``k`` of one noisy draw)."""
    what = "hlo.random.categorical"
    lg = hnp.asarray(logits)
    if lg.ndim == 0:
        raise ShapeError(f"{what}: logits must have at least one dimension")
    axis = axis % lg.ndim
    batch_shape = tuple(np.delete(lg.shape, axis))
    if shape is None:
        shape = batch_shape
    else:
        shape = static_shape(what, shape)
        if shape[len(shape) - len(batch_shape):] != batch_shape:
            raise ShapeError(f"{what}: shape {shape} must end with the logits' batch shape {batch_shape}")
    prefix = shape[:len(shape) - len(batch_shape)]
    gmode = "low" if mode is None else mode
    if replace:
        lshape = list(shape[len(shape) - len(batch_shape):])
        lshape.insert(axis, lg.shape[axis])
        g = gumbel(key, (*prefix, *lshape), lg.dtype, mode=gmode)
        return hnp.argmax(g + hnp.expand_dims(lg, tuple(range(len(prefix)))), axis=axis - lg.ndim)
    noisy = lg + gumbel(key, lg.shape, lg.dtype, mode=gmode)
    k = math.prod(prefix)
    if k > lg.shape[axis]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number of "
                         f"categories ({lg.shape[axis]}).")
    _, ind = top_k(hnp.moveaxis(noisy, axis, -1), k)  # batch_shape + (k,)
    return hnp.reshape(hnp.moveaxis(ind, -1, 0), shape)


def _shuffle(key, x: Tracer, axis: int) -> Tracer:
    from .lax.reductions import sort_key_val
    from .lax.threefry import random_bits
    num_rounds = int(np.ceil(3 * np.log(max(1, x.size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(num_rounds):
        ks = split(key)
        key, sub = ks[0], ks[1]
        sort_keys = random_bits("hlo.random.permutation", sub, 32, x.shape)
        _, x = sort_key_val(sort_keys, x, axis)
    return x


@api_function
def permutation(key, x, axis: int = 0, independent: bool = False) -> Tracer:
    """A random permutation of ``arange(x)`` (``x`` an int) or of ``x`` along ``axis``
    (each slice on its own with ``independent=True``); jax's algorithm, jax's result."""
    what = "hlo.random.permutation"
    k = _key(what, key)
    if isinstance(x, Tracer) and x.ndim == 0:
        raise ShapeError(f"{what}: x must be a static integer or an array of at least one dimension; "
                         "a traced integer gives no static shape")
    if np.ndim(x) == 0 and not isinstance(x, Tracer):
        if not np.issubdtype(np.asarray(x).dtype, np.integer):
            raise TypeError("x must be an integer or at least 1-dimensional")
        return _shuffle(k, hnp.arange(int(x), dtype=dtypes.int32), 0)
    t = hnp.asarray(x)
    axis = axis % t.ndim
    if independent or t.ndim == 1:
        return _shuffle(k, t, axis)
    ind = _shuffle(k, hnp.arange(t.shape[axis], dtype=dtypes.int32), 0)
    return hnp.take(t, ind, axis=axis)


@api_function
def choice(key, a, shape=(), replace: bool = True, p=None, axis: int = 0, mode=None) -> Tracer:
    """Draws from ``a`` (an int: ``arange(a)``; an array: its slices along ``axis``), with or
    without replacement, uniformly or with probabilities ``p``."""
    what = "hlo.random.choice"
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"shape argument of hlo.random.choice must be a sequence, got {shape}")
    shape = static_shape(what, shape)
    if isinstance(a, Tracer) and a.ndim == 0:
        raise ShapeError(f"{what}: a must be a static integer or an array; a traced integer gives no "
                         "static population size")
    arr = hnp.asarray(a)
    if arr.ndim == 0:
        n_inputs = int(np.asarray(a))
    else:
        axis = axis % arr.ndim
        n_inputs = arr.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return hnp.zeros(shape, dtype=arr.dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population (size {n_inputs}) "
                         "when 'replace=False'")
    if p is None:
        if replace:
            ind = randint(key, shape, 0, n_inputs)
            result = ind if arr.ndim == 0 else hnp.take(arr, ind, axis=axis)
        else:
            perm = permutation(key, n_inputs if arr.ndim == 0 else arr, axis)
            result = hnp.take(perm, hnp.arange(n_draws), axis=axis if arr.ndim else 0)
    else:
        pa = hnp.asarray(p)
        if not dtypes.is_float(pa.dtype):
            pa = pa.astype(dtypes.float32)
        if pa.shape != (n_inputs,):
            raise ValueError("p must be None or a 1D vector with the same size as a.shape[axis]. "
                             f"p has shape {pa.shape} and a.shape[axis] is {n_inputs}.")
        if replace:
            cum = hnp.cumsum(pa)
            r = cum[-1] * (1 - uniform(key, shape, dtype=cum.dtype))
            ind = hnp.searchsorted(cum, r).astype(dtypes.int32)
        else:
            g = gumbel(key, (n_inputs,), pa.dtype, mode="low" if mode is None else mode) + hnp.log(pa)
            ind = top_k(g, n_draws)[1]
        result = ind if arr.ndim == 0 else hnp.take(arr, ind, axis=axis)
    return hnp.reshape(result, shape if arr.ndim == 0 else arr.shape[:axis] + shape + arr.shape[axis + 1:])


# --------------------------------------------------------------------------------------------
# Linear algebra
# --------------------------------------------------------------------------------------------

@api_function
def multivariate_normal(key, mean, cov, shape=None, dtype=None, method: str = "cholesky") -> Tracer:
    """``mean + factor @ z`` for standard normal ``z`` and ``factor factor^T = cov`` (Cholesky,
    or the eigen/singular decomposition with ``method='eigh'``/``'svd'``)."""
    what = "hlo.random.multivariate_normal"
    if method not in ("svd", "eigh", "cholesky"):
        raise ValueError(f"{what}: method must be one of {{svd, eigh, cholesky}}, got {method!r}")
    dt = _fdt(what, dtype)
    m, c = hnp.asarray(mean).astype(dt), hnp.asarray(cov).astype(dt)
    if m.ndim < 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == {m.ndim}")
    if c.ndim < 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == {c.ndim}")
    n = m.shape[-1]
    if c.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, but got "
                         f"cov.shape == {c.shape}.")
    if shape is None:
        shape = tuple(np.broadcast_shapes(m.shape[:-1], c.shape[:-2]))
    else:
        shape = static_shape(what, shape)
        _check_broadcast(what, shape, m.shape[:-1], c.shape[:-2])
    from .numpy import linalg
    if method == "svd":
        u, s, _ = linalg.svd(c)
        factor = u * hnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = linalg.eigh(c)
        factor = v * hnp.sqrt(w[..., None, :])
    else:
        factor = linalg.cholesky(c)
    z = normal(key, shape + (n,), dt)
    return m + hnp.einsum("...ij,...j->...i", factor, z)


@api_function
def orthogonal(key, n: int, shape=(), dtype=None, m=None) -> Tracer:
    """A random ``n x m`` (default ``n x n``) matrix with orthonormal rows or columns, Haar
    distributed (QR of a normal matrix, signs fixed by R's diagonal)."""
    what = "hlo.random.orthogonal"
    dt = _fdt(what, dtype)
    shape = static_shape(what, shape)
    m = n if m is None else m
    z = normal(key, (*shape, max(n, m), min(n, m)), dt)
    from .numpy import linalg
    q, r = linalg.qr(z)
    d = hnp.diagonal(r, axis1=-2, axis2=-1)
    x = q * hnp.expand_dims(hnp.sign(d), -2)
    return hnp.swapaxes(x, -1, -2) if n < m else x


# --------------------------------------------------------------------------------------------
# The gamma family
# --------------------------------------------------------------------------------------------

def _gamma_log(what, key, a: Tracer, shape, dt) -> Tracer:
    """log of Gamma(a, 1) samples of ``shape`` (``a`` broadcast to it): Marsaglia-Tsang with
    the boost ``G(a) = G(a + 1) U^(1/a)`` for ``a < 1``, in log space."""
    a = hnp.broadcast_to(a.astype(dt), shape)
    boost = a >= 1
    alpha = hnp.where(boost, a, a + 1)
    d = alpha - 1.0 / 3.0
    c = (1.0 / 3.0) / hnp.sqrt(d)
    kloop, kboost = split(key)

    def cond(state):
        i, done, _ = state
        return hnp.logical_not(hnp.all(done))

    def body(state):
        i, done, v_acc = state
        k = fold_in(kloop, i)
        kx, ku = split(k)
        x = normal(kx, shape, dt)
        u = uniform(ku, shape, dt)
        v = 1 + c * x
        v3 = v * v * v
        safe_v3 = hnp.where(v > 0, v3, 1.0)
        ok = hnp.logical_and(v > 0, hnp.logical_or(
            u < 1 - 0.0331 * (x * x) * (x * x),
            hnp.log(u) < 0.5 * x * x + d * (1 - safe_v3 + hnp.log(safe_v3))))
        take = hnp.logical_and(ok, hnp.logical_not(done))
        return i + 1, hnp.logical_or(done, ok), hnp.where(take, safe_v3, v_acc)

    init = (np.uint32(0), hnp.isnan(a), hnp.ones(shape, dt))
    _, _, v = while_loop(cond, body, init)
    log_u = -exponential(kboost, shape, dt)
    log_boost = hnp.where(hnp.logical_or(boost, log_u == 0), 0.0, log_u / a)
    out = hnp.log(d) + hnp.log(v) + log_boost
    return hnp.where(hnp.isnan(a), np.nan, out)


def _gamma_args(what, a, shape, dtype):
    dt = _fdt(what, dtype)
    shape = _param_shape(what, shape, a)
    return hnp.asarray(a).astype(dt), shape, dt


@api_function
def gamma(key, a, shape=None, dtype=None) -> Tracer:
    """Gamma(a, 1) samples (see the module docstring)."""
    what = "hlo.random.gamma"
    at, shape, dt = _gamma_args(what, a, shape, dtype)
    return hnp.exp(_gamma_log(what, _key(what, key), at, shape, dt))


@api_function
def loggamma(key, a, shape=None, dtype=None) -> Tracer:
    """log of Gamma(a, 1) samples, accurate for small ``a`` (where gamma underflows)."""
    what = "hlo.random.loggamma"
    at, shape, dt = _gamma_args(what, a, shape, dtype)
    return _gamma_log(what, _key(what, key), at, shape, dt)


@api_function
def beta(key, a, b, shape=None, dtype=None) -> Tracer:
    what = "hlo.random.beta"
    dt = _fdt(what, dtype)
    shape = _param_shape(what, shape, a, b)
    ka, kb = split(_key(what, key))
    la = _gamma_log(what, ka, hnp.asarray(a), shape, dt)
    lb = _gamma_log(what, kb, hnp.asarray(b), shape, dt)
    mx = hnp.maximum(la, lb)
    ga, gb = hnp.exp(la - mx), hnp.exp(lb - mx)
    return ga / (ga + gb)


@api_function
def dirichlet(key, alpha, shape=None, dtype=None) -> Tracer:
    what = "hlo.random.dirichlet"
    dt = _fdt(what, dtype)
    al = hnp.asarray(alpha)
    if al.ndim < 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == {al.ndim}")
    if shape is None:
        shape = al.shape[:-1]
    else:
        shape = static_shape(what, shape)
        _check_broadcast(what, shape, al.shape[:-1])
    lg = _gamma_log(what, _key(what, key), al, tuple(shape) + al.shape[-1:], dt)
    from .nn.activations import softmax
    return softmax(lg, -1)


@api_function
def chisquare(key, df, shape=None, dtype=None) -> Tracer:
    what = "hlo.random.chisquare"
    dt = _fdt(what, dtype)
    shape = _param_shape(what, shape, df)
    return 2 * hnp.exp(_gamma_log(what, _key(what, key), hnp.asarray(df).astype(dt) / 2, shape, dt))


@api_function
def f(key, dfnum, dfden, shape=None, dtype=None) -> Tracer:
    what = "hlo.random.f"
    dt = _fdt(what, dtype)
    shape = _param_shape(what, shape, dfnum, dfden)
    kd, kn = split(_key(what, key))
    dn, dd = hnp.asarray(dfnum).astype(dt), hnp.asarray(dfden).astype(dt)
    return (chisquare(kn, dn, shape, dt) / dn) / (chisquare(kd, dd, shape, dt) / dd)


@api_function
def t(key, df, shape=None, dtype=None) -> Tracer:
    """Student's t: ``normal * sqrt(df / 2 / gamma(df / 2))``."""
    what = "hlo.random.t"
    dt = _fdt(what, dtype)
    shape = _param_shape(what, shape, df)
    kn, kg = split(_key(what, key))
    d = hnp.asarray(df).astype(dt)
    n = normal(kn, shape, dt)
    half = d / 2
    g = hnp.exp(_gamma_log(what, kg, half, shape, dt))
    return n * hnp.sqrt(half / g)


@api_function
def generalized_normal(key, p, shape=(), dtype=None) -> Tracer:
    """Density proportional to ``exp(-|x|^p)``: a random sign times ``gamma(1/p)^(1/p)``."""
    what = "hlo.random.generalized_normal"
    dt = _fdt(what, dtype)
    shape = static_shape(what, shape)
    k1, k2 = split(_key(what, key))
    pt = hnp.asarray(p).astype(dt)
    g = hnp.exp(_gamma_log(what, k1, 1 / pt, shape, dt))
    return rademacher(k2, shape, dt) * g ** (1 / pt)


@api_function
def ball(key, d: int, p: float = 2, shape=(), dtype=None) -> Tracer:
    """Uniform samples from the unit ``p``-norm ball in ``d`` dimensions."""
    what = "hlo.random.ball"
    dt = _fdt(what, dtype)
    shape = static_shape(what, shape)
    if not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"{what}: d must be a positive integer, got {d!r}")
    k1, k2 = split(_key(what, key))
    g = generalized_normal(k1, p, (*shape, int(d)), dt)
    e = exponential(k2, shape, dt)
    return g / ((hnp.sum(hnp.abs(g) ** p, axis=-1) + e) ** (1 / p))[..., None]


# --------------------------------------------------------------------------------------------
# Counts: poisson, binomial, multinomial (jax's algorithms, loops over the whole array)
# --------------------------------------------------------------------------------------------

def _split2(k):
    ks = split(k)
    return ks[0], ks[1]


def _split3(k):
    ks = split(k, 3)
    return ks[0], ks[1], ks[2]


def _poisson_knuth(key, lam, shape, dt):
    def cond(c):
        return hnp.any(c[3] > -lam)

    def body(c):
        i, k, rng, log_prod = c
        rng, sub = _split2(rng)
        k = hnp.where(log_prod > -lam, k + 1, k)
        u = uniform(sub, shape, np.float32)
        return i + 1, k, rng, log_prod + hnp.log(u)
    init = (np.int32(0), hnp.zeros(shape, dt), key, hnp.zeros(shape, np.float32))
    return (while_loop(cond, body, init)[1] - 1).astype(dt)


def _poisson_rejection(key, lam, shape, dt):
    from .lax.gamma_fns import lgamma
    log_lam = hnp.log(lam)
    b = 0.931 + 2.53 * hnp.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def cond(c):
        return hnp.any(hnp.logical_not(c[2]))

    def body(c):
        i, k_out, accepted, key = c
        key, s0, s1 = _split3(key)
        u = uniform(s0, shape, lam.dtype) - 0.5
        v = uniform(s1, shape, lam.dtype)
        us = 0.5 - hnp.abs(u)
        k = hnp.floor((2 * a / us + b) * u + lam + 0.43)
        s = hnp.log(v * inv_alpha / (a / (us * us) + b))
        t = -lam + k * log_lam - lgamma(k + 1)
        accept1 = hnp.logical_and(us >= 0.07, v <= v_r)
        reject = hnp.logical_or(k < 0, hnp.logical_and(us < 0.013, v > us))
        accept = hnp.logical_or(accept1, hnp.logical_and(hnp.logical_not(reject), s <= t))
        return i + 1, hnp.where(accept, k, k_out), hnp.logical_or(accepted, accept), key
    init = (np.int32(0), hnp.full(shape, -1, lam.dtype), hnp.zeros(shape, bool), key)
    return while_loop(cond, body, init)[1].astype(dt)


@api_function
def poisson(key, lam, shape=None, dtype=None) -> Tracer:
    """Poisson(lam) counts (int32 by default): Knuth's multiplication method below rate 10,
    Hormann's transformed rejection above, as jax (the same values for the same key, up to
    the rounding of lgamma at acceptance boundaries)."""
    what = "hlo.random.poisson"
    k = _key(what, key)
    dt = _dtype(what, dtype, dtypes.int32, "iu", "an integer type")
    shape = _param_shape(what, shape, lam)
    lt = hnp.broadcast_to(hnp.asarray(lam), shape).astype(np.float32)
    use_knuth = hnp.logical_or(hnp.isnan(lt), lt < 10)
    lam_knuth = hnp.where(use_knuth, lt, 0.0)
    lam_rej = hnp.where(use_knuth, 1e5, lt)
    out = hnp.where(use_knuth, _poisson_knuth(k, lam_knuth, shape, dt), _poisson_rejection(k, lam_rej, shape, dt))
    return hnp.where(lt == 0, np.array(0, dt), out)


_STIRLING_TAIL = np.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                           0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                           0.00925546218271273, 0.00833056343336287])


def _stirling_tail(k):
    use_table = k <= 9
    kc = hnp.clip(k, 0.0, 9.0)
    kp1sq = (kc + 1) * (kc + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (kc + 1)
    table = hnp.take(hnp.asarray(_STIRLING_TAIL.astype(k.dtype)), hnp.floor(kc).astype(np.int32))
    return hnp.where(use_table, table, approx)


def _binomial_inversion(key, count, prob, shape, dt):
    log1mp = hnp.log1p(-prob)

    def cond(c):
        return hnp.any(c[2] <= count)

    def body(c):
        i, num_geom, geom_sum, key = c
        sub, key = _split2(key)
        num_geom = hnp.where(geom_sum <= count, num_geom + 1, num_geom)
        u = uniform(sub, shape, prob.dtype)
        geom = hnp.ceil(hnp.log(u) / log1mp)
        return i + 1, num_geom, geom_sum + geom, key
    init = (np.int32(0), hnp.zeros(shape, prob.dtype), hnp.zeros(shape, prob.dtype), key)
    return (while_loop(cond, body, init)[1] - 1).astype(dt)


def _btrs(key, count, prob, shape, dt):
    stddev = hnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = hnp.floor((count + 1) * prob)

    def cond(st):
        return hnp.any(hnp.logical_not(st[2]))

    def body(st):
        i, k_out, accepted, key = st
        key, s0, s1 = _split3(key)
        u = uniform(s0, shape, prob.dtype) - 0.5
        v = uniform(s1, shape, prob.dtype)
        us = 0.5 - hnp.abs(u)
        accept1 = hnp.logical_and(us >= 0.07, v <= v_r)
        k = hnp.floor((2 * a / us + b) * u + c)
        reject = hnp.logical_or(k < 0, k > count)
        v = hnp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * hnp.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * hnp.log((count - m + 1) / (count - k + 1))
              + (k + 0.5) * hnp.log(r * (count - k + 1) / (k + 1))
              + _stirling_tail(m) + _stirling_tail(count - m) - _stirling_tail(k) - _stirling_tail(count - k))
        accept = hnp.logical_or(accept1, hnp.logical_and(hnp.logical_not(reject), v <= ub))
        return i + 1, hnp.where(accept, k, k_out), hnp.logical_or(accepted, accept), key
    init = (np.int32(0), hnp.full(shape, -1, prob.dtype), hnp.zeros(shape, bool), key)
    return while_loop(cond, body, init)[1].astype(dt)


@api_function
def binomial(key, n, p, shape=None, dtype=None) -> Tracer:
    """Binomial(n, p) counts as floats (float32 by default, as jax): inversion by geometric
    waiting times when ``n * min(p, 1 - p) <= 10``, else the BTRS rejection sampler."""
    what = "hlo.random.binomial"
    k = _key(what, key)
    dt = _fdt(what, dtype)
    shape = _param_shape(what, shape, n, p)
    prob = hnp.asarray(p)
    if not dtypes.is_float(prob.dtype):
        prob = prob.astype(np.float32)
    count = hnp.broadcast_to(hnp.asarray(n).astype(prob.dtype), shape)
    prob = hnp.broadcast_to(prob, shape)
    p_lt_half = prob < 0.5
    q = hnp.where(p_lt_half, prob, 1.0 - prob)
    count_bad = hnp.logical_or(hnp.isnan(count), count < 0.0)
    count_inf = hnp.isinf(count)
    q_nan, q_neg = hnp.isnan(q), q < 0.0
    q = hnp.where(hnp.logical_or(q_nan, q_neg), 0.01, q)
    use_inv = hnp.logical_or(count_bad, count * q <= 10.0)
    count = hnp.floor(count)
    count_inv = hnp.where(use_inv, count, 0.0)
    count_btrs = hnp.where(use_inv, 1e4, count)
    q_btrs = hnp.where(use_inv, 0.5, q)
    samples = hnp.where(use_inv, _binomial_inversion(k, count_inv, q, shape, dt),
                        _btrs(k, count_btrs, q_btrs, shape, dt))
    invalid = hnp.logical_or(hnp.logical_or(q_neg, q_nan), count_bad)
    samples = hnp.where(invalid, np.array(np.nan, dt), samples)
    samples = hnp.where(hnp.logical_and(count_inf, hnp.logical_not(invalid)), np.array(np.inf, dt), samples)
    keep = hnp.logical_or(hnp.logical_or(p_lt_half, count_bad), hnp.logical_or(q_nan, count_inf))
    return hnp.where(keep, samples, count.astype(dt) - samples)


@api_function
def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1) -> Tracer:
    """Counts of ``n`` trials over the outcomes along ``p``'s last axis (one binomial per
    outcome, of the trials left, as jax)."""
    what = "hlo.random.multinomial"
    kk = _key(what, key)
    dt = _fdt(what, dtype)
    pt = hnp.asarray(p)
    if not dtypes.is_float(pt.dtype):
        pt = pt.astype(np.float32)
    nt = hnp.asarray(n).astype(pt.dtype)
    shape = pt.shape if shape is None else static_shape(what, shape)
    nt = hnp.broadcast_to(nt, shape[:-1])
    pt = hnp.moveaxis(hnp.broadcast_to(pt, shape), -1, 0)
    remaining = hnp.flip(hnp.cumsum(hnp.flip(pt, 0), axis=0), 0)
    ratios = pt / hnp.where(remaining == 0, 1, remaining)
    keys = split(kk, ratios.shape[0])
    counts = []
    rem = nt
    for i in range(ratios.shape[0]):
        c = binomial(keys[i], rem, hnp.clip(ratios[i], 0, 1), dtype=rem.dtype)
        rem = rem - c
        counts.append(c)
    return hnp.moveaxis(hnp.stack(counts), 0, -1).astype(dt)


# --------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------

@api_function
def clone(key) -> Tracer:
    """The key itself (hlo's keys are values; jax's clone exists for its stateful keys)."""
    return _key("hlo.random.clone", key)


def wrap_key_data(key_bits_array, *, impl=None) -> Tracer:
    """The key of raw ``uint32[2]`` data: hlo's keys are that data already."""
    if impl not in (None, "threefry2x32"):
        raise ValueError(f"hlo.random.wrap_key_data: only impl='threefry2x32' is available, got {impl!r}")
    return _wrap_key_data(key_bits_array)


@api_function
def _wrap_key_data(key_bits_array) -> Tracer:
    return _key("hlo.random.wrap_key_data", key_bits_array)


__all__ = ["exponential", "gumbel", "laplace", "logistic", "cauchy", "lognormal", "pareto", "rayleigh",
           "weibull_min", "triangular", "truncated_normal", "wald", "rademacher", "maxwell",
           "double_sided_maxwell", "geometric", "categorical", "permutation", "choice",
           "multivariate_normal", "orthogonal", "gamma", "loggamma", "beta", "dirichlet", "chisquare",
           "f", "t", "generalized_normal", "ball", "clone", "wrap_key_data", "poisson", "binomial", "multinomial"]
del DTypeError, bits
