"""hlo.lax's functions added for jax's surface (issue 34), each against jax.lax."""
import numpy as np
import pytest

import hlo
import hlo.lax as hl

jax = pytest.importorskip("jax")

R = np.random.default_rng(0)


@pytest.mark.parametrize("x, k", [
    (R.standard_normal((3, 7)).astype(np.float32), 3),
    (R.integers(0, 4, (2, 2, 9)).astype(np.int32), 4),  # ties: the lower index first
    (np.array([1.0, np.nan, -np.inf, 3.0, np.inf], np.float32), 5),
    (R.standard_normal(6).astype(np.float64), 0),
])
def test_top_k_matches_jax(x, k):
    v, i = hlo.jit(lambda a: hl.top_k(a, k))(x)
    jv, ji = jax.lax.top_k(x, k)
    np.testing.assert_array_equal(v, np.asarray(jv).astype(x.dtype) if x.dtype != np.float64 else np.sort(x)[::-1][:k])
    assert i.dtype == np.int32
    if x.dtype != np.float64:
        np.testing.assert_array_equal(i, ji)


def test_top_k_errors_and_gradient():
    with pytest.raises(ValueError, match="k must be between 0"):
        hl.top_k(np.ones(3, np.float32), 4)
    x = R.standard_normal(8).astype(np.float32)
    g = hlo.grad(lambda a: hl.top_k(a, 3)[0].sum())(x)
    np.testing.assert_array_equal(g, jax.grad(lambda a: jax.lax.top_k(a, 3)[0].sum())(x))
