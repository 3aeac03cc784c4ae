"""hlo.nn's functions added for jax's surface (issue 34), each against jax.nn."""
import numpy as np
import pytest

import hlo
import hlo.nn as hnn

jax = pytest.importorskip("jax")
jnn = jax.nn
jnp = jax.numpy

POINTWISE = ["identity", "tanh", "celu", "selu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh",
             "mish", "soft_sign", "sparse_plus", "sparse_sigmoid", "squareplus"]


def _x(shape, dtype, lo=-4.0, hi=4.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


@pytest.mark.parametrize("name", POINTWISE)
@pytest.mark.parametrize("shape, dtype", [((7,), np.float32), ((3, 5), np.float16)])
def test_pointwise_activations_match_jax(name, shape, dtype):
    x = _x(shape, dtype)
    x.flat[0] = -1.0  # the kinks
    x.flat[-1] = 1.0
    got, want = getattr(hnn, name)(x), np.asarray(getattr(jnn, name)(x))
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-6 if dtype == np.float32 else 2e-3
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol, atol=tol)


def test_parameters_glu_log1mexp_logmeanexp_match_jax():
    x = _x((4, 6), np.float32)
    np.testing.assert_allclose(hnn.celu(x, 0.5), jnn.celu(x, 0.5), rtol=1e-6)
    np.testing.assert_allclose(hnn.squareplus(x, 2.0), jnn.squareplus(x, 2.0), rtol=1e-5)
    for axis in (-1, 0):
        np.testing.assert_allclose(hnn.glu(x, axis), jnn.glu(x, axis), rtol=1e-6)
    with pytest.raises(ValueError, match="even size"):
        hnn.glu(np.ones((3, 5), np.float32))
    p = np.array([1e-6, 0.1, 0.69, 0.7, 3.0, 40.0], np.float32)
    np.testing.assert_allclose(hnn.log1mexp(p), jnn.log1mexp(p), rtol=1e-5)
    for kw in ({}, {"axis": 1}, {"axis": (0, 1), "keepdims": True}, {"axis": 0, "where": x > 0}):
        np.testing.assert_allclose(hnn.logmeanexp(x, **kw), jnn.logmeanexp(x, **kw), rtol=1e-5, atol=1e-6)


