"""hlo.numpy reductions against jax.numpy: every reduction with axis None / int / negative /
tuple and keepdims, over float, integer and boolean dtypes (result dtypes included)."""
import jax.numpy as jnp
import numpy as np
import pytest
from frontend_util import BF16, assert_same, compare, hlo_run, jax_run, rand, stable_seed

import hlo.numpy as hnp

AXES = [None, -1, (0, 2)]


def _table(np_, x, float_input):
    out = {}
    for ax in AXES:
        out[f"sum{ax}"] = np_.sum(x, axis=ax)
        out[f"max{ax}"] = np_.max(x, axis=ax)
        out[f"min{ax}"] = np_.min(x, axis=ax)
        out[f"any{ax}"] = np_.any(x, axis=ax)
        out[f"all{ax}"] = np_.all(x, axis=ax)
        out[f"mean{ax}"] = np_.mean(x, axis=ax)
        out[f"prod{ax}"] = np_.prod(x, axis=ax)
        out[f"var{ax}"] = np_.var(x, axis=ax)
        out[f"std{ax}"] = np_.std(x, axis=ax, ddof=1 if ax == -1 else 0)
        out[f"count_nonzero{ax}"] = np_.count_nonzero(x, axis=ax)
        if x.dtype != np.bool_:  # numpy and jax refuse ptp (a subtraction) of bools
            out[f"ptp{ax}"] = np_.ptp(x, axis=ax)
    out["sum_keep"] = np_.sum(x, axis=(0, 1), keepdims=True)
    out["max_keep"] = np_.max(x, axis=1, keepdims=True)
    out["mean_keep"] = np_.mean(x, axis=None, keepdims=True)
    for ax in (None, 0, -1):
        out[f"argmax{ax}"] = np_.argmax(x, axis=ax)
        out[f"argmin{ax}"] = np_.argmin(x, axis=ax)
        out[f"cumsum{ax}"] = np_.cumsum(x, axis=ax)
        out[f"cumprod{ax}"] = np_.cumprod(x, axis=ax)
    out["argmax_keep"] = np_.argmax(x, axis=1, keepdims=True)
    return out


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "int8", "uint32",
                                   "bool"])
def test_reductions(target, dtype):
    rng = np.random.default_rng(stable_seed(dtype))
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    if dt.kind in "iu":
        x = rand(rng, (3, 4, 2), dt, 0 if dt.kind == "u" else -3, 4)
    else:
        x = rand(rng, (3, 4, 2), dt)
    isf = dt.kind == "f" or dt == BF16
    got = hlo_run(lambda x: _table(hnp, x, isf), (x,), target)
    want = jax_run(lambda x: _table(jnp, x, isf), (x,))
    tol = {np.dtype(np.float16): 5e-3, BF16: 3e-2}.get(dt, 2e-6 if dt != np.float64 else 1e-12)
    for k in want:
        w = want[k]
        if k.startswith(("argmax", "argmin", "count_nonzero")) and dt.itemsize == 8:
            w = w.astype(np.int32)  # hlo's indices are int32; jax's x64 mode makes them int64
        assert_same(got[k], w, rtol=tol, atol=tol, what=k)


def test_reduction_options(target):
    rng = np.random.default_rng(1)
    x = rand(rng, (4, 5), "float32")
    m = rng.random((4, 5)) < 0.6
    m[:, 0] = True
    xi = rand(rng, (4, 5), "int8")

    def f(np_):
        return lambda x, xi: {
            "sum_dtype": np_.sum(xi, dtype=np_.int8), "sum_f": np_.sum(xi, axis=0, dtype=np_.float32),
            "sum_initial": np_.sum(x, axis=1, initial=10.0), "sum_where": np_.sum(x, axis=1, where=m),
            "max_initial": np_.max(x, axis=0, initial=0.5), "mean_where": np_.mean(x, axis=1, where=m),
            "var_ddof": np_.var(x, axis=0, ddof=2), "mean_int_dtype": np_.mean(xi, dtype=np_.float32),
            "prod_keep": np_.prod(x, axis=(0, 1), keepdims=True),
            "cumsum_dtype": np_.cumsum(xi, axis=1, dtype=np_.int32),
            "nansum": np_.nansum(np_.where(x > 1, np.nan, x), axis=0),
            "nanmax": np_.nanmax(np_.where(x > 1, np.nan, x), axis=1),
            "nanmean": np_.nanmean(np_.where(x > 1, np.nan, x), axis=1),
            "average": np_.average(x, axis=1, weights=np.arange(1.0, 6.0, dtype=np.float32)),
            "average_full": np_.average(x, weights=np_.abs(x)),
        }
    compare(f(hnp), f(jnp), (x, xi), target, rtol=2e-6, atol=2e-6)


