"""Dtype promotion and broadcasting rules of hlo.numpy, against jax.numpy.

hlo keeps 64-bit inputs in 64 bits, which is jax's behaviour with x64 enabled; without 64-bit
inputs hlo matches jax's default (x32) mode, Python scalars included. So: pairs involving a
64-bit dtype are compared with jax under ``jax.enable_x64(True)``, the others with x64 off."""
import itertools

import hypothesis.extra.numpy as hnp_st
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from frontend_util import BF16, hlo_run
from hypothesis import HealthCheck, given, settings

import hlo
import hlo.numpy as hnp

DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                np.uint32, np.uint64, np.float16, np.float32, np.float64)] + [BF16]
SCALARS = [True, 3, -2, 1.5]


def _x64(*dts) -> bool:
    return any(np.dtype(d).itemsize == 8 and np.dtype(d) != np.bool_ for d in dts)


def test_promote_types_matches_jax_for_every_pair():
    bad = []
    for a, b in itertools.product(DTYPES, DTYPES):
        with jax.enable_x64(_x64(a, b)):
            want = jnp.promote_types(a, b)
        got = hnp.promote_types(a, b)
        if got != want:
            bad.append(f"{a}+{b}: {got} != {want}")
    assert not bad, bad


def test_array_and_python_scalar_promotion_matches_jax():
    bad = []
    for d, s in itertools.product(DTYPES, SCALARS):
        if d.kind == "u" and isinstance(s, int) and not isinstance(s, bool) and s < 0:
            continue  # hlo refuses a negative Python int meeting an unsigned dtype
        x = np.zeros((2,), d)
        with jax.enable_x64(_x64(d)):
            want = jnp.result_type(x, s)
        got = hnp.result_type(x, s)
        if got != want:
            bad.append(f"{d} with {s!r}: {got} != {want}")
    for s1, s2 in itertools.product(SCALARS, SCALARS):
        want = jnp.result_type(s1, s2)
        if hnp.result_type(s1, s2) != want:
            bad.append(f"{s1!r} with {s2!r}: {hnp.result_type(s1, s2)} != {want}")
    assert not bad, bad


def test_weak_types_propagate_through_traced_values():
    """A value computed only from Python scalars stays weak: it adopts the dtype of the array
    it meets later, as in jax."""
    def f(x):
        w = hnp.asarray(2.0) * 3  # weak float32
        i = hnp.asarray(7) // 2  # weak int32
        return x * w, x + i, (w * i).dtype == np.float32
    x16 = np.ones((3,), np.float16)
    xi8 = np.ones((3,), np.int8)
    ir = hlo.make_ir(f)(x16)
    assert [str(t) for t in ir.main.result_types][:2] == ["f16[3]", "f16[3]"]
    ir = hlo.make_ir(lambda x: x + hnp.asarray(7) // 2)(xi8)
    assert str(ir.main.result_types[0]) == "s8[3]"
    jitted = hlo.jit(lambda x: x * (hnp.asarray(2.0) * 3), target="interpreter")
    assert jitted(x16).dtype == np.float16


def test_python_int_out_of_range_is_an_error():
    with pytest.raises(OverflowError, match=r"300 is out of range for uint8"):
        hlo.make_ir(lambda x: x + 300)(np.zeros(3, np.uint8))
    with pytest.raises(OverflowError, match="out of range for int32"):
        hlo.make_ir(lambda x: x * 2 ** 40)(np.zeros(3, np.int32))
    ir = hlo.make_ir(lambda x: x * 2 ** 40)(np.zeros(3, np.int64))  # fits int64
    assert str(ir.main.result_types[0]) == "s64[3]"


def test_64_bit_inputs_stay_64_bit(target):
    x = np.arange(4, dtype=np.float64) / 3
    i = np.array([2 ** 40, -(2 ** 41)], np.int64)
    got = hlo_run(lambda x, i: (x * 2.5 + 1, hnp.sqrt(x), i * 3 + 1, i / 2, hnp.sum(i)), (x, i), target)
    assert [g.dtype for g in got] == [np.float64, np.float64, np.int64, np.float64, np.int64]
    np.testing.assert_allclose(got[0], x * 2.5 + 1, rtol=1e-15)
    np.testing.assert_array_equal(got[2], i * 3 + 1)
    np.testing.assert_array_equal(got[4], i.sum())


_shapes = hnp_st.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4)
_ops = st.sampled_from(["add", "multiply", "maximum", "less", "true_divide", "where", "arctan2"])
_dts = st.sampled_from(DTYPES)


def _apply(np_, op, a, b):
    if op == "where":
        return np_.where(a > b, a, b)
    return getattr(np_, op)(a, b)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=_shapes, op=_ops, da=_dts, db=_dts)
def test_broadcasting_and_promotion_of_traced_ops(shapes, op, da, db):
    """Trace (no run) random broadcastable shapes and dtype pairs: the IR's result type must be
    jax's (shape and dtype)."""
    (sa, sb), _ = shapes
    if op in ("arctan2", "true_divide") and (da == np.bool_ and db == np.bool_):
        return
    a, b = jax.ShapeDtypeStruct(sa, da), jax.ShapeDtypeStruct(sb, db)
    with jax.enable_x64(_x64(da, db)):
        want = jax.eval_shape(lambda a, b: _apply(jnp, op, a, b), a, b)
    ir = hlo.make_ir(lambda a, b: _apply(hnp, op, a, b))(hlo.ShapeDtypeStruct(sa, da), hlo.ShapeDtypeStruct(sb, db))
    got = ir.main.result_types[0]
    assert tuple(got.shape) == tuple(want.shape)
    assert got.np_dtype == want.dtype, (op, da, db)


@settings(max_examples=40, deadline=None)
@given(sa=hnp_st.array_shapes(min_dims=1, max_dims=3, max_side=5),
       sb=hnp_st.array_shapes(min_dims=1, max_dims=3, max_side=5))
def test_incompatible_shapes_raise_shape_error(sa, sb):
    try:
        np.broadcast_shapes(sa, sb)
        compatible = True
    except ValueError:
        compatible = False
    f = hlo.make_ir(lambda a, b: a + b)
    args = (hlo.ShapeDtypeStruct(sa, np.float32), hlo.ShapeDtypeStruct(sb, np.float32))
    if compatible:
        assert tuple(f(*args).main.result_types[0].shape) == np.broadcast_shapes(sa, sb)
    else:
        with pytest.raises(hlo.errors.ShapeError, match=r"add: shapes .* cannot be broadcast together"):
            f(*args)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=hnp_st.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
       da=st.sampled_from([np.dtype(np.float32), np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.float16),
                           np.dtype(np.int32), np.dtype(np.bool_)]),
       db=st.sampled_from([np.dtype(np.float32), np.dtype(np.int16), np.dtype(np.uint8), BF16, np.dtype(np.bool_)]),
       seed=st.integers(0, 2 ** 16))
def test_broadcasting_values_on_the_interpreter(shapes, da, db, seed):
    (sa, sb), _ = shapes
    rng = np.random.default_rng(seed)
    a = (rng.integers(-5, 6, sa) if da != np.bool_ else rng.random(sa) < 0.5).astype(da)
    b = (rng.integers(0, 6, sb) if db != np.bool_ else rng.random(sb) < 0.5).astype(db)
    got = hlo_run(lambda a, b: (a + b, a * b, hnp.maximum(a, b), a >= b), (a, b), "interpreter")
    want = [np.asarray(w) for w in jax.jit(lambda a, b: (a + b, a * b, jnp.maximum(a, b), a >= b))(a, b)]
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-2)