def test_activations_differentiate_like_jax():
    x = _x((9,), np.float32)
    for name in ("selu", "mish", "squareplus", "sparse_plus"):
        g = hlo.grad(lambda t, n=name: getattr(hnn, n)(t).sum())(x)
        want = jax.grad(lambda t, n=name: getattr(jnn, n)(t).sum())(x)
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kw", [
    {},
    {"is_causal": True},
    {"scale": 0.3, "bias": "bias"},
    {"mask": "mask"},
    {"local_window_size": (1, 2)},
    {"query_seq_lengths": np.array([3, 5], np.int32), "key_value_seq_lengths": np.array([4, 2], np.int32)},
])
@pytest.mark.parametrize("heads", [(4, 4), (4, 2)])
def test_dot_product_attention_matches_jax(kw, heads):
    N, K = heads
    rng = np.random.default_rng(1)
    B, T, S, H = 2, 5, 6, 8
    q = rng.standard_normal((B, T, N, H)).astype(np.float32)
    k = rng.standard_normal((B, S, K, H)).astype(np.float32)
    v = rng.standard_normal((B, S, K, H)).astype(np.float32)
    kw = dict(kw)
    if kw.get("bias") == "bias":
        kw["bias"] = rng.standard_normal((1, N, T, S)).astype(np.float32)
    if kw.get("mask") == "mask":
        kw["mask"] = rng.uniform(size=(B, 1, T, S)) < 0.7
        kw["mask"][..., 0] = True
    got = hlo.jit(lambda q, k, v: hnn.dot_product_attention(q, k, v, **kw))(q, k, v)
    want = jnn.dot_product_attention(q, k, v, **kw)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_dot_product_attention_unbatched_bf16_and_residual():
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((4, 2, 8)).astype(jnp.bfloat16) for _ in range(3))
    got = np.asarray(hnn.dot_product_attention(q, k, v, is_causal=True), np.float32)
    want = np.asarray(jnn.dot_product_attention(q, k, v, is_causal=True), np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    q, k, v = (rng.standard_normal((1, 4, 2, 8)).astype(np.float32) for _ in range(3))
    o, lse = hnn.dot_product_attention(q, k, v, return_residual=True)
    jo, jlse = jnn.dot_product_attention(q, k, v, return_residual=True)
    np.testing.assert_allclose(o, jo, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lse, jlse, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="multiple of the key's 3"):
        hnn.dot_product_attention(np.ones((1, 2, 4, 8), np.float32), np.ones((1, 2, 3, 8), np.float32),
                                  np.ones((1, 2, 3, 8), np.float32))


def test_scaled_matmul_is_the_block_scaled_product_in_float64():
    rng = np.random.default_rng(3)
    B, M, N, K, blk = 2, 3, 4, 64, 32
    a = rng.standard_normal((B, M, K)).astype(np.float32)
    b = rng.standard_normal((B, N, K)).astype(np.float32)
    sa = rng.uniform(0.5, 2, (B, M, K // blk)).astype(np.float32)
    sb = rng.uniform(0.5, 2, (B, N, K // blk)).astype(np.float32)
    want = np.einsum("bmk,bnk->bmn", a * np.repeat(sa, blk, 2).astype(np.float64),
                     b * np.repeat(sb, blk, 2).astype(np.float64))
    got = hnn.scaled_matmul(a, b, sa, sb)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="3-dimensional"):
        hnn.scaled_matmul(a[0], b, sa, sb)


def _quantize_ref(x3, mode):
    """jax's block quantization (jax/_src/cudnn/scaled_matmul_stablehlo.py) in numpy: returns the
    dequantized float64 operand."""
    import ml_dtypes
    bs, dt = (32, ml_dtypes.float8_e4m3fn) if mode == "mxfp8" else (16, ml_dtypes.float4_e2m1fn)
    top = float(ml_dtypes.finfo(dt).max)
    B, M, K = x3.shape
    xb = x3.reshape(B, M, K // bs, bs).astype(np.float32)
    amax = np.abs(xb).max(-1, keepdims=True) / np.float32(top)
    if mode == "mxfp8":
        bits = amax.astype(np.float32).view(np.uint32)
        exp, mant = bits >> 23, bits & 0x7FFFFF
        up = (mant > 0) & (exp != 0xFE) & ~((exp == 0) & (mant <= 0x400000))
        scale = ((np.where(up, exp + 1, exp) & 0xFF).astype(np.uint32) << 23).view(np.float32)
        scale = np.where(scale == 0, np.float32(2.0 ** -127), scale)
    else:
        scale = np.clip(amax, 0, 448.0).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    q = np.clip(xb / scale, -top, top).astype(dt).astype(np.float64)
    return (q * scale).reshape(B, M, K)


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
def test_scaled_dot_general_quantizes_as_jax_does(mode):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 2, 64)).astype(np.float32)
    b = rng.standard_normal((4, 64, 5)).astype(np.float32)
    dn = (((2,), (1,)), ((0,), (0,)))
    cfg = [hnn.get_scaled_dot_general_config(mode)] * 3
    got = hlo.jit(lambda x, y: hnn.scaled_dot_general(x, y, dn, configs=cfg))(a, b)
    want = np.einsum("bmk,bnk->bmn", _quantize_ref(a, mode), _quantize_ref(b.transpose(0, 2, 1), mode))
    assert got.shape == (4, 2, 5) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # (jax runs this path on cuDNN only; without configs it is dot_general, which runs anywhere)
    np.testing.assert_allclose(hnn.scaled_dot_general(a, b, dn), jnn.scaled_dot_general(a, b, dn), rtol=1e-5)
    jc = jnn.get_scaled_dot_general_config(mode)
    assert (cfg[0].mode, cfg[0].block_size, np.dtype(cfg[0].data_type), np.dtype(cfg[0].scale_type)) == \
        (jc.mode, jc.block_size, np.dtype(jc.data_type), np.dtype(jc.scale_type))
