"""Interpreter: reduce and reduce_window (fast paths, generic bodies evaluated on batches,
element-by-element fallback, variadic bodies, bodies reading enclosing values)."""
from __future__ import annotations

import numpy as np
import pytest
from interp_helpers import BF16, FLOATS, INTS, assert_same, body, module_from, region, run_op, sample

from hlo.ir import scalar, tensor
from hlo.ir.interpreter import run

jax = pytest.importorskip("jax")
lax = jax.lax


def _reduce(x, init, op_name, dims, dtype=None):
    dt = np.dtype(dtype or x.dtype)
    return run_op("reduce", x, np.array(init, dt), attrs={"dimensions": dims},
                  regions=[body(op_name, dt)])


def _unbatchable_add(dt):
    """add, but through a rank-1 reshape, which forces element-by-element evaluation."""
    def fn(b, x, y):
        s = b.value("add", [x, y])
        r = b.value("reshape", [s], result_types=[tensor((1,), dt)])
        return [b.value("reshape", [r], result_types=[tensor((), dt)])]
    return region([dt, dt], fn)


@pytest.mark.parametrize("dt", INTS, ids=str)
@pytest.mark.parametrize("name,npf", [("add", np.add), ("multiply", np.multiply),
                                      ("maximum", np.maximum), ("minimum", np.minimum),
                                      ("xor", np.bitwise_xor)])
def test_integer_reduce_is_exact_and_wraps(dt, name, npf):
    rng = np.random.default_rng(0)
    x = sample(rng, dt, (6, 7, 5))
    init = {"add": 0, "multiply": 1, "xor": 0, "maximum": np.iinfo(dt).min, "minimum": np.iinfo(dt).max}[name]
    got = _reduce(x, init, name, [0, 2])
    want = npf.reduce(npf.reduce(x, axis=2, dtype=dt), axis=0, dtype=dt)
    assert_same(got, want)


def test_bool_reduce():
    x = np.array([[True, False, False], [False, False, False]])
    assert_same(_reduce(x, False, "or", [1]), np.array([True, False]))
    assert_same(_reduce(x, True, "and", [1]), np.array([False, False]))
    assert_same(_reduce(x, False, "add", [0]), np.array([True, False, False]))


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_float_sum_close_to_float64(dt):
    rng = np.random.default_rng(1)
    x = sample(rng, dt, (5, 300), specials=False)
    got = _reduce(x, 0.0, "add", [1]).astype(np.float64)
    want = x.astype(np.float64).sum(1)
    err = {np.dtype(np.float16): 2e-2, BF16: 1e-1, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}[np.dtype(dt)]
    assert np.all(np.abs(got - want) <= err * np.abs(x.astype(np.float64)).sum(1))


def test_f16_sum_uses_a_tree_of_f16_adds():
    """The schedule is body(init, balanced tree of adjacent pairs), rounding at every add."""
    x = np.array([2048.0, 1.0, 1.0, 1.0, 1.0], np.float16)
    # f16 spacing at 2048 is 2: tree ((2048+1) + (1+1)) + 1 -> (2048 + 2) + 1 -> 2050 + 1 -> 2052
    assert float(_reduce(x, 0.0, "add", [0])) == 2052.0
    # float32 accumulation would give 2052 as well; this one differs: 2048 + 1 + 1 + 1
    y = np.array([2048.0, 1.0, 1.0], np.float16)  # (2048+1)=2048 (tie to even), +1 -> 2048
    assert float(_reduce(y, 0.0, "add", [0])) == 2048.0


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_float_max_min_reduce_nan_and_zero(dt):
    x = np.array([[1.0, np.nan, 3.0], [-0.0, 0.0, -0.0], [-0.0, -0.0, -1.0], [-np.inf, -np.inf, -np.inf]], dt)
    assert_same(_reduce(x, -np.inf, "maximum", [1]), np.array([np.nan, 0.0, -0.0, -np.inf], dt))
    assert_same(_reduce(x, np.inf, "minimum", [1]), np.array([np.nan, -0.0, -1.0, -np.inf], dt))
    e = np.zeros((3, 0), dt)
    assert_same(_reduce(e, -np.inf, "maximum", [1]), np.full(3, -np.inf, dt))


def test_reduce_to_scalar_and_empty_dims():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    assert_same(_reduce(x, 5, "add", [0, 1, 2]), np.array(x.sum() + 5, np.int32))
    assert_same(_reduce(x, 5, "add", []), x + 5)


def _argmax_body(dt):
    def fn(b, v1, i1, v2, i2):
        gt = b.value("compare", [v1, v2], attrs={"comparison_direction": "GT"})
        eq = b.value("compare", [v1, v2], attrs={"comparison_direction": "EQ"})
        lt_i = b.value("compare", [i1, i2], attrs={"comparison_direction": "LT"})
        take1 = b.value("or", [gt, b.value("and", [eq, lt_i])])
        return [b.value("select", [take1, v1, v2]), b.value("select", [take1, i1, i2])]
    return region([dt, np.int32, dt, np.int32], fn)


