"""hlo.lax.igamma, igammac, igamma_grad_a, random_gamma_grad and betainc: the regularized
incomplete gamma and beta functions, ported from jax's own lax implementations (jax/_src/lax/
special.py: Cephes' power series and continued fraction for igamma, the Lentz-Thompson-Barnett
continued fraction of DLMF 8.17.22 for betainc), written with hlo.numpy and hlo.lax.while_loop.
f16/bf16 compute in f32, as jax's do. Above hlo.numpy (reached lazily through hlo.lax)."""
from __future__ import annotations

import numpy as np

from .. import numpy as jnp
from ..autodiff.custom import custom_jvp
from ..tracing.api_util import api_function
from . import control_flow as cf
from .gamma_fns import digamma, lgamma

_VALUE, _DERIVATIVE, _SAMPLE_DERIVATIVE = 1, 2, 3


def _prepare(what, *args):
    arrs = [jnp.asarray(a) for a in args]
    dt = jnp.result_type(*arrs)
    if not jnp.issubdtype(dt, jnp.floating):
        raise TypeError(f"lax.{what}: the operands must be floating point, got {np.dtype(dt).name}")
    cdt = np.dtype(np.float64) if np.dtype(dt) == np.float64 else np.dtype(np.float32)
    arrs = jnp.broadcast_arrays(*[a.astype(cdt) for a in arrs])
    return arrs, dt, cdt


def _c(v, like):
    return jnp.full_like(like, v)


def _igamma_series(ax, x, a, enabled, cdt, mode):
    eps = float(np.finfo(cdt).eps)

    def body(vals):
        en, r, c, ans, xx, dc_da, dans_da = vals
        r1 = r + 1.0
        dc_da1 = dc_da * (xx / r1) - (c * xx) / (r1 * r1)
        dans_da1 = dans_da + dc_da1
        c1 = c * (xx / r1)
        ans1 = ans + c1
        if mode == _VALUE:
            cond = en & (c1 / ans1 > eps)
        else:
            cond = en & (jnp.abs(dc_da1 / dans_da1) > eps)
        return (cond, jnp.where(en, r1, r), jnp.where(en, c1, c), jnp.where(en, ans1, ans),
                xx, jnp.where(en, dc_da1, dc_da), jnp.where(en, dans_da1, dans_da))

    init = (enabled, a, _c(1.0, a), _c(1.0, a), x, _c(0.0, a), _c(0.0, a))
    vals = cf.while_loop(lambda v: jnp.any(v[0]), body, init)
    ans, dans_da = vals[3], vals[6]
    if mode == _VALUE:
        return (ans * ax) / a
    dlogax_da = jnp.log(x) - digamma(a + 1.0)
    if mode == _DERIVATIVE:
        return ax * (ans * dlogax_da + dans_da) / a
    return -(dans_da + ans * dlogax_da) * x / a


def _igammac_cf(ax, x, a, enabled, cdt, mode):
    eps = float(np.finfo(cdt).eps)

    def body(vals):
        (en, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2, dpkm2, dqkm2, dpkm1, dqkm1, dans) = vals
        c1 = c + 1.0
        y1 = y + 1.0
        z1 = z + 2.0
        yc = y1 * c1
        pk = pkm1 * z1 - pkm2 * yc
        qk = qkm1 * z1 - qkm2 * yc
        nz = qk != 0.0
        r = pk / jnp.where(nz, qk, 1.0)
        t1 = jnp.where(nz, jnp.abs((ans - r) / r), 1.0)
        ans1 = jnp.where(nz, r, ans)
        dpk = dpkm1 * z1 - pkm1 - dpkm2 * yc + pkm2 * c1
        dqk = dqkm1 * z1 - qkm1 - dqkm2 * yc + qkm2 * c1
        dans1 = jnp.where(nz, (dpk - ans1 * dqk) / jnp.where(nz, qk, 1.0), dans)
        gcond = jnp.where(nz, jnp.abs(dans1 - dans), 1.0)
        npkm2, npkm1, nqkm2, nqkm1 = pkm1, pk, qkm1, qk
        ndpkm2, ndqkm2, ndpkm1, ndqkm1 = dpkm1, dqkm1, dpk, dqk
        rescale = jnp.abs(pk) > 1.0 / eps
        npkm2, npkm1, nqkm2, nqkm1, ndpkm2, ndqkm2, ndpkm1, ndqkm1 = (
            jnp.where(rescale, v * eps, v)
            for v in (npkm2, npkm1, nqkm2, nqkm1, ndpkm2, ndqkm2, ndpkm1, ndqkm1))
        cond = en & ((t1 > eps) if mode == _VALUE else (gcond > eps))
        new = (ans1, t1, y1, z1)
        old = (ans, t, y, z)
        rest_new = (npkm1, nqkm1, npkm2, nqkm2, ndpkm2, ndqkm2, ndpkm1, ndqkm1, dans1)
        rest_old = (pkm1, qkm1, pkm2, qkm2, dpkm2, dqkm2, dpkm1, dqkm1, dans)
        return ((cond,) + tuple(jnp.where(en, n, o) for n, o in zip(new, old)) + (c1,)
                + tuple(jnp.where(en, n, o) for n, o in zip(rest_new, rest_old)))

    y = 1.0 - a
    z = x + y + 1.0
    pkm1 = x + 1.0
    qkm1 = z * x
    ans = pkm1 / qkm1
    dqkm1 = -x
    dans = (0.0 - ans * dqkm1) / qkm1
    zero = _c(0.0, x)
    init = (enabled, ans, _c(1.0, x), y, z, jnp.zeros((), cdt), pkm1, qkm1, _c(1.0, x), x,
            zero, zero, zero, dqkm1, dans)
    vals = cf.while_loop(lambda v: (v[5] < 2000.0) & jnp.any(v[0]), body, init)
    ans = vals[1]
    if mode == _VALUE:
        return ans * ax
    dlogax_da = jnp.log(x) - digamma(a)
    if mode == _DERIVATIVE:
        return ax * (ans * dlogax_da + vals[14])
    return -(vals[14] + ans * dlogax_da) * x


