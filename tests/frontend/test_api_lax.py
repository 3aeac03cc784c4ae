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


@pytest.mark.parametrize("shape, axis, reverse", [((5, 40), 1, False), ((5, 40), 1, True), ((9, 3), 0, False),
                                                  ((6,), 0, True)])
def test_cumlogsumexp_matches_jax(shape, axis, reverse):
    x = (R.standard_normal(shape) * 30).astype(np.float32)
    x.flat[:2] = -np.inf
    x.flat[-1] = np.inf
    got = hlo.jit(lambda a: hl.cumlogsumexp(a, axis, reverse))(x)
    np.testing.assert_allclose(got, jax.lax.cumlogsumexp(x, axis, reverse), rtol=1e-6)
    y = R.standard_normal(shape)
    ref = (np.flip(np.logaddexp.accumulate(np.flip(y, axis), axis=axis), axis) if reverse
           else np.logaddexp.accumulate(y, axis=axis))
    np.testing.assert_allclose(hl.cumlogsumexp(y, axis, reverse), ref, rtol=1e-12)  # float64
    with pytest.raises(TypeError, match="floating-point"):
        hl.cumlogsumexp(np.ones(3, np.int32))


@pytest.mark.parametrize("padding", ["SAME", "VALID", ((1, 2), (0, 1))])
@pytest.mark.parametrize("strides", [(1, 1), (2, 2), (2, 1)])
@pytest.mark.parametrize("transpose_kernel", [False, True])
def test_conv_transpose_matches_jax(padding, strides, transpose_kernel):
    lhs = R.standard_normal((2, 7, 6, 3)).astype(np.float32)
    rhs = R.standard_normal((3, 3, 3 if not transpose_kernel else 4, 4 if not transpose_kernel else 3)).astype(np.float32)
    f = lambda m: lambda a, b: m.conv_transpose(a, b, strides, padding, transpose_kernel=transpose_kernel)
    got = hlo.jit(f(hl), target="interpreter")(lhs, rhs)
    want = f(jax.lax)(lhs, rhs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_conv_transpose_1d_dilated_compiled_and_its_gradient():
    lhs = R.standard_normal((2, 9, 3)).astype(np.float32)
    rhs = R.standard_normal((4, 3, 5)).astype(np.float32)
    got = hlo.jit(lambda a, b: hl.conv_transpose(a, b, (3,), "SAME", rhs_dilation=(2,)))(lhs, rhs)
    np.testing.assert_allclose(got, jax.lax.conv_transpose(lhs, rhs, (3,), "SAME", rhs_dilation=(2,)), atol=1e-4)
    g = hlo.grad(lambda a: (hl.conv_transpose(a, rhs, (2,), "VALID") ** 2).sum())(lhs)
    jg = jax.grad(lambda a: (jax.lax.conv_transpose(a, rhs, (2,), "VALID") ** 2).sum())(lhs)
    np.testing.assert_allclose(g, jg, rtol=1e-4, atol=1e-3)
    with pytest.raises(ValueError, match="padding must be"):
        hl.conv_transpose(lhs, rhs, (1,), "FULL")


def test_lgamma_and_digamma_match_jax_and_float64():
    x = np.array([0.1, 0.5, 1, 1.5, 2, 3.7, 10, 100, 1e4, -0.5, -1.5, -2.3, 0, -1, -2, np.inf, -np.inf, 1e-6, 1e30],
                 np.float32)
    lg, dg = hlo.jit(lambda a: (hl.lgamma(a), hl.digamma(a)))(x)
    np.testing.assert_allclose(lg, jax.lax.lgamma(x), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(dg, jax.lax.digamma(x), rtol=2e-5, atol=1e-6)
    import math
    y = np.array([0.1, 2.5, 7.3, -0.7, 150.0, 1e-3])
    np.testing.assert_allclose(hl.lgamma(y), [math.lgamma(v) for v in y], rtol=1e-13, atol=1e-14)
    g = hlo.grad(lambda a: hl.lgamma(a).sum())(np.array([0.7, 3.0, 12.5], np.float32))
    np.testing.assert_allclose(g, jax.lax.digamma(np.array([0.7, 3.0, 12.5], np.float32)), rtol=1e-3)


I32 = R.integers(-50, 50, (3, 4)).astype(np.int32)
F32 = R.standard_normal((3, 4, 5)).astype(np.float32)
CONVENIENCES = [
    ("bitwise", lambda m, a: (m.bitwise_and(a, 6), m.bitwise_or(a, 6), m.bitwise_xor(a, 6), m.bitwise_not(a)), (I32,)),
    ("index_in_dim", lambda m, a: (m.index_in_dim(a, -1, 1), m.index_in_dim(a, 2, 2, keepdims=False)), (F32,)),
    ("dynamic_index_in_dim", lambda m, a, i: m.dynamic_index_in_dim(a, i, 1, keepdims=False), (F32, np.int32(2))),
    ("dynamic_update_index_in_dim", lambda m, a, u, i: m.dynamic_update_index_in_dim(a, u, i, 0),
     (F32, F32[0] * 0, np.int32(1))),
    ("select_n", lambda m, w, a: (m.select_n(w % 3, a, -a, a * 2), m.select_n(w > 0, a, -a)),
     (I32, I32.astype(np.float32))),
    ("split", lambda m, a: tuple(m.split(a, (1, 3), axis=1)), (F32,)),
    ("stack-unstack", lambda m, a: (m.stack([a, a * 2], axis=1), tuple(m.unstack(a, 2))), (F32,)),
    ("tile", lambda m, a: m.tile(a, (2, 1, 3)), (F32,)),
    ("empty", lambda m: m.empty((2, 3), np.float32) * 0, ()),
    ("broadcast", lambda m, a, b: (m.broadcast_to_rank(a, 5), m.broadcast_like(a[0, :, :1], b)), (F32, F32)),
    ("batch_matmul", lambda m, a, b: m.batch_matmul(a, b), (F32, F32.transpose(0, 2, 1).copy())),
    ("reduce_precision", lambda m, a: (m.reduce_precision(a * 1000, 5, 10), m.reduce_precision(a, 8, 7)), (F32,)),
    ("optimization_barrier", lambda m, a: m.optimization_barrier((a, {"b": a * 2})), (F32,)),
    ("approx_k", lambda m, a: (m.approx_max_k(a, 2), m.approx_min_k(a, 3, reduction_dimension=1)), (F32,)),
    ("scatter_sub", lambda m, a: m.scatter_sub(a, np.array([[0], [2]], np.int32), np.ones((2, 4), np.float32),
                                               m.ScatterDimensionNumbers((1,), (0,), (0,))), (F32[:, :, 0].copy(),)),
    ("stop_gradient-nextafter-i0e", lambda m, a: (m.stop_gradient(a), m.nextafter(a, a * 2), m.bessel_i0e(a)), (F32,)),
]


@pytest.mark.parametrize("name, f, args", CONVENIENCES, ids=[c[0] for c in CONVENIENCES])
def test_conveniences_match_jax(name, f, args):
    got = hlo.jit(lambda *a: f(hl, *a), target="interpreter")(*args)
    want = f(jax.lax, *args)
    gl, wl = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(gl) == len(wl)
    for g, w in zip(gl, wl):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-7)
    assert hl.broadcast_shapes((3, 1), (1, 4), (4,)) == jax.lax.broadcast_shapes((3, 1), (1, 4), (4,))
    assert hl.dtype(1.0) == np.float32 and hl.dtype(F32) == np.float32 and hl.dtype("int8") == np.int8


@pytest.mark.parametrize("n, reverse", [(1, False), (2, True), (7, False), (16, True), (33, False)])
def test_associative_scan_of_a_linear_recurrence_matches_jax(n, reverse):
    a = R.uniform(0.5, 1, (n, 3)).astype(np.float32)
    b = R.standard_normal((n, 3)).astype(np.float32)

    def f(m):
        def combine(x, y):  # h = a * h + b, composed
            return {"a": x["a"] * y["a"], "b": y["a"] * x["b"] + y["b"]}
        return lambda a, b: m.associative_scan(combine, {"a": a, "b": b}, reverse=reverse)
    got = hlo.jit(f(hl))(a, b)
    want = f(jax.lax)(a, b)
    for k in ("a", "b"):
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)


