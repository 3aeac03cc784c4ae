"""hlo.lax's incomplete gamma and beta functions, zeta, polygamma and bessel_i1e (issue 34),
against jax.lax in float32 and float64: values across the series / continued-fraction switch
points, the edges (0, 1, inf, poles, the domain's NaNs) and f16 in and out."""
import numpy as np
import pytest

import hlo
import hlo.lax as hl

jax = pytest.importorskip("jax")

A = [0.5, 1.0, 2.5, 10.0, 0.1, 30.0, 3.0, 0.0, -1.0, 2.0, 1e-3, 200.0]
X = [0.3, 1.0, 4.0, 9.0, 0.01, 35.0, 0.0, 1.0, 1.0, np.inf, 2.0, 180.0]
BA = [1.5, 2.0, 0.5, 5.0, 3.0, 1.0, 2.0, 0.0, 1.0, 4.0, 60.0, 0.2]
BB = [1.0, 2.0, 0.5, 5.0, 3.0, 1.0, 2.0, 1.0, np.inf, 4.0, 0.7, 30.0]
BX = [0.2, 0.5, 0.9, 0.3, 0.99, 0.0, 1.0, 0.5, 0.5, 0.7, 0.95, 1e-3]
ZX = [2.0, 1.5, 3.0, 1.0, 0.5, 10.0, 2.0, 2.0, 4.0, 2.5, 60.0, 2.5]
ZQ = [1.0, 0.3, 12.5, 2.0, 1.0, 1.0, -1.0, -1.5, 0.01, 100.0, 2.0, -1.5]
PM = [0.0, 1.0, 2.0, 3.0, 1.0, 4.0, 1.5, -1.0, 2.0, 0.0, 5.0, 1.0]
PX = [0.5, 2.0, 3.5, 0.2, 50.0, 1.0, 1.0, 1.0, -1.5, -2.0, 7.0, -0.5]
IX = [0.0, 1e-3, -0.5, 1.0, 3.0, -7.5, 15.0, 29.9, 30.0, 31.0, 100.0, -1e4, np.inf, np.nan]

CASES = {  # name: (hlo function, jax function, operands)
    "igamma": (lambda a, x: hl.igamma(a, x), lambda a, x: jax.lax.igamma(a, x), (A, X)),
    "igammac": (lambda a, x: hl.igammac(a, x), lambda a, x: jax.lax.igammac(a, x), (A, X)),
    "igamma_grad_a": (lambda a, x: hl.igamma_grad_a(a, x), lambda a, x: jax.lax.igamma_grad_a(a, x), (A, X)),
    "random_gamma_grad": (lambda a, x: hl.random_gamma_grad(a, x),
                          lambda a, x: jax.lax.random_gamma_grad(a, x), (A, X)),
    "betainc": (lambda a, b, x: hl.betainc(a, b, x), lambda a, b, x: jax.lax.betainc(a, b, x), (BA, BB, BX)),
    "zeta": (lambda x, q: hl.zeta(x, q), lambda x, q: jax.lax.zeta(x, q), (ZX, ZQ)),
    "polygamma": (lambda m, x: hl.polygamma(m, x), lambda m, x: jax.lax.polygamma(m, x), (PM, PX)),
    "bessel_i1e": (lambda x: hl.bessel_i1e(x), lambda x: jax.lax.bessel_i1e(x), (IX,)),
}
# f32: at a = 200, x = 180 the prefactor exp(a log x - x - lgamma(a)) cancels ~860 to -2.6, so one
# ulp of lgamma (6e-5) is the relative error of both jax's and hlo's (scipy's f64: 0.0748580;
# jax f32 0.0748591, hlo f32 0.0748637)
RTOL = {np.float32: 1e-4, np.float64: 2e-13}


def _args(dt):
    return {n: [np.array(o, dt) for o in ops] for n, (_, _, ops) in CASES.items()}


@pytest.fixture(scope="module", params=[np.float32, np.float64], ids=["f32", "f64"])
def refs(request):
    """Every case's jax.lax result, from one jax.jit per dtype."""
    dt = request.param
    args = _args(dt)
    with jax.enable_x64(dt == np.float64):
        outs = jax.jit(lambda d: {n: CASES[n][1](*d[n]) for n in CASES})(args)
    return dt, args, {n: np.asarray(v) for n, v in outs.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_jax(refs, name):
    dt, args, want = refs
    got = hlo.jit(CASES[name][0])(*args[name])
    assert got.dtype == dt
    np.testing.assert_allclose(got, want[name], rtol=RTOL[dt], atol=1e-30)


def test_half_precision_computes_in_f32_and_errors_are_clear():
    x = np.array([0.5, 2.0, 8.0], np.float16)
    got = hlo.jit(hl.igamma)(x, x)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, np.asarray(jax.lax.igamma(x, x)), rtol=2e-3)
    with pytest.raises(TypeError, match="lax.zeta: the operands must be floating point"):
        hl.zeta(np.array([2, 3], np.int32), np.array([1, 1], np.int32))


def test_gradients_flow_through_the_series():
    a, x = np.array([0.7, 3.0, 6.0]), np.array([0.5, 4.0, 2.0])
    g = hlo.grad(lambda v: hl.igamma(a, v).sum())(x)  # (a custom rule, as jax's)
    np.testing.assert_allclose(g, np.asarray(jax.grad(lambda v: jax.lax.igamma(a.astype(np.float32),
                                                                                 v).sum())(x.astype(np.float32))),
                               rtol=1e-4)
    g = hlo.grad(lambda v: hl.bessel_i1e(v).sum())(x)
    np.testing.assert_allclose(g, np.asarray(jax.grad(lambda v: jax.lax.bessel_i1e(v).sum())(x.astype(np.float32))),
                               rtol=1e-4)
    ga = hlo.grad(lambda u: hl.igammac(u, x).sum())(a)
    np.testing.assert_allclose(ga, np.asarray(jax.grad(lambda u: jax.lax.igammac(u, x.astype(np.float32)).sum())(
        a.astype(np.float32))), rtol=1e-4)


@pytest.mark.parametrize("sizes", [[2, 0, 3, 1], [6, 0, 0, 0], [1, 1, 1, 0]])  # the last: rows past the groups
def test_ragged_dot_matches_jax(sizes):
    R = np.random.default_rng(1)
    lhs = R.standard_normal((6, 5)).astype(np.float32)
    rhs = R.standard_normal((4, 5, 3)).astype(np.float32)
    gs = np.array(sizes, np.int32)
    got = hlo.jit(lambda a, b, g: hl.ragged_dot(a, b, g))(lhs, rhs, gs)
    np.testing.assert_allclose(got, np.asarray(jax.lax.ragged_dot(lhs, rhs, gs)), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="lax.ragged_dot: lhs .* disagree"):
        hl.ragged_dot(lhs, rhs[:3], gs)
