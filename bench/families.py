"""The families section of the bench (issue 32): programs of the kinds users bring, beyond the seed
workloads hlo was tuned on. Each is a ``Workload`` (bench/workloads.py) of section "families",
written once over ``ops`` (``ops.xp``, ``ops.lax``, ``ops.grad``) with a numpy float64 reference
of its own (``numpy_fn``: numpy has no lax, no autodiff).

Some enter hlo the way a jax user's program does (``imported=True``): hlo:cpu / hlo:cuda run
``hlo.load_stablehlo(jax.jit(f).lower(*inputs).as_text())``, the StableHLO jax emits (a
``reduce_window`` over the prefix for ``cumsum`` & co., a ``select_and_scatter`` for max
pooling's gradient, a ``scatter`` add for an embedding's). The others are written with
hlo.numpy / hlo.lax / hlo.grad. All are memory-bound: the table gives GB/s and the fraction of
the machine's copy bandwidth.

    id                what (cpu sizes)
    cumsum            jnp.cumsum along the rows of x[256,4096] (imported)
    cummax_rev        lax.cummax(x, 0, reverse=True) over x[4096,256] (imported)
    cumlogsumexp      lax.cumlogsumexp along the rows of x[256,4096] (imported)
    cumsum_hlo        hlo.numpy.cumsum along the rows of x[256,4096] (traced)
    maxpool_grad      3x3 / stride 2 max pooling (VALID) of x[16,65,65,32] NHWC and the gradient
                      of sum(pool(x) * g) (imported: select_and_scatter)
    avgpool_grad      2x2 / stride 2 average pooling of x[16,64,64,32] and its gradient (traced,
                      hlo.grad)
    embedding_grad    rows of table[32768,256] at tokens[8192] times g, and the gradient of the
                      sum w.r.t. the table (imported: gather + scatter-add)
"""
from __future__ import annotations

import numpy as np

from bench.workloads import Workload, _normal

SECTION = "families"


# ---------------------------------------------------------------- cumulative ops

def cumsum(ops, x):
    return ops.xp.cumsum(x, axis=1)


def cumsum_np(ops, x):
    return np.cumsum(x, axis=1)


def cummax_rev(ops, x):
    return ops.lax.cummax(x, 0, reverse=True)


def cummax_rev_np(ops, x):
    return np.flip(np.maximum.accumulate(np.flip(x, 0), axis=0), 0)


def cumlogsumexp(ops, x):
    return ops.lax.cumlogsumexp(x, 1)


def cumlogsumexp_np(ops, x):
    return np.logaddexp.accumulate(x, axis=1)


def _in_x(rng, d, dt):
    return [_normal(rng, d["x"], dt)]


# ---------------------------------------------------------------- pooling and its gradient

def _max_pool(ops, x, w, s):
    return ops.lax.reduce_window(x, -np.inf, ops.lax.max, (1, w, w, 1), (1, s, s, 1), "VALID")


def maxpool_grad(ops, x, g):
    """3x3 windows, stride 2, VALID: the pooled x and d/dx sum(pool(x) * g)."""
    pool = _max_pool(ops, x, 3, 2)
    dx = ops.grad(lambda x: ops.xp.sum(_max_pool(ops, x, 3, 2) * g))(x)
    return pool, dx


def _windows(x, w, s):
    """x[n, h, w, c] -> [n, oh, ow, w*w, c]: each output's window, in row-major window order."""
    n, h, wd, c = x.shape
    oh, ow = (h - w) // s + 1, (wd - w) // s + 1
    return np.stack([x[:, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s, :]
                     for i in range(w) for j in range(w)], axis=3), oh, ow