def test_associative_scan_along_an_axis_its_errors_and_gradient():
    import hlo.numpy as hnp
    x = R.standard_normal((4, 10)).astype(np.float32)
    np.testing.assert_allclose(hl.associative_scan(hnp.add, x, axis=1), np.cumsum(x, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(hl.associative_scan(hnp.maximum, x, axis=1), np.maximum.accumulate(x, 1))
    with pytest.raises(ValueError, match="axis 0 of length 4"):
        hl.associative_scan(hnp.add, (x, x[:3]))
    with pytest.raises(TypeError, match="structure of elems"):
        hl.associative_scan(lambda p, q: p[0] + q[0], (x, x))
    g = hlo.grad(lambda t: hl.associative_scan(hnp.multiply, t).sum())(x[:, :3] + 2)
    jg = jax.grad(lambda t: jax.lax.associative_scan(jax.numpy.multiply, t).sum())(x[:, :3] + 2)
    np.testing.assert_allclose(g, jg, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dt", [np.int8, np.uint16, np.int32, np.uint32, np.int64, np.uint64])
def test_mulhi_is_the_high_half_of_the_exact_product(dt):
    info = np.iinfo(dt)
    a = R.integers(info.min, info.max, 40, dtype=dt, endpoint=True)
    b = R.integers(info.min, info.max, 40, dtype=dt, endpoint=True)
    a[:3], b[:3] = [info.min, info.max, 0], [info.max, info.min, info.max]
    bits = 8 * np.dtype(dt).itemsize
    want = np.array([((int(x) * int(y)) >> bits) & ((1 << bits) - 1) for x, y in zip(a, b)], np.uint64)
    want = want.astype(np.dtype(dt).str.replace("i", "u")).view(dt)  # Python ints: exact
    np.testing.assert_array_equal(hlo.jit(hl.mulhi)(a, b), want)


def test_index_take_fft_and_the_shape_helpers_match_jax():
    src = R.standard_normal((5, 6, 7)).astype(np.float32)
    i0, i1 = np.array([0, 4, -1, 7], np.int32), np.array([1, 2, 3, -8], np.int32)
    np.testing.assert_array_equal(hl.index_take(src, (i0, i1), (0, 2)), jax.lax.index_take(src, (i0, i1), (0, 2)))
    x = R.standard_normal((3, 4, 8)).astype(np.float32)
    c = (x + 1j * x[::-1]).astype(np.complex64)
    for kind, arg, lengths in [("FFT", c, (4, 8)), ("IFFT", c, (8,)), ("RFFT", x, (4, 8)),
                               ("IRFFT", np.fft.rfftn(x, axes=(1, 2)).astype(np.complex64), (4, 8)),
                               (hl.FftType.RFFT, x, (8,))]:
        got = hlo.jit(lambda a: hl.fft(a, kind, lengths))(arg)
        np.testing.assert_allclose(got, jax.lax.fft(arg, kind if isinstance(kind, str) else jax.lax.FftType.RFFT,
                                                    lengths), atol=1e-4)
    dn = ("NHWC", "HWIO", "NHWC")
    for pad in ("SAME", "VALID", [(1, 2), (0, 1)]):
        assert hl.conv_general_shape_tuple((2, 9, 8, 3), (3, 2, 3, 4), (2, 1), pad, dn) == \
            tuple(jax.lax.conv_general_shape_tuple((2, 9, 8, 3), (3, 2, 3, 4), (2, 1), pad, dn))
        assert hl.conv_transpose_shape_tuple((2, 9, 8, 3), (3, 2, 3, 4), (2, 3), pad, dn) == \
            tuple(jax.lax.conv_transpose_shape_tuple((2, 9, 8, 3), (3, 2, 3, 4), (2, 3), pad, dn))
    assert hl.conv_shape_tuple((2, 3, 9, 8), (4, 3, 3, 2), (2, 1), "SAME") == \
        tuple(jax.lax.conv_shape_tuple((2, 3, 9, 8), (4, 3, 3, 2), (2, 1), "SAME"))
    assert hl.reduce_window_shape_tuple((5, 7), (2, 3), (1, 2), [(0, 1), (1, 1)], (1, 2), (2, 1)) == \
        jax.lax.reduce_window_shape_tuple((5, 7), (2, 3), (1, 2), [(0, 1), (1, 1)], (1, 2), (2, 1))
    assert hl.conv_general_permutations(("NHWC", "HWIO", "NCHW")) == \
        jax.lax.conv_general_permutations(("NHWC", "HWIO", "NCHW"))
    lhs = R.standard_normal((2, 3, 9, 8)).astype(np.float32)
    rhs = R.standard_normal((4, 3, 3, 2)).astype(np.float32)
    np.testing.assert_allclose(
        hlo.jit(lambda a, b: hl.conv_with_general_padding(a, b, (2, 1), [(1, 0), (0, 1)], (1, 2), (2, 1)))(lhs, rhs),
        jax.lax.conv_with_general_padding(lhs, rhs, (2, 1), [(1, 0), (0, 1)], (1, 2), (2, 1)), rtol=1e-4, atol=1e-4)