def _ax(a, x, cdt):
    ax = a * jnp.log(x) - x - lgamma(a)
    underflow = ax < -float(np.log(np.finfo(cdt).max))
    return jnp.exp(ax), underflow


def _igamma(a, x):
    cdt = np.dtype(a.dtype)
    is_nan = jnp.isnan(a) | jnp.isnan(x)
    x_inf = x == np.inf
    a_zero, x_zero = a == 0.0, x == 0.0
    domain = (x < 0.0) | (a < 0.0) | (a_zero & x_zero) | is_nan
    use_c = (x >= 1.0) & (x > a)
    ax, underflow = _ax(a, x, cdt)
    enabled = ~(x_zero | domain | underflow | x_inf)
    out = jnp.where(use_c, 1.0 - _igammac_cf(ax, x, a, enabled & use_c, cdt, _VALUE),
                    _igamma_series(ax, x, a, enabled & ~use_c, cdt, _VALUE))
    out = jnp.where(x_zero, 0.0, out)
    out = jnp.where(x_inf, 1.0, out)
    return jnp.where(domain, np.nan, out)


def _igammac(a, x):
    cdt = np.dtype(a.dtype)
    is_nan = jnp.isnan(a) | jnp.isnan(x)
    a_zero, x_zero, x_inf = a == 0.0, x == 0.0, x == np.inf
    domain = (x < 0.0) | (a < 0.0) | (a_zero & x_zero) | is_nan
    use_p = (x < 1.0) | (x < a)
    ax, underflow = _ax(a, x, cdt)
    enabled = ~(domain | underflow | x_inf | a_zero)
    out = jnp.where(use_p, 1.0 - _igamma_series(ax, x, a, enabled & use_p, cdt, _VALUE),
                    _igammac_cf(ax, x, a, enabled & ~use_p, cdt, _VALUE))
    out = jnp.where(x_inf | a_zero, 0.0, out)
    return jnp.where(domain, np.nan, out)


# The derivatives jax gives them: d/dx from the density, d/da by the series' own derivative
# (the loops' trip counts depend on the values, so reverse mode cannot go through them)
_igamma_c, _igammac_c = custom_jvp(_igamma), custom_jvp(_igammac)


def _density(a, x):
    return jnp.exp(-x + (a - 1.0) * jnp.log(x) - lgamma(a))


@_igamma_c.defjvp
def _igamma_jvp(primals, tangents):
    a, x = primals
    return _igamma(a, x), tangents[0] * _grad_a_impl(a, x, _DERIVATIVE) + tangents[1] * _density(a, x)


@_igammac_c.defjvp
def _igammac_jvp(primals, tangents):
    a, x = primals
    return _igammac(a, x), -(tangents[0] * _grad_a_impl(a, x, _DERIVATIVE) + tangents[1] * _density(a, x))


