"""hlo.random's samplers added for jax's surface (issue 34). Those that transform one uniform or
normal draw follow jax's algorithm on the same bits: for the same key they give jax's values (to
float32 rounding). The gamma family draws differently (a vectorized rejection loop): its
distributions are checked against jax's samples and the known moments."""
import numpy as np
import pytest

import hlo
import hlo.random as hr

jax = pytest.importorskip("jax")
jr = jax.random

KEY = np.array([0, 42], np.uint32)
S = (3, 5)
P3 = np.array([0.5, 1.0, 2.0], np.float32)
LOGITS = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], np.float32))
COV = np.array([[2.0, 0.3], [0.3, 1.0]], np.float32)

SAME_BITS = [
    ("exponential", lambda m, k: m.exponential(k, S)),
    ("gumbel", lambda m, k: m.gumbel(k, S)),
    ("gumbel-high", lambda m, k: m.gumbel(k, S, mode="high")),
    ("laplace", lambda m, k: m.laplace(k, S)),
    ("logistic", lambda m, k: m.logistic(k, S)),
    ("cauchy", lambda m, k: m.cauchy(k, S)),
    ("lognormal", lambda m, k: m.lognormal(k, 0.5, S)),
    ("pareto", lambda m, k: m.pareto(k, P3, (4, 3))),
    ("rayleigh", lambda m, k: m.rayleigh(k, P3)),
    ("weibull_min", lambda m, k: m.weibull_min(k, 2.0, 1.5, S)),
    ("triangular", lambda m, k: m.triangular(k, -1.0, 0.5, 2.0, S)),
    ("truncated_normal", lambda m, k: m.truncated_normal(k, -1.0, P3, (4, 3))),
    ("wald", lambda m, k: m.wald(k, P3, (2, 3))),
    ("rademacher", lambda m, k: m.rademacher(k, S)),
    ("maxwell", lambda m, k: m.maxwell(k, S)),
    ("double_sided_maxwell", lambda m, k: m.double_sided_maxwell(k, 1.0, 2.0, (4,))),
    ("geometric", lambda m, k: m.geometric(k, P3 / 3, (5, 3))),
    ("categorical", lambda m, k: m.categorical(k, LOGITS)),
    ("categorical-shape", lambda m, k: m.categorical(k, LOGITS, axis=-1, shape=(6, 2))),
    ("categorical-no-replace", lambda m, k: m.categorical(k, LOGITS, shape=(2, 2), replace=False)),
    ("choice", lambda m, k: m.choice(k, 10, (4,))),
    ("choice-array-no-replace", lambda m, k: m.choice(k, np.arange(12.0, dtype=np.float32).reshape(6, 2), (3,),
                                                      replace=False)),
    ("choice-p", lambda m, k: m.choice(k, 3, (7,), p=P3 / P3.sum())),
    ("choice-p-no-replace", lambda m, k: m.choice(k, 3, (2,), replace=False, p=P3 / P3.sum())),
    ("permutation", lambda m, k: m.permutation(k, 10)),
    ("permutation-array", lambda m, k: m.permutation(k, np.arange(12).reshape(4, 3), axis=1)),
    ("permutation-independent", lambda m, k: m.permutation(k, np.arange(12).reshape(4, 3), independent=True)),
    ("multivariate_normal", lambda m, k: m.multivariate_normal(k, np.zeros(2, np.float32), COV, (4,))),
    ("orthogonal", lambda m, k: m.orthogonal(k, 3)),
    ("orthogonal-batch", lambda m, k: m.orthogonal(k, 2, (2,))),
    ("poisson", lambda m, k: m.poisson(k, np.array([0.0, 0.5, 3.0, 9.9, 10.0, 25.0, 400.0], np.float32), (3, 7))),
    ("binomial", lambda m, k: m.binomial(k, np.array([5.0, 20.0, 100.0, 1000.0], np.float32),
                                         np.array([0.3, 0.9, 0.05, 0.5], np.float32), (2, 4))),
    ("multinomial", lambda m, k: m.multinomial(k, 50.0, np.array([[0.2, 0.3, 0.5], [0.6, 0.0, 0.4]], np.float32))),
]


@pytest.fixture(scope="module")
def jax_draws():
    """jax's draws for every case from one jax.jit (jax's op-by-op dispatch costs seconds each)."""
    outs = jax.jit(lambda k: [f(jr, k) for _, f in SAME_BITS])(KEY)
    return {name: np.asarray(o) for (name, _), o in zip(SAME_BITS, outs)}


@pytest.mark.parametrize("name, f", SAME_BITS, ids=[c[0] for c in SAME_BITS])
def test_same_key_same_values_as_jax(name, f, jax_draws):
    got = hlo.jit(lambda k: f(hr, k), target="interpreter")(KEY)
    want = jax_draws[name]
    assert got.shape == want.shape and got.dtype.kind == want.dtype.kind, (got.shape, want.shape)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    else:
        np.testing.assert_array_equal(got, want)