def maxpool_grad_np(ops, x, g):
    win, oh, ow = _windows(x, 3, 2)
    pool = win.max(axis=3)
    first = np.argmax(win, axis=3)          # the first maximum in window order, as XLA selects (GE)
    dx = np.zeros_like(x)
    n, _, _, c = x.shape
    ni, oi, oj, ci = np.meshgrid(np.arange(n), np.arange(oh), np.arange(ow), np.arange(c), indexing="ij")
    np.add.at(dx, (ni, oi * 2 + first // 3, oj * 2 + first % 3, ci), g)
    return pool, dx


def _avg_pool(ops, x):
    return ops.lax.reduce_window(x, 0.0, ops.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") * 0.25


def avgpool_grad(ops, x, g):
    return _avg_pool(ops, x), ops.grad(lambda x: ops.xp.sum(_avg_pool(ops, x) * g))(x)


def avgpool_grad_np(ops, x, g):
    n, h, w, c = x.shape
    pool = x.reshape(n, h // 2, 2, w // 2, 2, c).mean(axis=(2, 4))
    dx = np.repeat(np.repeat(g * 0.25, 2, axis=1), 2, axis=2)
    return pool, dx


def _in_pool(rng, d, dt):
    n, h, w, c = d["x"]
    k, s = d["window"]
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    return [_normal(rng, (n, h, w, c), dt), _normal(rng, (n, oh, ow, c), dt)]


# ---------------------------------------------------------------- embedding and its gradient

def embedding_grad(ops, table, tokens, g):
    xp = ops.xp
    rows = xp.take(table, tokens, axis=0)
    dtable = ops.grad(lambda t: xp.sum(xp.take(t, tokens, axis=0) * g))(table)
    return rows, dtable


def embedding_grad_np(ops, table, tokens, g):
    dtable = np.zeros_like(table)
    np.add.at(dtable, tokens, g)
    return table[tokens], dtable


def _in_embedding(rng, d, dt):
    v, dim, t = d["vocab"], d["dim"], d["tokens"]
    return [_normal(rng, (v, dim), dt), rng.integers(0, v, size=(t,)).astype(np.int32), _normal(rng, (t, dim), dt)]


# ---------------------------------------------------------------- the table

def _f32():
    return {m: ["f32"] for m in ("cpu", "gpu", "quick")}


X_ROWS = {"cpu": {"x": (256, 4096)}, "gpu": {"x": (4096, 4096)}, "quick": {"x": (3, 40)}}
X_COLS = {"cpu": {"x": (4096, 256)}, "gpu": {"x": (4096, 4096)}, "quick": {"x": (40, 3)}}

FAMILIES = [
    Workload("cumsum", "jnp.cumsum along the rows (imported from jax: a reduce_window over the prefix)",
             cumsum, _in_x, X_ROWS, _f32(), memory_bound=True, numpy_fn=cumsum_np,
             section=SECTION, imported=True),
    Workload("cummax_rev", "lax.cummax(x, 0, reverse=True) (imported from jax)", cummax_rev, _in_x, X_COLS, _f32(),
             memory_bound=True, numpy_fn=cummax_rev_np, section=SECTION, imported=True),
    Workload("cumlogsumexp", "lax.cumlogsumexp along the rows (imported from jax)", cumlogsumexp, _in_x, X_ROWS,
             _f32(), memory_bound=True, numpy_fn=cumlogsumexp_np, section=SECTION, imported=True),
    Workload("cumsum_hlo", "hlo.numpy.cumsum along the rows (traced)", cumsum, _in_x, X_ROWS, _f32(),
             memory_bound=True, numpy_fn=cumsum_np, section=SECTION),
    Workload("maxpool_grad", "3x3/2 max pooling (VALID, NHWC) and the gradient of sum(pool(x)*g) "
             "(imported from jax: select_and_scatter)", maxpool_grad, _in_pool,
             {"cpu": {"x": (16, 65, 65, 32), "window": (3, 2)}, "gpu": {"x": (64, 129, 129, 64), "window": (3, 2)},
              "quick": {"x": (2, 9, 9, 3), "window": (3, 2)}}, _f32(), memory_bound=True,
             numpy_fn=maxpool_grad_np, needs_grad=True, section=SECTION, imported=True),
    Workload("avgpool_grad", "2x2/2 average pooling (NHWC) and its gradient (traced, hlo.grad)", avgpool_grad,
             _in_pool, {"cpu": {"x": (16, 64, 64, 32), "window": (2, 2)},
                        "gpu": {"x": (64, 128, 128, 64), "window": (2, 2)},
                        "quick": {"x": (2, 8, 8, 3), "window": (2, 2)}}, _f32(), memory_bound=True,
             numpy_fn=avgpool_grad_np, needs_grad=True, section=SECTION),
    Workload("embedding_grad", "rows of an embedding table at token ids, and the gradient of sum(rows * g) "
             "w.r.t. the table (imported from jax: gather + scatter-add)", embedding_grad, _in_embedding,
             {"cpu": {"vocab": 32768, "dim": 256, "tokens": 8192}, "gpu": {"vocab": 65536, "dim": 1024, "tokens": 32768},
              "quick": {"vocab": 50, "dim": 8, "tokens": 64}}, _f32(), memory_bound=True,
             numpy_fn=embedding_grad_np, needs_grad=True, section=SECTION, imported=True),
]
