"""The families section of the bench (issue 32): programs of the kinds users bring, beyond the seed
workloads hlo was tuned on. Each is a ``Workload`` (bench/workloads.py) of section "families",
written once over ``ops`` (``ops.xp``, ``ops.lax``, ``ops.grad``) with a numpy float64 reference
of its own (``numpy_fn``: numpy has no lax, no autodiff).

Some enter hlo the way a jax user's program does (``imported=True``): hlo:cpu / hlo:cuda run
``hlo.load_stablehlo(jax.jit(f).lower(*inputs).as_text())``, the StableHLO jax emits (a
``reduce_window`` over the prefix for ``cumsum`` & co., a ``select_and_scatter`` for max
pooling's gradient, a ``scatter`` add for an embedding's). The others are written with
hlo.numpy / hlo.lax / hlo.grad. All but the convolutions are memory-bound: the table gives GB/s
and the fraction of the machine's copy bandwidth.

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
    conv_s2           3x3 / stride 2 SAME convolution, NHWC x[8,56,56,64] * HWIO w[3,3,64,128]
                      (imported: lax.conv_general_dilated)
    conv_nchw_dil     3x3 dilation 2 SAME convolution, NCHW x[8,64,32,32] * OIHW w[64,64,3,3]
    conv_depthwise    3x3 depthwise (feature_group_count = C) NHWC x[8,56,56,128] * w[3,3,1,128]
    conv_depthwise_grad  d/dx and d/dw of sum(depthwise conv(x, w) * g), the same sizes (the weight
                      gradient: a convolution of 128 batch groups)
    conv_grouped      3x3 convolution in 4 groups, NHWC x[8,28,28,128] * w[3,3,32,128]
    conv_transpose    lax.conv_transpose 4x4 / stride 2 SAME, NHWC x[8,28,28,64] * w[4,4,64,32]
                      (an lhs-dilated convolution)
    conv_grad_s2      d/dx and d/dw of sum(conv(x, w) * g), 3x3 / stride 2 SAME, x[8,56,56,64],
                      w[3,3,64,64]: the gradient forms (lhs-dilated and window-reversed for dx,
                      batch and feature swapped for dw)
    conv_bn_relu_grad relu(batchnorm(conv(x, w))) with batch statistics (training mode), x[8,28,28,64]
                      * w[3,3,64,64], and the gradient of sum(y * g) w.r.t. x, w, gamma and beta
    lstm_grad         an LSTM over 32 steps of xs[32,32,128], hidden 256 (lax.scan), and the gradient of
                      sum(hs * g) w.r.t. wx, wh and b (imported: a while loop and its reverse)
The convolutions are compute-bound: the table gives GFLOP/s (2 x multiply-adds of the convolutions
as written; a gradient counts its two products as well).
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


# ---------------------------------------------------------------- convolutions (jax.lax as a jax user calls it)

def _pads(size, k, s, d, how):
    """(lo, hi) padding of one spatial axis, as lax's "SAME" / "VALID" compute it."""
    if how == "VALID":
        return 0, 0
    out = -(-size // s)
    total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
    return total // 2, total - total // 2


def conv_ref(x, w, strides=(1, 1), padding="SAME", lhs_dilation=(1, 1), rhs_dilation=(1, 1), groups=1):
    """float64 2-D convolution of NHWC x with HWIO w (I = C / groups), as lax.conv_general_dilated
    with dimension_numbers ("NHWC", "HWIO", "NHWC"); ``padding`` "SAME", "VALID" or explicit pairs."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    n, h, wd, c = x.shape
    kh, kw, ci, co = w.shape
    if lhs_dilation != (1, 1):
        dh, dw = lhs_dilation
        z = np.zeros((n, (h - 1) * dh + 1, (wd - 1) * dw + 1, c))
        z[:, ::dh, ::dw, :] = x
        x = z
        n, h, wd, c = x.shape
    if isinstance(padding, str):
        padding = [_pads(h, kh, strides[0], rhs_dilation[0], padding), _pads(wd, kw, strides[1], rhs_dilation[1], padding)]
    x = np.pad(x, [(0, 0), tuple(padding[0]), tuple(padding[1]), (0, 0)])
    sh, sw = strides
    rh, rw = rhs_dilation
    oh = (x.shape[1] - (kh - 1) * rh - 1) // sh + 1
    ow = (x.shape[2] - (kw - 1) * rw - 1) // sw + 1
    out = np.zeros((n, oh, ow, co))
    cg, og = c // groups, co // groups
    for i in range(kh):
        for j in range(kw):
            tap = x[:, i * rh:i * rh + sh * (oh - 1) + 1:sh, j * rw:j * rw + sw * (ow - 1) + 1:sw, :]
            for g in range(groups):
                out[..., g * og:(g + 1) * og] += tap[..., g * cg:(g + 1) * cg] @ w[i, j, :, g * og:(g + 1) * og]
    return out


NHWC = ("NHWC", "HWIO", "NHWC")


def conv_s2(ops, x, w):
    return ops.lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=NHWC)


def conv_s2_np(ops, x, w):
    return conv_ref(x, w, strides=(2, 2))


def conv_nchw_dil(ops, x, w):
    return ops.lax.conv_general_dilated(x, w, (1, 1), "SAME", rhs_dilation=(2, 2),
                                        dimension_numbers=("NCHW", "OIHW", "NCHW"))


def conv_nchw_dil_np(ops, x, w):
    y = conv_ref(np.transpose(x, (0, 2, 3, 1)), np.transpose(w, (2, 3, 1, 0)), rhs_dilation=(2, 2))
    return np.transpose(y, (0, 3, 1, 2))


def conv_depthwise(ops, x, w):
    return ops.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=NHWC,
                                        feature_group_count=x.shape[3])


def conv_depthwise_np(ops, x, w):
    return conv_ref(x, w, groups=x.shape[3])


def conv_grouped(ops, x, w):
    return ops.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=NHWC,
                                        feature_group_count=x.shape[3] // w.shape[2])


def conv_grouped_np(ops, x, w):
    return conv_ref(x, w, groups=x.shape[3] // w.shape[2])


def conv_transpose(ops, x, w):
    return ops.lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=NHWC)


def conv_transpose_np(ops, x, w):
    # lax.conv_transpose(padding="SAME", stride s, kernel k): an lhs-dilated convolution padded
    # by k + s - 2 in all (ceil of half before, k - 1 where s > k - 1), s times the input's size
    k, s = w.shape[0], 2
    pad_len = k + s - 2
    lo = k - 1 if s > k - 1 else -(-pad_len // 2)
    return conv_ref(x, w, padding=[(lo, pad_len - lo)] * 2, lhs_dilation=(s, s))


def conv_grad_s2(ops, x, w, g):
    def loss(x, w):
        return ops.xp.sum(conv_s2(ops, x, w) * g)
    return ops.grad(loss, argnums=(0, 1))(x, w)


def _conv_taps(x, w, s, pads):
    """The padded NHWC x and (tap index, its strided window of x) of each tap of HWIO w."""
    kh, kw = w.shape[:2]
    xp = np.pad(np.asarray(x, np.float64), [(0, 0), pads[0], pads[1], (0, 0)])
    oh = (xp.shape[1] - kh) // s + 1
    ow = (xp.shape[2] - kw) // s + 1
    taps = [((i, j), (slice(None), slice(i, i + s * (oh - 1) + 1, s), slice(j, j + s * (ow - 1) + 1, s)))
            for i in range(kh) for j in range(kw)]
    return xp, taps


def _conv_vjp(x, w, g, s):
    """d/dx and d/dw of sum(conv(x, w, stride s, SAME) * g), float64."""
    w = np.asarray(w, np.float64)
    g = np.asarray(g, np.float64)
    pads = [_pads(x.shape[1], w.shape[0], s, 1, "SAME"), _pads(x.shape[2], w.shape[1], s, 1, "SAME")]
    xp, taps = _conv_taps(x, w, s, pads)
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    for (i, j), sl in taps:
        dxp[sl] += g @ w[i, j].T
        dw[i, j] = np.einsum("nhwc,nhwo->co", xp[sl], g)
    h, wd = x.shape[1:3]
    return dxp[:, pads[0][0]:pads[0][0] + h, pads[1][0]:pads[1][0] + wd, :], dw


def conv_grad_s2_np(ops, x, w, g):
    return _conv_vjp(x, w, g, 2)


def conv_depthwise_grad(ops, x, w, g):
    def loss(x, w):
        return ops.xp.sum(conv_depthwise(ops, x, w) * g)
    return ops.grad(loss, argnums=(0, 1))(x, w)


def conv_depthwise_grad_np(ops, x, w, g):
    """d/dx and d/dw of sum(depthwise conv(x, w, SAME) * g), float64."""
    w = np.asarray(w, np.float64)
    g = np.asarray(g, np.float64)
    pads = [_pads(x.shape[1], w.shape[0], 1, 1, "SAME"), _pads(x.shape[2], w.shape[1], 1, 1, "SAME")]
    xp, taps = _conv_taps(x, w, 1, pads)
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    for (i, j), sl in taps:
        dxp[sl] += g * w[i, j, 0]
        dw[i, j, 0] = np.einsum("nhwc,nhwc->c", xp[sl], g)
    h, wd = x.shape[1:3]
    return dxp[:, pads[0][0]:pads[0][0] + h, pads[1][0]:pads[1][0] + wd, :], dw


BN_EPS = 1e-5


def conv_bn_relu(ops, x, w, gamma, beta):
    y = ops.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=NHWC)
    mean = ops.xp.mean(y, axis=(0, 1, 2))
    var = ops.xp.mean(ops.xp.square(y - mean), axis=(0, 1, 2))
    return ops.xp.maximum((y - mean) / ops.xp.sqrt(var + BN_EPS) * gamma + beta, 0.0)


def conv_bn_relu_grad(ops, x, w, gamma, beta, g):
    """The training step's block: relu(batchnorm(conv(x, w))) with batch statistics, and the
    gradient of sum(block * g) w.r.t. x, w, gamma and beta."""
    def loss(x, w, gamma, beta):
        return ops.xp.sum(conv_bn_relu(ops, x, w, gamma, beta) * g)
    return (conv_bn_relu(ops, x, w, gamma, beta),) + tuple(ops.grad(loss, argnums=(0, 1, 2, 3))(x, w, gamma, beta))


def conv_bn_relu_grad_np(ops, x, w, gamma, beta, g):
    y = conv_ref(x, w)
    mean = y.mean(axis=(0, 1, 2))
    var = np.square(y - mean).mean(axis=(0, 1, 2))
    inv = 1.0 / np.sqrt(var + BN_EPS)
    yhat = (y - mean) * inv
    z = yhat * gamma + beta
    out = np.maximum(z, 0.0)
    dz = np.where(z > 0, np.asarray(g, np.float64), 0.0)
    dgamma = (dz * yhat).sum(axis=(0, 1, 2))
    dbeta = dz.sum(axis=(0, 1, 2))
    m = y.size // y.shape[3]
    dyhat = dz * gamma
    dy = inv / m * (m * dyhat - dyhat.sum(axis=(0, 1, 2)) - yhat * (dyhat * yhat).sum(axis=(0, 1, 2)))
    dx, dw = _conv_vjp(x, w, dy, 1)
    return out, dx, dw, dgamma, dbeta


def _in_conv(rng, d, dt):
    x, w = d["x"], d["w"]
    fan_in = w[0] * w[1] * w[2] if d.get("layout", "NHWC") == "NHWC" else w[1] * w[2] * w[3]
    ins = [_normal(rng, x, dt), _normal(rng, w, dt, scale=fan_in ** -0.5)]
    if "g" in d:
        ins.append(_normal(rng, d["g"], dt))
    return ins


def _in_conv_bn(rng, d, dt):
    x, w = d["x"], d["w"]
    n, h, wd, _ = x
    co = w[3]
    return [_normal(rng, x, dt), _normal(rng, w, dt, scale=(w[0] * w[1] * w[2]) ** -0.5),
            _normal(rng, (co,), dt, scale=0.1, shift=1.0), _normal(rng, (co,), dt, scale=0.1),
            _normal(rng, (n, h, wd, co), dt)]


def _conv_flops(d, out_hw, groups=1, passes=1):
    """2 x multiply-adds of a convolution of HWIO ``w`` (OIHW for ``layout`` NCHW) producing
    ``out_hw`` positions per image, ``passes`` times (a gradient adds two products)."""
    w = d["w"]
    taps_in_out = w[0] * w[1] * w[2] * w[3] if d.get("layout", "NHWC") == "NHWC" else int(np.prod(w))
    return 2.0 * d["x"][0] * out_hw * taps_in_out * passes


def _sq(d, s=1, axis=1):
    return -(-d["x"][axis] // s) * -(-d["x"][axis + 1] // s)


def _conv_dims(cpu, quick, **extra):
    return {"cpu": {**cpu, **extra}, "gpu": {k: (v[0] * 4,) + tuple(v[1:]) if k in ("x", "g") else v
                                             for k, v in cpu.items()} | extra, "quick": {**quick, **extra}}

# ---------------------------------------------------------------- an LSTM over time steps (lax.scan) and its gradient

def _sigmoid(xp, z):
    return 1.0 / (1.0 + xp.exp(-z))


def lstm_grad(ops, xs, wx, wh, b, g):
    """An LSTM over the steps of xs[T, B, I] (lax.scan; gates i, f, g, o from xs[t] @ wx + h @ wh +
    b), its hidden states hs[T, B, H], and the gradient of sum(hs * g) w.r.t. wx, wh and b."""
    xp = ops.xp
    hdim = wh.shape[0]

    def run(wx, wh, b):
        def step(carry, x):
            h, c = carry
            z = x @ wx + h @ wh + b
            i, f, u, o = (z[:, k * hdim:(k + 1) * hdim] for k in range(4))
            c = _sigmoid(xp, f) * c + _sigmoid(xp, i) * xp.tanh(u)
            h = _sigmoid(xp, o) * xp.tanh(c)
            return (h, c), h
        zero = xp.zeros((xs.shape[1], hdim), xs.dtype)
        return ops.lax.scan(step, (zero, zero), xs)[1]

    hs = run(wx, wh, b)
    grads = ops.grad(lambda wx, wh, b: xp.sum(run(wx, wh, b) * g), argnums=(0, 1, 2))(wx, wh, b)
    return (hs,) + tuple(grads)


def lstm_grad_np(ops, xs, wx, wh, b, g):
    """The same in float64, its gradient by backpropagation through time written out."""
    xs, wx, wh, b, g = (np.asarray(a, np.float64) for a in (xs, wx, wh, b, g))
    T, B, _ = xs.shape
    H = wh.shape[0]
    sig = lambda z: 1.0 / (1.0 + np.exp(-z))
    h, c = np.zeros((B, H)), np.zeros((B, H))
    hs, cache = [], []
    for t in range(T):
        z = xs[t] @ wx + h @ wh + b
        i, f, u, o = sig(z[:, :H]), sig(z[:, H:2 * H]), np.tanh(z[:, 2 * H:3 * H]), sig(z[:, 3 * H:])
        c_prev, h_prev = c, h
        c = f * c + i * u
        h = o * np.tanh(c)
        hs.append(h)
        cache.append((i, f, u, o, c_prev, h_prev, c))
    dwx, dwh, db = np.zeros_like(wx), np.zeros_like(wh), np.zeros_like(b)
    dh_next, dc_next = np.zeros((B, H)), np.zeros((B, H))
    for t in reversed(range(T)):
        i, f, u, o, c_prev, h_prev, c = cache[t]
        dh = g[t] + dh_next
        tc = np.tanh(c)
        do = dh * tc
        dc = dh * o * (1 - tc ** 2) + dc_next
        di, df, du = dc * u, dc * c_prev, dc * i
        dz = np.concatenate([di * i * (1 - i), df * f * (1 - f), du * (1 - u ** 2), do * o * (1 - o)], axis=1)
        dwx += xs[t].T @ dz
        dwh += h_prev.T @ dz
        db += dz.sum(axis=0)
        dh_next = dz @ wh.T
        dc_next = dc * f
    return np.stack(hs), dwx, dwh, db


def _in_lstm(rng, d, dt):
    T, B, I, H = d["steps"], d["batch"], d["inputs"], d["hidden"]
    return [_normal(rng, (T, B, I), dt), _normal(rng, (I, 4 * H), dt, scale=I ** -0.5),
            _normal(rng, (H, 4 * H), dt, scale=H ** -0.5), _normal(rng, (4 * H,), dt, scale=0.1),
            _normal(rng, (T, B, H), dt)]


def _lstm_flops(d):
    """2 x the multiply-adds of the forward products, three times (forward, and the backward
    pass's two products per product)."""
    T, B, I, H = d["steps"], d["batch"], d["inputs"], d["hidden"]
    return 3 * 2.0 * T * B * (I + H) * 4 * H


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
    Workload("conv_s2", "3x3/2 SAME convolution, NHWC x HWIO (imported from jax: lax.conv_general_dilated)",
             conv_s2, _in_conv, _conv_dims({"x": (8, 56, 56, 64), "w": (3, 3, 64, 128)},
                                           {"x": (2, 9, 9, 3), "w": (3, 3, 3, 4)}), _f32(),
             flops=lambda d: _conv_flops(d, _sq(d, 2)), numpy_fn=conv_s2_np, section=SECTION, imported=True),
    Workload("conv_nchw_dil", "3x3 SAME convolution with rhs dilation 2, NCHW x OIHW (imported from jax)",
             conv_nchw_dil, _in_conv, _conv_dims({"x": (8, 64, 32, 32), "w": (64, 64, 3, 3)},
                                                 {"x": (2, 3, 9, 9), "w": (4, 3, 3, 3)}, layout="NCHW"), _f32(),
             flops=lambda d: _conv_flops(d, _sq(d, 1, 2)), numpy_fn=conv_nchw_dil_np, section=SECTION, imported=True),
    Workload("conv_depthwise", "3x3 depthwise SAME convolution (feature_group_count = channels), NHWC "
             "(imported from jax)", conv_depthwise, _in_conv,
             _conv_dims({"x": (8, 56, 56, 128), "w": (3, 3, 1, 128)}, {"x": (2, 9, 9, 4), "w": (3, 3, 1, 4)}),
             _f32(), flops=lambda d: _conv_flops(d, _sq(d)), numpy_fn=conv_depthwise_np, section=SECTION,
             imported=True),
    Workload("conv_depthwise_grad", "d/dx and d/dw of sum(depthwise conv(x, w) * g), 3x3 SAME, NHWC (imported "
             "from jax: the weight gradient a batch-grouped convolution)", conv_depthwise_grad, _in_conv,
             _conv_dims({"x": (8, 56, 56, 128), "w": (3, 3, 1, 128), "g": (8, 56, 56, 128)},
                        {"x": (2, 9, 9, 4), "w": (3, 3, 1, 4), "g": (2, 9, 9, 4)}),
             _f32(), flops=lambda d: _conv_flops(d, _sq(d), passes=2), numpy_fn=conv_depthwise_grad_np,
             needs_grad=True, section=SECTION, imported=True),
    Workload("lstm_grad", "an LSTM over 32 steps (lax.scan) and the gradient of sum(hs * g) w.r.t. its weights "
             "(imported from jax: a while loop and its reverse)", lstm_grad, _in_lstm,
             {"cpu": {"steps": 32, "batch": 32, "inputs": 128, "hidden": 256},
              "gpu": {"steps": 32, "batch": 256, "inputs": 512, "hidden": 1024},
              "quick": {"steps": 4, "batch": 2, "inputs": 3, "hidden": 5}}, _f32(), flops=_lstm_flops,
             numpy_fn=lstm_grad_np, needs_grad=True, section=SECTION, imported=True),
    Workload("conv_grouped", "3x3 SAME convolution in 4 feature groups, NHWC (imported from jax)", conv_grouped,
             _in_conv, _conv_dims({"x": (8, 28, 28, 128), "w": (3, 3, 32, 128)}, {"x": (2, 9, 9, 8), "w": (3, 3, 2, 8)}),
             _f32(), flops=lambda d: _conv_flops(d, _sq(d)), numpy_fn=conv_grouped_np, section=SECTION,
             imported=True),
    Workload("conv_transpose", "lax.conv_transpose 4x4/2 SAME, NHWC (imported from jax: an lhs-dilated convolution)",
             conv_transpose, _in_conv, _conv_dims({"x": (8, 28, 28, 64), "w": (4, 4, 64, 32)},
                                                  {"x": (2, 5, 5, 3), "w": (4, 4, 3, 4)}), _f32(),
             flops=lambda d: _conv_flops(d, _sq(d)), numpy_fn=conv_transpose_np, section=SECTION, imported=True),
    Workload("conv_grad_s2", "d/dx and d/dw of sum(conv(x, w) * g), 3x3/2 SAME, NHWC (imported from jax: the "
             "gradient convolutions)", conv_grad_s2, _in_conv,
             _conv_dims({"x": (8, 56, 56, 64), "w": (3, 3, 64, 64), "g": (8, 28, 28, 64)},
                        {"x": (2, 9, 9, 3), "w": (3, 3, 3, 4), "g": (2, 5, 5, 4)}), _f32(),
             flops=lambda d: _conv_flops(d, _sq(d, 2), passes=2), numpy_fn=conv_grad_s2_np, needs_grad=True,
             section=SECTION, imported=True),
    Workload("conv_bn_relu_grad", "relu(batchnorm(conv(x, w))) in training mode and its gradient w.r.t. x, w, "
             "gamma, beta (imported from jax)", conv_bn_relu_grad, _in_conv_bn,
             _conv_dims({"x": (8, 28, 28, 64), "w": (3, 3, 64, 64)}, {"x": (2, 6, 6, 3), "w": (3, 3, 3, 4)}),
             _f32(), flops=lambda d: _conv_flops(d, _sq(d), passes=3), numpy_fn=conv_bn_relu_grad_np,
             needs_grad=True, section=SECTION, imported=True),
]
