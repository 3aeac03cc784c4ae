"""The seed workloads, written with jax (so that XLA:CPU can compile the very same program for
comparison); ``hlo`` imports them through StableHLO (``hlo.ir.stablehlo.import_module``).

Each entry: name -> (function, list of argument arrays). Shapes are those of the issue's
measurements where the issue gives them (simple_mlp: 128 KiB of hidden activations; transformer
layer: batch 8, sequence 128, width 512, 8 heads, MLP 2048 with a fused QKV projection).
"""
from __future__ import annotations

import numpy as np


def _rng():
    return np.random.default_rng(0)


def _ln(jnp, jax, x, g, b):
    mu = jnp.mean(x, -1, keepdims=True)
    v = jnp.mean((x - mu) ** 2, -1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(v + 1e-5) * g + b


def workloads():
    import jax
    import jax.numpy as jnp

    r = _rng()

    def A(*s, scale=1.0):
        return (r.standard_normal(s) * scale).astype(np.float32)

    def tinyops(x, y):
        return jnp.sin(x) * y + jnp.exp(-x) - 1.0

    def ln_linear_gelu_res(x, g, b, w, bb):
        return x + jax.nn.gelu(_ln(jnp, jax, x, g, b) @ w + bb)

    def simple_mlp(x, w1, b1, w2, b2):
        return jax.nn.relu(x @ w1 + b1) @ w2 + b2

    def linear_relu(x, w, b):
        return jax.nn.relu(x @ w + b)

    def softmax(x):
        return jax.nn.softmax(x, axis=-1)

    def layernorm(x, g, b):
        return _ln(jnp, jax, x, g, b)

    B, S, D, H, F = 8, 128, 512, 8, 2048

    def transformer_layer(x, g1, b1, wqkv, wo, g2, b2, w1, bb1, w2, bb2):
        h = _ln(jnp, jax, x, g1, b1)
        qkv = (h @ wqkv).reshape(B, S, 3, H, D // H)
        q = qkv[:, :, 0].transpose(0, 2, 1, 3)
        k = qkv[:, :, 1].transpose(0, 2, 1, 3)
        v = qkv[:, :, 2].transpose(0, 2, 1, 3)
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(D // H).astype(np.float32)
        p = jax.nn.softmax(s, -1)
        o = jnp.einsum("bhqk,bhkd->bhqd", p, v).transpose(0, 2, 1, 3).reshape(B, S, D)
        x = x + o @ wo
        h = _ln(jnp, jax, x, g2, b2)
        return x + jax.nn.gelu(h @ w1 + bb1) @ w2 + bb2

    def mlp_loss(params, x, y):
        (w1, b1), (w2, b2) = params
        h = jax.nn.relu(x @ w1 + b1)
        logits = h @ w2 + b2
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, -1))

    def mlp_train_step(w1, b1, w2, b2, x, y):
        params = ((w1, b1), (w2, b2))
        loss, g = jax.value_and_grad(mlp_loss)(params, x, y)
        (gw1, gb1), (gw2, gb2) = g
        lr = 0.01
        return w1 - lr * gw1, b1 - lr * gb1, w2 - lr * gw2, b2 - lr * gb2, loss

    labels = np.eye(10, dtype=np.float32)[r.integers(0, 10, 128)]
    return {
        "tinyops": (tinyops, [A(4, 8), A(4, 8)]),
        "ln_linear_gelu_res": (ln_linear_gelu_res, [A(128, 256), A(256), A(256), A(256, 256, scale=0.06), A(256)]),
        "simple_mlp": (simple_mlp, [A(128, 256), A(256, 256, scale=0.06), A(256), A(256, 10, scale=0.06), A(10)]),
        "linear_relu": (linear_relu, [A(64, 128), A(128, 256, scale=0.09), A(256)]),
        "softmax": (softmax, [A(256, 512)]),
        "layernorm": (layernorm, [A(256, 512), A(512), A(512)]),
        "transformer_layer": (transformer_layer, [
            A(B, S, D), A(D), A(D), A(D, 3 * D, scale=0.04), A(D, D, scale=0.04), A(D), A(D),
            A(D, F, scale=0.04), A(F), A(F, D, scale=0.02), A(D)]),
        "mlp_train_step": (mlp_train_step, [A(784, 512, scale=0.04), A(512), A(512, 10, scale=0.04),
                                            A(10), A(128, 784), labels]),
    }

# XLA:CPU figures from the issue (jax 0.10.2): kernels, temp bytes.
ISSUE_XLA = {
    "tinyops": (1, 0), "ln_linear_gelu_res": (2, 0), "simple_mlp": (4, 128 * 1024),
    "linear_relu": (2, 0), "softmax": (1, 0), "layernorm": (1, 0),
    "transformer_layer": (22, 16 * 1024 * 1024), "mlp_train_step": (27, 517 * 1024),
}


def stablehlo_text(name):
    import jax
    f, args = workloads()[name]
    return jax.jit(f).lower(*args).as_text()


def xla_figures(f, args):
    """(kernels, temp bytes) of XLA:CPU for ``f``: instructions of the optimized ENTRY other
    than parameter, constant, tuple, get-tuple-element and bitcast."""
    import re

    import jax
    c = jax.jit(f).lower(*args).compile()
    text = c.as_text()
    entry = text[text.index("\nENTRY"):]
    body = entry[entry.index("{") + 1:]
    body = body[:body.index("\n}")]
    n = 0
    for line in body.strip().split("\n"):
        m = re.search(r"=\s*\S+\s+([\w-]+)\(", line)
        if m and m.group(1) not in ("parameter", "constant", "tuple", "get-tuple-element", "bitcast"):
            n += 1
    return n, c.memory_analysis().temp_size_in_bytes