def test_the_cpu_backend_draws_the_same(jax_draws):
    cases = SAME_BITS[:6] + SAME_BITS[17:20] + SAME_BITS[24:26]
    outs = hlo.jit(lambda k: [f(hr, k) for _, f in cases])(KEY)
    for (name, _), got in zip(cases, outs):
        np.testing.assert_allclose(got, jax_draws[name], rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_multivariate_normal_has_the_covariance(method):
    mean = np.array([1.0, -2.0], np.float32)
    x = hr.multivariate_normal(KEY, mean, COV, (N,), method=method)
    np.testing.assert_allclose(x.mean(0), mean, atol=0.05)
    np.testing.assert_allclose(np.cov(x.T), COV, atol=0.06)


N = 10000

# (name, draw(m, key), mean, variance) for the gamma family
GAMMA_FAMILY = [
    ("gamma-0.3", lambda m, k: m.gamma(k, 0.3, (N,)), 0.3, 0.3),
    ("gamma-4", lambda m, k: m.gamma(k, 4.0, (N,)), 4.0, 4.0),
    ("loggamma", lambda m, k: m.loggamma(k, 2.5, (N,)), None, None),
    ("beta", lambda m, k: m.beta(k, 2.0, 5.0, (N,)), 2 / 7, 10 / (49 * 8)),
    ("chisquare", lambda m, k: m.chisquare(k, 3.0, (N,)), 3.0, 6.0),
    ("f", lambda m, k: m.f(k, 5.0, 10.0, (N,)), 10 / 8, 2 * 100 * 13 / (5 * 64 * 6)),
    ("t", lambda m, k: m.t(k, 8.0, (N,)), 0.0, 8 / 6),
    ("generalized_normal", lambda m, k: m.generalized_normal(k, 2.0, (N,)), 0.0, 0.5),
]


def _check_family(cases):
    gots = hlo.jit(lambda k: [f(hr, k) for _, f, _, _ in cases])(KEY)
    wants = jax.jit(lambda k: [f(jr, k) for _, f, _, _ in cases])(KEY)
    for (name, _, mean, var), got, want in zip(cases, gots, wants):
        want = np.asarray(want)
        assert got.shape == want.shape and got.dtype == want.dtype, name
        if name == "loggamma":
            got, want, mean, var = np.exp(got), np.exp(want), 2.5, 2.5
        assert abs(got.mean() - mean) < 5 * np.sqrt(var / N), (name, got.mean(), mean)
        assert abs(got.var() / var - 1) < 0.2, (name, got.var(), var)
        qs = [0.1, 0.25, 0.5, 0.75, 0.9]
        np.testing.assert_allclose(np.quantile(got, qs), np.quantile(want, qs), atol=0.06 * np.sqrt(var) + 0.01,
                                   err_msg=name)


def test_gamma_both_branches_and_beta_match_jax_in_distribution():
    # (each rejection loop costs seconds to compile: the whole family is the slow test below)
    _check_family([c for c in GAMMA_FAMILY if c[0] in ("gamma-0.3", "gamma-4", "t")])


@pytest.mark.slow
def test_gamma_family_matches_jax_in_distribution():
    _check_family(GAMMA_FAMILY)


def test_dirichlet_ball_and_the_key_helpers():
    alpha = np.array([0.5, 1.0, 3.0], np.float32)
    d = hr.dirichlet(KEY, alpha, (2000,))
    np.testing.assert_allclose(d.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(d.mean(0), alpha / alpha.sum(), atol=0.02)
    b = hr.ball(KEY, 3, p=1.5, shape=(1000,))
    assert b.shape == (1000, 3) and (np.sum(np.abs(b) ** 1.5, -1) <= 1 + 1e-5).all()
    np.testing.assert_array_equal(hr.clone(KEY), KEY)
    np.testing.assert_array_equal(hr.wrap_key_data(KEY), np.asarray(jr.key_data(jr.wrap_key_data(KEY))))


def test_bad_arguments_say_what_to_pass():
    with pytest.raises(ValueError, match="Cannot take a larger sample"):
        hr.choice(KEY, 3, (4,), replace=False)
    with pytest.raises(ValueError, match="cannot exceed number of"):
        hr.categorical(KEY, LOGITS, shape=(4, 2), replace=False)
    with pytest.raises(ValueError, match=r"cov.shape == \(..., n, n\)"):
        hr.multivariate_normal(KEY, np.zeros(3, np.float32), COV)
    with pytest.raises(TypeError, match="shape argument of hlo.random.choice must be a sequence"):
        hr.choice(KEY, 3, 4)
    with pytest.raises(hlo.errors.ShapeError, match="static integer"):
        hlo.jit(lambda k, n: hr.permutation(k, n))(KEY, np.int32(5))
