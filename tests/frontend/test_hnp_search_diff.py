"""hlo.numpy's searchsorted, digitize, interp, unique(size=), diff, ediff1d and cross against
numpy and jax.numpy, on every target."""
import jax.numpy as jnp
import numpy as np
import pytest
from frontend_util import assert_same, compare, hlo_run, jax_run
from hypothesis import given, settings
from hypothesis import strategies as st

import hlo
import hlo.numpy as hnp


def _sorted_with_ties(rng, n, dtype):
    a = np.sort(rng.integers(-5, 6, size=n).astype(dtype) * 0.5).astype(dtype)
    return a


@pytest.mark.parametrize("n", [0, 7, 100])  # 100: binary search; others compare-all
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_searchsorted_matches_numpy(target, n, dtype):
    rng = np.random.default_rng(n)
    a = _sorted_with_ties(rng, n, dtype) if dtype == np.float32 else np.sort(rng.integers(-9, 9, n)).astype(dtype)
    v = (rng.integers(-12, 12, size=(3, 5)) * 0.5).astype(dtype)
    if n:
        v[0, :min(n, 5)] = a[:min(n, 5)]  # exact hits, to check the sides on ties
    got = hlo_run(lambda a, v: (hnp.searchsorted(a, v), hnp.searchsorted(a, v, side="right")), (a, v), target)
    want = (np.searchsorted(a, v).astype(np.int32), np.searchsorted(a, v, side="right").astype(np.int32))
    assert_same(got, want)


def test_searchsorted_methods_agree_and_nans_sort_last(target):
    a = np.array([-np.inf, -1.0, 0.0, 0.0, 2.5, np.inf, np.nan, np.nan], np.float32)
    v = np.array([np.nan, -np.inf, np.inf, 0.0, -0.0, 1.0, 9.0], np.float32)
    for side in ("left", "right"):
        want = np.searchsorted(a, v, side=side).astype(np.int32)
        for method in ("scan", "compare_all"):
            got = hlo_run(lambda a, v: hnp.searchsorted(a, v, side=side, method=method), (a, v), target)
            assert_same(got, want, what=f"{side}/{method}")
    big = np.concatenate([np.linspace(-5, 5, 60, dtype=np.float32), [np.nan] * 4])
    for side in ("left", "right"):
        got = hlo_run(lambda a, v: hnp.searchsorted(a, v, side=side), (big, v), target)
        assert_same(got, np.searchsorted(big, v, side=side).astype(np.int32))


def test_searchsorted_sorter_and_jax(target):
    rng = np.random.default_rng(3)
    a = rng.standard_normal(50).astype(np.float64)
    v = rng.standard_normal((4, 6)).astype(np.float64)
    order = np.argsort(a).astype(np.int32)
    got = hlo_run(lambda a, v, s: hnp.searchsorted(a, v, sorter=s), (a, v, order), target)
    want = jax_run(lambda a, v, s: jnp.searchsorted(a, v, sorter=s), (a, v, order))
    assert_same(got, want.astype(np.int32))


@settings(max_examples=8, deadline=None)
@given(st.lists(st.integers(-6, 6), min_size=1, max_size=70), st.lists(st.integers(-7, 7), min_size=1, max_size=9),
       st.sampled_from(["left", "right"]))
def test_searchsorted_hypothesis(a, v, side):
    a = np.sort(np.array(a, np.float32))
    v = np.array(v, np.float32)
    got = hlo.jit(lambda a, v: hnp.searchsorted(a, v, side=side), target="cpu")(a, v)
    np.testing.assert_array_equal(got, np.searchsorted(a, v, side=side))


def test_digitize(target):
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.5, 10.0], np.float32)
    inc = np.array([0.0, 1.0, 2.0, 3.0], np.float32)
    dec = inc[::-1].copy()
    for bins in (inc, dec):
        for right in (False, True):
            got = hlo_run(lambda x, b: hnp.digitize(x, b, right=right), (x, bins), target)
            assert_same(got, np.digitize(x, bins, right=right).astype(np.int32), what=f"{bins} {right}")


