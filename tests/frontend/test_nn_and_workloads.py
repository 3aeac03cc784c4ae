"""hlo.nn against jax.nn, and the seed workloads (small shapes, float32) against jax.jit."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from frontend_util import BF16, assert_same, hlo_run, jax_run, rand, stable_seed

import hlo
import hlo.numpy as hnp


def _jax_layer_norm(x, gamma=None, beta=None, axis=-1, eps=1e-5):
    mean = jnp.mean(x, axis=axis, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axis, keepdims=True)
    y = (x - mean) * jax.lax.rsqrt(var + eps)
    if gamma is not None:
        y = y * gamma
    return y + beta if beta is not None else y


def _jax_rms_norm(x, gamma=None, axis=-1, eps=1e-6):
    y = x * jax.lax.rsqrt(jnp.mean(jnp.square(x), axis=axis, keepdims=True) + eps)
    return y * gamma if gamma is not None else y


class _JaxNN:
    """jax.nn with the two functions it lacks (layer_norm, rms_norm) written out."""

    def __getattr__(self, name):
        if name == "layer_norm":
            return _jax_layer_norm
        if name == "rms_norm":
            return _jax_rms_norm
        if name == "logsumexp":
            return jax.nn.logsumexp
        return getattr(jax.nn, name)


JNN = _JaxNN()


def _nn_table(nn, x, g, labels):
    return {
        "relu": nn.relu(x), "relu6": nn.relu6(x * 4), "gelu_tanh": nn.gelu(x), "gelu_exact": nn.gelu(x, approximate=False),
        "sigmoid": nn.sigmoid(x), "silu": nn.silu(x), "softplus": nn.softplus(x * 10), "log_sigmoid": nn.log_sigmoid(x),
        "leaky_relu": nn.leaky_relu(x, 0.2), "elu": nn.elu(x), "softmax": nn.softmax(x), "softmax0": nn.softmax(x, axis=0),
        "log_softmax": nn.log_softmax(x, axis=-1), "logsumexp": nn.logsumexp(x), "logsumexp_ax": nn.logsumexp(x, axis=1),
        "logsumexp_keep": nn.logsumexp(x, axis=0, keepdims=True), "logsumexp_b": nn.logsumexp(x, axis=1, b=g),
        "layer_norm": nn.layer_norm(x), "layer_norm_affine": nn.layer_norm(x, g, g * 0.5, eps=1e-3),
        "rms_norm": nn.rms_norm(x), "rms_norm_g": nn.rms_norm(x, g), "one_hot": nn.one_hot(labels, 5),
        "one_hot_axis0": nn.one_hot(labels, 4, axis=0, dtype=jnp.int32), "standardize": nn.standardize(x),
        "softmax_where": nn.softmax(x, where=labels[:, None] > 1),
        "log_softmax_where": nn.log_softmax(x, where=labels[:, None] > 1),
    }


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_nn_functions(target, dtype):
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(stable_seed(dtype))
    x = rand(rng, (4, 6), dt) * 2
    g = rand(rng, (6,), dt, 0.5, 1.5)
    labels = np.array([0, 3, 4, 7], np.int32)
    got = hlo_run(lambda x, g, l: _nn_table(hlo.nn, x, g, l), (x, g, labels), target)
    want = jax_run(lambda x, g, l: _nn_table(JNN, x, g, l), (x, g, labels))
    tol = {np.dtype(np.float16): 1e-2, BF16: 6e-2, np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-12}[dt]
    for k in want:
        w = want[k]
        if k == "one_hot" and dt == np.float64:
            w = w.astype(np.float32)  # one_hot's default dtype: float32 (jax's x64 mode: float64)
        assert_same(got[k], w, rtol=tol, atol=tol, what=k)


# --------------------------------------------------------------------------------------------
# Seed workloads
# --------------------------------------------------------------------------------------------

def tinyops(np_, nn, x):
    y = nn.sigmoid(x * 2 + 1)
    y = np_.tanh(y * y)
    return y / (np_.abs(y) + 1)


def ln_linear_gelu_res(np_, nn, x, w, b):
    h = nn.layer_norm(x, eps=1e-5)
    return nn.gelu(h @ w + b, approximate=True) + x


def simple_mlp(np_, nn, x, w1, b1, w2, b2):
    return nn.gelu(x @ w1 + b1) @ w2 + b2


def linear_relu(np_, nn, x, w, b):
    return np_.maximum(x @ w + b, 0)


def softmax_last(np_, nn, x):
    return nn.softmax(x, axis=-1)


def layernorm_affine(np_, nn, x, gamma, beta):
    return nn.layer_norm(x, gamma, beta, eps=1e-5)


def transformer_layer(np_, nn, x, p, heads):
    """Post-norm encoder layer: x + MHA(x) -> LN -> x + FFN(x) -> LN."""
    b, s, d = x.shape
    hd = d // heads

    def split(t):
        return np_.transpose(t.reshape(b, s, heads, hd), (0, 2, 1, 3))
    q, k, v = split(x @ p["wq"] + p["bq"]), split(x @ p["wk"] + p["bk"]), split(x @ p["wv"] + p["bv"])
    att = nn.softmax(np_.einsum("bhqd,bhkd->bhqk", q, k) / np_.sqrt(np_.float32(hd)), axis=-1)
    ctx = np_.transpose(att @ v, (0, 2, 1, 3)).reshape(b, s, d)
    x = nn.layer_norm(x + ctx @ p["wo"] + p["bo"], p["g1"], p["be1"])
    ff = nn.gelu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    return nn.layer_norm(x + ff, p["g2"], p["be2"])


def dispatch(np_, nn, x):
    return x + 1


def _params(rng, d, f):
    p = {}
    for n in ("wq", "wk", "wv", "wo"):
        p[n] = rand(rng, (d, d), "float32") / np.float32(np.sqrt(d))
    for n in ("bq", "bk", "bv", "bo", "b2", "be1", "be2"):
        p[n] = rand(rng, (d,), "float32") * 0.1
    p["w1"] = rand(rng, (d, f), "float32") / np.float32(np.sqrt(d))
    p["b1"] = rand(rng, (f,), "float32") * 0.1
    p["w2"] = rand(rng, (f, d), "float32") / np.float32(np.sqrt(f))
    p["g1"] = rand(rng, (d,), "float32", 0.5, 1.5)
    p["g2"] = rand(rng, (d,), "float32", 0.5, 1.5)
    return p


def _workload_cases():
    rng = np.random.default_rng(2024)
    r = lambda *s: rand(rng, s, "float32")
    return {
        "tinyops": (tinyops, (r(8, 32),)),
        "ln_linear_gelu_res": (ln_linear_gelu_res, (r(8, 32), r(32, 32) / 6, r(32))),
        "simple_mlp": (simple_mlp, (r(4, 32), r(32, 64) / 6, r(64), r(64, 32) / 8, r(32))),
        "linear_relu": (linear_relu, (r(8, 32), r(32, 16) / 6, r(16))),
        "softmax": (softmax_last, (r(4, 3, 17) * 3,)),
        "layernorm": (layernorm_affine, (r(6, 40), r(40), r(40))),
        "transformer_layer": (lambda np_, nn, x, p: transformer_layer(np_, nn, x, p, 8),
                              (r(2, 8, 64), _params(rng, 64, 128))),
        "dispatch": (dispatch, (r(16),)),
    }


WORKLOADS = _workload_cases()


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_seed_workloads_match_jax(target, name):
    fn, args = WORKLOADS[name]
    assert all(a.dtype == np.float32 for a in jax.tree_util.tree_leaves(args))
    got = hlo_run(lambda *a: fn(hnp, hlo.nn, *a), args, target)
    want = jax_run(lambda *a: fn(jnp, JNN, *a), args)
    assert_same(got, want, rtol=2e-5, atol=2e-5, what=name)


def test_transformer_layer_ir_has_the_expected_structure():
    fn, args = WORKLOADS["transformer_layer"]
    ir = hlo.make_ir(lambda *a: fn(hnp, hlo.nn, *a))(*args)
    names = [op.name for op in ir.main.ops]
    assert names.count("dot_general") == 8  # q, k, v, scores, context, out, ffn1, ffn2
    assert "exponential" in names and "rsqrt" in names and "tanh" in names
    assert str(ir.main.result_types[0]) == "f32[2,8,64]"
    hlo.ir.verify_module(ir)
