"""Complex numbers, 8-bit floats and 2/4-bit integers through hlo.numpy: promotion as
jax.numpy, complex functions against jax on every target, complex literals, gradients with
jax's convention, ml_dtypes arrays in and out."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from frontend_util import compare

import hlo
import hlo.numpy as hnp
from hlo import dtypes


def _z(rng, shape, dt=np.complex64):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)


@pytest.mark.parametrize("a,b", [("float32", "complex64"), ("float64", "complex64"),
                                 ("int32", "complex64"), ("float16", "complex64"),
                                 ("complex64", "complex128"), ("bfloat16", "complex128"),
                                 ("int4", "int4"), ("uint2", "uint2")])
def test_promotion_matches_jax(a, b):
    with jax.enable_x64(True):
        want = jnp.promote_types(a, b)
    assert dtypes.promote_types(a, b) == want


def test_weak_complex_scalars_keep_the_array_precision():
    f32 = np.ones(3, np.float32)
    f64 = np.ones(3, np.float64)
    assert hlo.jit(lambda x: x * 1j)(f32).dtype == np.complex64
    assert hlo.jit(lambda x: x * (2 + 1j))(f64).dtype == np.complex128
    z = hlo.jit(lambda x: x + (1 - 2j))(np.zeros(2, np.complex64))
    np.testing.assert_array_equal(z, np.array([1 - 2j, 1 - 2j], np.complex64))


@pytest.mark.parametrize("small,other", [(ml_dtypes.float8_e4m3fn, np.float16),
                                         (ml_dtypes.int4, np.int8)])
def test_small_types_do_not_promote_implicitly_as_in_jax(small, other):
    with pytest.raises(hlo.errors.DTypeError, match="no implicit promotion"):
        hlo.jit(lambda a, b: a + b)(np.ones(3, small), np.ones(3, other))


FUNCS = {
    "real": (hnp.real, jnp.real), "imag": (hnp.imag, jnp.imag), "conj": (hnp.conj, jnp.conj),
    "angle": (hnp.angle, jnp.angle), "abs": (hnp.abs, jnp.abs), "exp": (hnp.exp, jnp.exp),
    "log": (hnp.log, jnp.log), "sqrt": (hnp.sqrt, jnp.sqrt), "tanh": (hnp.tanh, jnp.tanh),
    "sin": (hnp.sin, jnp.sin), "expm1": (hnp.expm1, jnp.expm1), "log1p": (hnp.log1p, jnp.log1p),
    "square": (hnp.square, jnp.square), "reciprocal": (hnp.reciprocal, jnp.reciprocal),
    "sum": (hnp.sum, jnp.sum), "mean": (hnp.mean, jnp.mean),
    "matmul": (lambda z: z @ z.T, lambda z: z @ z.T),
    "methods": (lambda z: z.conj().real + z.imag, lambda z: z.conj().real + z.imag),
}


@pytest.mark.parametrize("name", FUNCS)
@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_complex_functions_match_jax(target, name, dt):
    rng = np.random.default_rng(0)
    z = _z(rng, (4, 4), dt)
    h, j = FUNCS[name]
    compare(h, j, (z,), target, rtol=2e-5 if dt == np.complex64 else 1e-12,
            atol=2e-5 if dt == np.complex64 else 1e-12)


def test_complex_inputs_and_outputs_round_trip(target):
    z = _z(np.random.default_rng(1), (3, 5))
    got = hlo.jit(lambda a: (a, a * 2, hnp.real(a), a.astype(np.complex128)), target=target)(z)
    np.testing.assert_array_equal(got[0], z)
    np.testing.assert_array_equal(got[1], z * 2)
    np.testing.assert_array_equal(got[2], z.real)
    assert got[3].dtype == np.complex128


def test_small_types_in_and_out(target):
    f8 = np.array([0.5, -1.5, 448.0, 3.0], ml_dtypes.float8_e4m3fn)
    i4 = np.array([-8, -1, 3, 7], ml_dtypes.int4)
    got = hlo.jit(lambda a, b: (a * 2, a.astype(np.float32), b + b, b.astype(np.int32)),
                  target=target)(f8, i4)
    got = hlo.device_get(got)  # device arrays (target cuda) to numpy
    assert got[0].dtype == ml_dtypes.float8_e4m3fn and got[2].dtype == ml_dtypes.int4
    np.testing.assert_array_equal(got[0].astype(np.float32), (f8.astype(np.float32) * 2).astype(ml_dtypes.float8_e4m3fn).astype(np.float32))
    np.testing.assert_array_equal(got[1], f8.astype(np.float32))
    np.testing.assert_array_equal(got[2], (i4.astype(np.int8) * 2).astype(ml_dtypes.int4))
    np.testing.assert_array_equal(got[3], i4.astype(np.int32))


def test_gradient_with_respect_to_complex_inputs_matches_jax():
    z = _z(np.random.default_rng(2), (6,))

    def f(a, np_):
        return np_.sum(np_.abs(a * a + np_.exp(a)) + np_.real(a) * np_.imag(a))

    g = hlo.grad(lambda a: f(a, hnp))(z)
    want = jax.grad(lambda a: f(a, jnp))(z)
    assert g.dtype == np.complex64
    np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw", [dict(left_side=True, lower=True),
                                dict(left_side=True, lower=False, transpose_a=True, conjugate_a=True),
                                dict(left_side=False, lower=True, transpose_a=True, unit_diagonal=True)])
def test_complex_triangular_solve_matches_jax(target, kw):
    rng = np.random.default_rng(3)
    a = (_z(rng, (2, 4, 4)) + 3 * np.eye(4)).astype(np.complex64)
    b = _z(rng, (2, 4, 3) if kw["left_side"] else (2, 3, 4))
    compare(lambda x, y: hlo.lax.linalg.triangular_solve(x, y, **kw),
            lambda x, y: jax.lax.linalg.triangular_solve(x, y, **kw), (a, b), target,
            rtol=1e-5, atol=1e-5)