def test_interp(target):
    rng = np.random.default_rng(5)
    xp = np.sort(rng.uniform(-3, 3, 12)).astype(np.float32)
    fp = rng.standard_normal(12).astype(np.float32)
    x = np.concatenate([rng.uniform(-4, 4, 20), xp[:3], [-10.0, 10.0]]).astype(np.float32)
    compare(lambda x, xp, fp: hnp.interp(x, xp, fp), lambda x, xp, fp: jnp.interp(x, xp, fp),
            (x, xp, fp), target, rtol=1e-5, atol=1e-5)
    got = hlo_run(lambda x, xp, fp: hnp.interp(x, xp, fp, left=-7.0, right=7.0), (x, xp, fp), target)
    np.testing.assert_allclose(got, np.interp(x, xp, fp, left=-7.0, right=7.0), rtol=1e-5, atol=1e-5)


def test_unique_with_size_and_without(target):
    x = np.array([3, 1, 3, 2, 1, 7, 7, 7], np.int32)
    got = hlo_run(lambda x: hnp.unique(x, size=6), (x,), target)
    want = jax_run(lambda x: jnp.unique(x, size=6), (x,))
    assert_same(got, want.astype(np.int32))
    got = hlo_run(lambda x: hnp.unique(x, size=2, fill_value=-1), (x,), target)
    np.testing.assert_array_equal(got, [1, 2])
    f = np.array([np.nan, 1.0, np.nan, 0.5], np.float32)
    got = hlo_run(lambda x: hnp.unique(x, size=4, fill_value=9.0), (f,), target)
    np.testing.assert_array_equal(got, np.array([0.5, 1.0, np.nan, 9.0], np.float32))


def test_unique_without_size_explains():
    with pytest.raises(NotImplementedError, match=r"test_hnp_search_diff.py:\d+: unique: .*size=N"):
        hlo.jit(lambda x: hnp.unique(x))(np.arange(4))


@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.bool_])
def test_diff_matches_numpy(target, dtype):
    rng = np.random.default_rng(7)
    x = (rng.integers(0, 2, size=(3, 6)) if dtype == np.bool_ else rng.integers(-9, 9, size=(3, 6))).astype(dtype)

    def table(np_, x):
        out = {"d1": np_.diff(x), "d2": np_.diff(x, n=2), "ax0": np_.diff(x, axis=0),
               "n0": np_.diff(x, n=0), "n9": np_.diff(x, n=9)}
        if dtype != np.bool_:
            out["pre"] = np_.diff(x, prepend=x[:, :1], append=x[:, -1:])
            out["pre_scalar"] = np_.diff(x, axis=0, prepend=1, append=2)
            out["e1d"] = np_.ediff1d(x, to_begin=np.array([5, 6], dtype), to_end=3)
        return out

    got = hlo_run(lambda x: table(hnp, x), (x,), target)
    assert_same(got, table(np, x), check_dtype=False)  # numpy promotes scalar prepend= to 64 bits
    assert_same(got, jax_run(lambda x: table(jnp, x), (x,)))


def test_diff_errors():
    with pytest.raises(ValueError, match="test_hnp_search_diff.py:\\d+: diff requires"):
        hlo.jit(lambda x: hnp.diff(x))(np.float32(1))
    with pytest.raises(ValueError, match="order n must be non-negative"):
        hlo.jit(lambda x: hnp.diff(x, n=-1))(np.ones(3))


@pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors")
def test_cross(target):
    rng = np.random.default_rng(9)
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((4, 3)).astype(np.float32)
    a2 = rng.standard_normal((4, 2)).astype(np.float32)
    at = rng.standard_normal((3, 4)).astype(np.float32)

    def table(np_, a, b, a2, at):
        return {"33": np_.cross(a, b), "23": np_.cross(a2, b), "axes": np_.cross(at, b, axisa=0),
                "axisc": np_.cross(a, b, axisc=0), "bcast": np_.cross(a[:1], b)}

    got = hlo_run(lambda *t: table(hnp, *t), (a, b, a2, at), target)
    # numpy 2.5 dropped 2-vectors (deprecated since 2.0; jax.numpy keeps them): the reference
    # takes a2's z component as 0, which is what a 2-vector meant
    want = table(np, a, b, np.pad(a2, ((0, 0), (0, 1))), at)
    assert_same(got, want, rtol=1e-5, atol=1e-6)
    got = hlo_run(lambda a, b: hnp.cross(a, b), (a2, a2[::-1].copy()), target)
    np.testing.assert_allclose(got, a2[:, 0] * a2[::-1, 1] - a2[:, 1] * a2[::-1, 0], rtol=1e-6)
    with pytest.raises(ValueError, match="dimension must be 2 or 3"):
        hlo.jit(lambda a: hnp.cross(a, a))(np.ones((2, 4), np.float32))