@api_function
def igamma(a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    (a, x), dt, _ = _prepare("igamma", a, x)
    return _igamma_c(a, x).astype(dt)


@api_function
def igammac(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    (a, x), dt, _ = _prepare("igammac", a, x)
    return _igammac_c(a, x).astype(dt)


def _grad_a(what, a, x, mode):
    (a, x), dt, _ = _prepare(what, a, x)
    return _grad_a_impl(a, x, mode).astype(dt)


def _grad_a_impl(a, x, mode):
    cdt = np.dtype(a.dtype)
    is_nan = jnp.isnan(a) | jnp.isnan(x)
    x_zero = x == 0.0
    domain = (x < 0.0) | (a <= 0.0)
    use_c = (x > 1.0) & (x > a)
    ax, underflow = _ax(a, x, cdt)
    enabled = ~(x_zero | domain | underflow | is_nan)
    out = jnp.where(use_c, -_igammac_cf(ax, x, a, enabled & use_c, cdt, mode),
                    _igamma_series(ax, x, a, enabled & ~use_c, cdt, mode))
    out = jnp.where(x_zero, 0.0, out)
    return jnp.where(domain | is_nan, np.nan, out)


@api_function
def igamma_grad_a(a, x):
    """d P(a, x) / d a."""
    return _grad_a("igamma_grad_a", a, x, _DERIVATIVE)


@api_function
def random_gamma_grad(a, x):
    """d x / d a for a sample x of Gamma(a) (the implicit reparameterization gradient)."""
    return _grad_a("random_gamma_grad", a, x, _SAMPLE_DERIVATIVE)


@api_function
def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    (a, b, x), dt, cdt = _prepare("betainc", a, b, x)
    eps = float(np.finfo(cdt).eps)
    small = eps / 2
    a_zero = (a == 0.0) | (b == np.inf)
    b_zero = (b == 0.0) | (a == np.inf)
    x_zero, x_one = x == 0.0, x == 1.0
    is_nan = jnp.isnan(a) | jnp.isnan(b) | jnp.isnan(x)
    res_zero = (b_zero & ~x_one) | (a_zero & x_zero)
    res_one = (a_zero & ~x_zero) | (b_zero & x_one)
    res_nan = (a < 0.0) | (b < 0.0) | (x < 0.0) | (x > 1.0) | (a_zero & b_zero) | is_nan
    fast = x < (a + 1.0) / (a + b + 2.0)
    a, b = jnp.where(fast, a, b), jnp.where(fast, b, a)
    x = jnp.where(fast, x, 1.0 - x)

    def numerator(it):  # DLMF 8.17.23 (the first one is 1)
        m = jnp.asarray((it - 1) // 2).astype(cdt)
        zero_num = -(a + b) * x / (a + 1.0)
        even = jnp.where(m == 0.0, zero_num,
                         -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)))
        odd = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m))
        return jnp.where(it == 1, 1.0, jnp.where(it % 2 == 0, even, odd))

    def denominator(it):
        return jnp.where(it == 0, 0.0, 1.0) + jnp.zeros_like(x)

    def body(vals):
        it, _, c, d, h = vals
        pn, pd = numerator(it), denominator(it)
        c = pd + pn / c
        c = jnp.where(jnp.abs(c) < small, small, c)
        d = pd + pn * d
        d = 1.0 / jnp.where(jnp.abs(d) < small, small, d)
        delta = c * d
        return it + 1, jnp.any(jnp.abs(delta - 1.0) >= small), c, d, h * delta

    h0 = jnp.full_like(x, small)  # the 0th partial denominator is 0: below `small`
    iters = 200 if cdt == np.float32 else 600
    vals = cf.while_loop(lambda v: (v[0] < iters) & v[1], body,
                         (jnp.asarray(1, np.int32), jnp.asarray(True), h0, jnp.zeros_like(x), h0))
    cfrac = vals[4]
    very_small = float(np.finfo(cdt).tiny) * 2
    lbeta_small_a = lgamma(b) - lgamma(a + b)
    lbeta = lgamma(a) + lbeta_small_a
    factor = jnp.where(a < very_small, jnp.exp(jnp.log1p(-x) * b - lbeta_small_a),
                       jnp.exp(jnp.log(x) * a + jnp.log1p(-x) * b - lbeta) / a)
    res = cfrac * factor
    res = jnp.where(fast, res, 1.0 - res)
    res = jnp.where(res_zero, 0.0, res)
    res = jnp.where(res_one, 1.0, res)
    return jnp.where(res_nan, np.nan, res).astype(dt)