def test_nan_propagation(target):
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -1.0], [np.nan, np.nan, 0.0]], np.float32)

    def f(np_):
        return lambda x: {"max": np_.max(x, axis=1), "min": np_.min(x, axis=0), "argmax": np_.argmax(x, axis=1),
                          "argmin": np_.argmin(x, axis=0), "sum": np_.sum(x, axis=1)}
    compare(f(hnp), f(jnp), (x,), target)


def test_empty_reductions(target):
    x = np.zeros((0, 3), np.float32)
    got = hlo_run(lambda x: (hnp.sum(x, axis=0), hnp.prod(x), hnp.max(x, axis=0, initial=-1.0),
                             hnp.any(x), hnp.all(x)), (x,), target)
    np.testing.assert_array_equal(got[0], np.zeros(3))
    assert got[1] == 1 and got[3] == False and got[4] == True
    np.testing.assert_array_equal(got[2], -np.ones(3))
    with pytest.raises(ValueError, match="zero-size"):
        hlo_run(lambda x: hnp.max(x, axis=0), (x,), target)


def _median_case(np_):
    return lambda x: {"axis1": np_.median(x, axis=1), "all": np_.median(x),
                      "nan": np_.median(np_.where(x > 1, np.nan, x), axis=1),
                      "axes": np_.median(x, axis=(0, 2)), "keep": np_.median(x, axis=0, keepdims=True)}


@pytest.mark.parametrize("dtype", ["float32", "int32", "float16"])
def test_median(target, dtype):
    x = rand(np.random.default_rng(4), (3, 4, 2), dtype)
    compare(_median_case(hnp), _median_case(jnp), (x,), target, rtol=5e-3 if dtype == "float16" else 2e-6)


def test_median_next_to_a_sum_over_the_same_axis(target):
    """Regression: on the cpu backend, a median (sort + gathers) and a sum over the same axis in
    one program gave wrong medians: the sum was written over a gathered value the median still
    read (tests/backends/test_cpu_regressions.py)."""
    x = rand(np.random.default_rng(0), (3, 4, 2), "float32")
    got = hlo_run(lambda x: (hnp.median(x, axis=1), hnp.sum(x, axis=1)), (x,), target)
    np.testing.assert_allclose(got[0], np.median(x, axis=1), rtol=1e-6)
    np.testing.assert_allclose(got[1], np.sum(x, axis=1), rtol=1e-5)


@pytest.mark.parametrize("fn", ["sum", "prod"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_sum_and_prod_accumulate_in_f32(fn, dtype):
    """f16/bf16 sums and products accumulate in f32 and round once (as jax.numpy does): over
    400 random (3, 4, 2) inputs each result is the float64 value rounded to the dtype, within
    one rounding of the f32 accumulation. A bf16 running sum was off by up to 0.14."""
    import hlo
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    f = hlo.jit(getattr(hnp, fn), target="cpu")
    rng = np.random.default_rng(7)
    for _ in range(400):
        x = rng.standard_normal((3, 4, 2)).astype(dt)
        if fn == "prod":
            x = (x.astype(np.float64) * 0.25 + 1.0).astype(dt)   # products near 1, no underflow
        exact = getattr(np, fn)(x.astype(np.float64))
        got = np.asarray(f(x)).astype(np.float64)
        want = np.asarray(exact).astype(dt).astype(np.float64)
        ulp = float(np.spacing(np.asarray(abs(want), dt).astype(np.float32))) if want else 0.0
        assert abs(got - want) <= ulp + 1e-6 * abs(exact), (x, got, want)
