"""The seed workloads: one table of pure functions, their sizes, and how to make their inputs.

Each workload is written once as ``fn(ops, *arrays)`` where ``ops`` carries an array namespace
(``ops.xp``: numpy, jax.numpy or hlo.numpy), the composite nn helpers over it (``ops.nn``) and, for
the training step, a gradient transform (``ops.grad``) and, for per-example gradients, a batching
transform (``ops.vmap``). numpy, jax.jit, IREE (through jax's
StableHLO) and hlo therefore run the same definition; torch has its own small implementations in
``bench/torch_impl.py`` with the same math. Inputs come from ``numpy.random.default_rng(0)``; the
reference is the numpy definition evaluated in float64 on the same (rounded) inputs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from bench.nnlib import NN

MODES = ("cpu", "gpu", "quick")


class Ops:
    """What a workload body may use: ``xp`` (array namespace), ``nn`` (NN over xp), ``grad``,
    ``vmap``, ``lax`` (jax.lax or hlo.lax; the families' bodies)."""

    def __init__(self, xp, grad=None, vmap=None, lax=None):
        self.xp = xp
        self.nn = NN(xp)
        self.grad = grad
        self.vmap = vmap
        self.lax = lax


def np_dtype(name: str):
    """numpy dtype for a short type name: f16, bf16 (ml_dtypes), f32, f64."""
    if name == "bf16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[name])


@dataclass
class Workload:
    """One row group of the bench table.

    ``dims[mode]`` holds the size parameters for a mode; ``dtypes[mode]`` the float types run in
    it. ``make_inputs(rng, dims, dtype)`` returns the positional arrays. ``numpy_fn`` replaces
    ``fn`` for plain numpy (and the float64 reference) where numpy lacks what ``fn`` needs
    (autodiff, vmap); ``needs_grad`` / ``needs_vmap`` mark bodies that call ``ops.grad`` / ``ops.vmap``
(a system without them skips the workload). ``delta_of`` maps output index -> input index for outputs that are updated
    inputs: the check compares the update (output - input), so a wrong gradient cannot hide under
    a parameter's magnitude. ``flops(dims)`` counts matrix-product flops; ``memory_bound``
    workloads also report their fraction of the machine's copy bandwidth. ``section`` is "seed"
    (the workloads above) or "families" (bench/families.py); ``imported`` workloads reach hlo as
    the StableHLO of ``jax.jit(fn).lower(...)`` (``hlo.load_stablehlo``), as a jax user's do.
    """
    id: str
    what: str
    fn: Callable
    make_inputs: Callable
    dims: dict
    dtypes: dict
    memory_bound: bool = False
    flops: Optional[Callable] = None
    numpy_fn: Optional[Callable] = None
    needs_grad: bool = False
    needs_vmap: bool = False
    delta_of: dict = field(default_factory=dict)
    section: str = "seed"
    imported: bool = False


@dataclass
class Case:
    """A workload at one mode's sizes and one dtype: what a table row measures."""
    workload: Workload
    mode: str
    dtype: str

    @property
    def dims(self) -> dict:
        return self.workload.dims[self.mode]

    @property
    def name(self) -> str:
        return self.workload.id if self.dtype == "f32" else f"{self.workload.id}[{self.dtype}]"

    def inputs(self) -> list:
        return self.workload.make_inputs(np.random.default_rng(0), self.dims, np_dtype(self.dtype))

    def shapes(self, inputs) -> str:
        return " ".join(f"{_short(a.dtype)}{list(a.shape)}".replace(" ", "") for a in inputs)

    def flops(self) -> Optional[float]:
        return self.workload.flops(self.dims) if self.workload.flops else None


def _short(dt) -> str:
    dt = np.dtype(dt)
    if dt.name == "bfloat16":
        return "bf16"
    return {"f": "f", "i": "s", "u": "u", "b": "pred"}[dt.kind] + (str(dt.itemsize * 8) if dt.kind != "b" else "")


def _normal(rng, shape, dtype, scale=1.0, shift=0.0):
    return (rng.standard_normal(shape) * scale + shift).astype(dtype)


# ---------------------------------------------------------------- workload bodies

def tinyops(ops, x):
    xp = ops.xp
    y = x * 2.0 + 1.0
    y = 1.0 / (1.0 + xp.exp(-y))
    y = y * y
    y = xp.tanh(y)
    return y / (xp.abs(y) + 1.0)


def ln_linear_gelu_res(ops, x, w, b):
    h = ops.nn.layer_norm(x, eps=1e-5)
    return ops.nn.gelu_tanh(h @ w + b) + x


def simple_mlp(ops, x, w1, b1, w2, b2):
    return ops.nn.gelu_tanh(x @ w1 + b1) @ w2 + b2


def linear_relu(ops, x, w, b):
    return ops.xp.maximum(x @ w + b, 0.0)


def softmax(ops, x):
    return ops.nn.softmax(x)


def layernorm(ops, x, gamma, beta):
    return ops.nn.layer_norm(x, gamma, beta, eps=1e-5)


N_HEADS = 8


def transformer_layer(ops, x, wq, bq, wk, bk, wv, bv, wo, bo, g1, be1, w1, b1, w2, b2, g2, be2):
    """Post-norm encoder layer: x -> LN(x + MHA(x)) -> LN(h + FFN(h)), 8 heads, tanh-GELU FFN."""
    xp, nn = ops.xp, ops.nn
    B, S, D = x.shape
    H, Dh = N_HEADS, D // N_HEADS

    def heads(t):                                   # [B,S,D] -> [B,H,S,Dh]
        return xp.transpose(xp.reshape(t, (B, S, H, Dh)), (0, 2, 1, 3))

    q = heads(x @ wq + bq)
    k = heads(x @ wk + bk)
    v = heads(x @ wv + bv)
    scores = (q @ xp.transpose(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(Dh))
    o = nn.softmax(scores) @ v                      # [B,H,S,Dh]
    o = xp.reshape(xp.transpose(o, (0, 2, 1, 3)), (B, S, D))
    h = nn.layer_norm(x + (o @ wo + bo), g1, be1)
    f = nn.gelu_tanh(h @ w1 + b1) @ w2 + b2
    return nn.layer_norm(h + f, g2, be2)


LEARNING_RATE = 0.1


def mlp_loss(ops, w1, b1, w2, b2, x, labels):
    """Mean softmax cross-entropy of a 784->512->10 relu MLP (labels int32 class ids)."""
    xp, nn = ops.xp, ops.nn
    logits = nn.relu(x @ w1 + b1) @ w2 + b2
    onehot = (labels[:, None] == xp.arange(logits.shape[-1])[None, :]).astype(logits.dtype)
    return -xp.mean(xp.sum(onehot * nn.log_softmax(logits), axis=-1))


def mlp_train_step(ops, w1, b1, w2, b2, x, labels):
    """One SGD step; returns the updated parameters and the loss before the step."""
    loss = mlp_loss(ops, w1, b1, w2, b2, x, labels)
    g = ops.grad(lambda *p: mlp_loss(ops, *p, x, labels), argnums=(0, 1, 2, 3))(w1, b1, w2, b2)
    return (w1 - LEARNING_RATE * g[0], b1 - LEARNING_RATE * g[1],
            w2 - LEARNING_RATE * g[2], b2 - LEARNING_RATE * g[3], loss)


def mlp_train_step_manual(ops, w1, b1, w2, b2, x, labels):
    """The same step with hand-written backpropagation (numpy has no autodiff)."""
    xp, nn = ops.xp, ops.nn
    pre = x @ w1 + b1
    h = nn.relu(pre)
    logits = h @ w2 + b2
    onehot = (labels[:, None] == xp.arange(logits.shape[-1])[None, :]).astype(logits.dtype)
    logp = nn.log_softmax(logits)
    loss = -xp.mean(xp.sum(onehot * logp, axis=-1))
    dlogits = (xp.exp(logp) - onehot) / x.shape[0]
    g_w2 = h.T @ dlogits
    g_b2 = xp.sum(dlogits, axis=0)
    dpre = (dlogits @ w2.T) * (pre > 0).astype(pre.dtype)
    g_w1 = x.T @ dpre
    g_b1 = xp.sum(dpre, axis=0)
    return (w1 - LEARNING_RATE * g_w1, b1 - LEARNING_RATE * g_b1,
            w2 - LEARNING_RATE * g_w2, b2 - LEARNING_RATE * g_b2, loss)


PER_EXAMPLE_AXES = (None, None, None, None, 0, 0)     # parameters shared, (x, label) batched


def mlp_example_loss(ops, w1, b1, w2, b2, x, label):
    """Softmax cross-entropy of the 784->512->10 relu MLP on ONE example (x [d_in], label int32)."""
    xp, nn = ops.xp, ops.nn
    logits = nn.relu(x @ w1 + b1) @ w2 + b2
    onehot = (label == xp.arange(logits.shape[-1])).astype(logits.dtype)
    return -xp.sum(onehot * nn.log_softmax(logits))


def per_example_grads(ops, w1, b1, w2, b2, x, labels):
    """vmap(grad(loss of one example)) over the batch: each example's gradients of w1, b1, w2, b2."""
    g = ops.grad(lambda *a: mlp_example_loss(ops, *a), argnums=(0, 1, 2, 3))
    return ops.vmap(g, in_axes=PER_EXAMPLE_AXES)(w1, b1, w2, b2, x, labels)


def per_example_grads_manual(ops, w1, b1, w2, b2, x, labels):
    """The same per-example gradients by hand-written backpropagation, batched with einsum."""
    xp, nn = ops.xp, ops.nn
    pre = x @ w1 + b1                                       # [n, h]
    h = nn.relu(pre)
    logits = h @ w2 + b2                                    # [n, c]
    onehot = (labels[:, None] == xp.arange(logits.shape[-1])[None, :]).astype(logits.dtype)
    dlogits = xp.exp(nn.log_softmax(logits)) - onehot      # d loss_i / d logits_i (no 1/n)
    dpre = (dlogits @ w2.T) * (pre > 0).astype(pre.dtype)
    return (xp.einsum("ni,nh->nih", x, dpre), dpre, xp.einsum("nh,nc->nhc", h, dlogits), dlogits)


def dispatch(ops, x):
    return x + 1.0


# ---------------------------------------------------------------- inputs

def _in_tinyops(rng, d, dt):
    return [_normal(rng, d["x"], dt)]


def _in_ln_linear(rng, d, dt):
    B, S, D = d["x"]
    return [_normal(rng, (B, S, D), dt), _normal(rng, (D, D), dt, 1 / math.sqrt(D)),
            _normal(rng, (D,), dt, 0.1)]


def _in_mlp(rng, d, dt):
    n, i, h = d["batch"], d["d_in"], d["hidden"]
    return [_normal(rng, (n, i), dt), _normal(rng, (i, h), dt, 1 / math.sqrt(i)), _normal(rng, (h,), dt, 0.1),
            _normal(rng, (h, i), dt, 1 / math.sqrt(h)), _normal(rng, (i,), dt, 0.1)]


def _in_linear_relu(rng, d, dt):
    n, i, o = d["batch"], d["d_in"], d["d_out"]
    return [_normal(rng, (n, i), dt), _normal(rng, (i, o), dt, 1 / math.sqrt(i)), _normal(rng, (o,), dt, 0.1)]


def _in_layernorm(rng, d, dt):
    n, f = d["x"]
    return [_normal(rng, (n, f), dt), _normal(rng, (f,), dt, 0.1, 1.0), _normal(rng, (f,), dt, 0.1)]


def _in_transformer(rng, d, dt):
    B, S, D = d["x"]
    F = d["ffn"]
    arrays = [_normal(rng, (B, S, D), dt)]
    for _ in range(4):                                  # wq bq wk bk wv bv wo bo
        arrays += [_normal(rng, (D, D), dt, 1 / math.sqrt(D)), _normal(rng, (D,), dt, 0.1)]
    arrays += [_normal(rng, (D,), dt, 0.1, 1.0), _normal(rng, (D,), dt, 0.1)]   # g1 be1
    arrays += [_normal(rng, (D, F), dt, 1 / math.sqrt(D)), _normal(rng, (F,), dt, 0.1),
               _normal(rng, (F, D), dt, 1 / math.sqrt(F)), _normal(rng, (D,), dt, 0.1)]
    arrays += [_normal(rng, (D,), dt, 0.1, 1.0), _normal(rng, (D,), dt, 0.1)]   # g2 be2
    return arrays


def _in_train(rng, d, dt):
    n, i, h, c = d["batch"], d["d_in"], d["hidden"], d["classes"]
    return [_normal(rng, (i, h), dt, 1 / math.sqrt(i)), np.zeros((h,), dt),
            _normal(rng, (h, c), dt, 1 / math.sqrt(h)), np.zeros((c,), dt),
            rng.random((n, i)).astype(dt), rng.integers(0, c, size=(n,)).astype(np.int32)]


# ---------------------------------------------------------------- flop counts (matrix products)

def _fl_ln_linear(d):
    B, S, D = d["x"]
    return 2.0 * B * S * D * D


def _fl_mlp(d):
    return 2.0 * 2 * d["batch"] * d["d_in"] * d["hidden"]


def _fl_linear_relu(d):
    return 2.0 * d["batch"] * d["d_in"] * d["d_out"]


def _fl_transformer(d):
    B, S, D = d["x"]
    T = B * S
    return 2.0 * (4 * T * D * D + 2 * T * D * d["ffn"] + 2 * B * S * S * D)


def _fl_train(d):
    n, i, h, c = d["batch"], d["d_in"], d["hidden"], d["classes"]
    return 2.0 * 3 * (n * i * h + n * h * c) - 2.0 * n * i * h   # forward + both backward products, no dx


def _fl_per_example(d):
    n, i, h, c = d["batch"], d["d_in"], d["hidden"], d["classes"]
    forward, dh = 2.0 * n * (i * h + h * c), 2.0 * n * h * c
    return forward + dh + n * (i * h + h * c)             # + the per-example outer products x dpre, h dlogits


def _same(d):
    return {"cpu": d, "gpu": d}


WORKLOADS = [
    Workload("tinyops", "x*2+1 -> sigmoid -> x*x -> tanh -> x/(abs(x)+1)", tinyops, _in_tinyops,
             {"cpu": {"x": (4096, 4096)}, "gpu": {"x": (16384, 16384)}, "quick": {"x": (64, 96)}},
             {"cpu": ["f32"], "gpu": ["f32"], "quick": ["f32"]}, memory_bound=True),
    Workload("ln_linear_gelu_res", "layer_norm(x) (no affine, eps 1e-5) -> @w + b -> gelu(tanh) -> + x",
             ln_linear_gelu_res, _in_ln_linear,
             {**_same({"x": (32, 512, 512)}), "quick": {"x": (2, 8, 32)}},
             {"cpu": ["f32"], "gpu": ["f16"], "quick": ["f32", "f16"]}, flops=_fl_ln_linear),
    Workload("simple_mlp", "fc2(gelu(fc1(x))), 512->1024->512 with biases", simple_mlp, _in_mlp,
             {**_same({"batch": 32, "d_in": 512, "hidden": 1024}), "quick": {"batch": 4, "d_in": 32, "hidden": 64}},
             {"cpu": ["f32"], "gpu": ["f32"], "quick": ["f32"]}, flops=_fl_mlp),
    Workload("linear_relu", "max(x@w + b, 0)", linear_relu, _in_linear_relu,
             {**_same({"batch": 32, "d_in": 512, "d_out": 256}), "quick": {"batch": 4, "d_in": 32, "d_out": 16}},
             {"cpu": ["f32"], "gpu": ["f32"], "quick": ["f32"]}, flops=_fl_linear_relu),
    Workload("softmax", "softmax over the last axis", softmax, _in_tinyops,
             {"cpu": {"x": (4096, 4096)}, "gpu": {"x": (16384, 16384)}, "quick": {"x": (16, 128)}},
             {"cpu": ["f32"], "gpu": ["f32"], "quick": ["f32"]}, memory_bound=True),
    Workload("layernorm", "layer_norm with gamma, beta (eps 1e-5)", layernorm, _in_layernorm,
             {"cpu": {"x": (8192, 1024)}, "gpu": {"x": (65536, 1024)}, "quick": {"x": (16, 64)}},
             {"cpu": ["f32"], "gpu": ["f32"], "quick": ["f32"]}, memory_bound=True),
    Workload("transformer_layer", "post-norm encoder layer: 8-head self-attention (d=512) + residual + LN, "
             "FFN 512->2048->512 GELU + residual + LN", transformer_layer, _in_transformer,
             {**_same({"x": (16, 64, 512), "ffn": 2048}), "quick": {"x": (2, 8, 64), "ffn": 128}},
             {"cpu": ["f32"], "gpu": ["f32", "bf16"], "quick": ["f32", "bf16"]}, flops=_fl_transformer),
    Workload("mlp_train_step", "one SGD step (lr 0.1) of a 784->512->10 relu MLP, softmax cross-entropy, "
             "batch 128", mlp_train_step, _in_train,
             {**_same({"batch": 128, "d_in": 784, "hidden": 512, "classes": 10}),
              "quick": {"batch": 8, "d_in": 32, "hidden": 16, "classes": 10}},
             {"cpu": ["f32"], "gpu": ["f32"], "quick": ["f32"]}, flops=_fl_train,
             numpy_fn=mlp_train_step_manual, needs_grad=True, delta_of={0: 0, 1: 1, 2: 2, 3: 3}),
    Workload("per_example_grads", "vmap(grad(loss of one example)) of the 784->512->10 relu MLP, softmax "
             "cross-entropy, batch 128: per-example gradients of w1, b1, w2, b2", per_example_grads, _in_train,
             {**_same({"batch": 128, "d_in": 784, "hidden": 512, "classes": 10}),
              "quick": {"batch": 8, "d_in": 32, "hidden": 16, "classes": 10}},
             {"cpu": ["f32"], "gpu": ["f32"], "quick": ["f32"]}, flops=_fl_per_example,
             numpy_fn=per_example_grads_manual, needs_grad=True, needs_vmap=True),
    Workload("dispatch", "x + 1 (per-call overhead)", dispatch, _in_tinyops,
             {"cpu": {"x": (8,)}, "gpu": {"x": (8,)}, "quick": {"x": (8,)}},
             {"cpu": ["f32"], "gpu": ["f32"], "quick": ["f32"]}),
]

from bench.families import FAMILIES

# WORKLOADS stays the seed workloads (tests/aot and tests/cuda run each of them traced);
# ALL_WORKLOADS has the families too.
ALL_WORKLOADS = WORKLOADS + FAMILIES
SECTIONS = ("seed", "families")
BY_ID = {w.id: w for w in ALL_WORKLOADS}


def select(ids: Optional[list], mode: str, sections: Optional[list] = None) -> list:
    """The cases to run: the named workloads (all of ``sections`` if None; every section if
    that is None too) at ``mode``'s sizes and dtypes."""
    if ids:
        unknown = [i for i in ids if i not in BY_ID]
        if unknown:
            raise SystemExit(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(BY_ID)}")
        chosen = [BY_ID[i] for i in ids]
    else:
        chosen = [w for w in ALL_WORKLOADS if sections is None or w.section in sections]
    return [Case(w, mode, dt) for w in chosen for dt in w.dtypes[mode]]


def reference(case: Case, inputs: list) -> list:
    """The float64 numpy reference outputs for ``inputs`` (floats upcast, ints kept)."""
    up = [a.astype(np.float64) if np.issubdtype(a.dtype, np.floating) or a.dtype.name == "bfloat16" else a
          for a in inputs]
    w = case.workload
    return flatten((w.numpy_fn or w.fn)(Ops(np), *up))


def flatten(out) -> list:
    """A workload result (an array or nested tuple/list of arrays) as a flat list."""
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in flatten(o)]
    return [out]