def test_variadic_argmax_reduce_vs_jax():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 5, (7, 33)).astype(np.float32)
    idx = np.broadcast_to(np.arange(33, dtype=np.int32), x.shape).copy()
    outs = run_op("reduce", x, idx, np.array(-np.inf, np.float32), np.array(0, np.int32),
                  attrs={"dimensions": [1]}, regions=[_argmax_body(np.float32)])

    def comp(a, b):
        v1, i1 = a
        v2, i2 = b
        take1 = (v1 > v2) | ((v1 == v2) & (i1 < i2))
        return lax.select(take1, v1, v2), lax.select(take1, i1, i2)
    want = lax.reduce((x, idx), (np.float32(-np.inf), np.int32(0)), comp, [1])
    assert_same(outs[0], np.asarray(want[0]))
    assert_same(outs[1], np.asarray(want[1]))
    assert_same(outs[1], np.argmax(x, axis=1).astype(np.int32))


def test_unbatchable_body_falls_back_to_elements():
    rng = np.random.default_rng(5)
    x = rng.integers(-50, 50, (4, 6)).astype(np.int32)
    got = run_op("reduce", x, np.array(3, np.int32), attrs={"dimensions": [1]},
                 regions=[_unbatchable_add(np.int32)])
    assert_same(got, x.sum(1).astype(np.int32) + 3)


def test_body_reads_enclosing_value():
    """max(max(a, b), floor) where floor is defined outside the body."""
    def main(b, x, floor):
        def fn(rb, p, q):
            return [rb.value("maximum", [rb.value("maximum", [p, q]), floor])]
        body_r = region([np.float32, np.float32], fn)
        init = b.value("constant", [], attrs={"value": np.array(-np.inf, np.float32)})
        return [b.value("reduce", [x, init], attrs={"dimensions": [1]}, regions=[body_r])]
    m = module_from([tensor((3, 4), np.float32), scalar(np.float32)], main)
    x = np.array([[1, 2, 3, 4], [-5, -6, -7, -8], [0, 9, 0, 0]], np.float32)
    got = run(m, [x, np.array(0.5, np.float32)])[0]
    assert_same(got, np.array([4, 0.5, 9], np.float32))


def test_reduce_converts_inputs_to_body_types_not_needed_but_allowed():
    x = np.arange(10, dtype=np.int64)
    assert_same(_reduce(x, 0, "add", [0]), np.array(45, np.int64))


# ------------------------------------------------------------------------------------------
# reduce_window
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", [
    dict(wd=[2, 3], ws=[1, 1], bd=[1, 1], wdl=[1, 1], pad=[[0, 0], [0, 0]]),
    dict(wd=[2, 2], ws=[2, 1], bd=[1, 1], wdl=[1, 2], pad=[[1, 0], [2, 1]]),
    dict(wd=[3, 1], ws=[1, 2], bd=[2, 1], wdl=[1, 1], pad=[[0, 1], [0, 0]]),
    dict(wd=[1, 4], ws=[3, 1], bd=[2, 3], wdl=[2, 1], pad=[[2, 2], [1, 3]]),
    dict(wd=[2, 2], ws=[1, 1], bd=[1, 1], wdl=[1, 1], pad=[[-1, 0], [0, -2]]),
])
@pytest.mark.parametrize("kind", ["add", "maximum"])
def test_reduce_window_vs_jax(case, kind):
    rng = np.random.default_rng(6)
    x = rng.integers(-20, 20, (6, 7)).astype(np.float32)  # integers: sums are exact in any order
    init = 0.0 if kind == "add" else -np.inf
    got = run_op("reduce_window", x, np.array(init, np.float32), attrs={
        "window_dimensions": case["wd"], "window_strides": case["ws"], "base_dilations": case["bd"],
        "window_dilations": case["wdl"], "padding": case["pad"]}, regions=[body(kind, np.float32)])
    want = lax.reduce_window(x, np.float32(init), lax.add if kind == "add" else lax.max, case["wd"],
                             case["ws"], [tuple(p) for p in case["pad"]], case["bd"], case["wdl"])
    assert_same(got, np.asarray(want))


def test_reduce_window_variadic_and_unbatchable():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    attrs = {"window_dimensions": [2, 2], "window_strides": [1, 2], "padding": [[1, 0], [0, 0]]}
    got = run_op("reduce_window", x, np.array(0, np.int32), attrs=attrs, regions=[_unbatchable_add(np.int32)])
    want = np.asarray(lax.reduce_window(x, np.int32(0), lax.add, [2, 2], [1, 2], [(1, 0), (0, 0)]))
    assert_same(got, want)
    f = x.astype(np.float32)
    outs = run_op("reduce_window", f, x, np.array(-np.inf, np.float32), np.array(0, np.int32),
                  attrs=attrs, regions=[_argmax_body(np.float32)])
    assert outs[0].shape == (3, 2) and outs[1].dtype == np.int32
    assert_same(outs[0], np.asarray(lax.reduce_window(f, np.float32(-np.inf), lax.max, [2, 2], [1, 2], [(1, 0), (0, 0)])))


def test_reduce_window_empty_output():
    x = np.ones((2, 3), np.float32)
    got = run_op("reduce_window", x, np.array(0, np.float32), attrs={"window_dimensions": [3, 1]},
                 regions=[body("add", np.float32)])
    assert got.shape == (0, 3)
