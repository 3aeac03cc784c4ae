"""torch implementations of the workloads: the same math as bench/workloads.py, written the way a
torch user would (F.layer_norm, F.gelu(approximate="tanh"), torch.softmax, autograd).

Each entry takes torch tensors in the workload's positional order and returns a tensor or a tuple
of tensors. ``train_step_compiled`` is the variant given to torch.compile: it takes gradients with
torch.func (which Dynamo captures in one graph) instead of torch.autograd.grad.
``per_example_grads`` is ``torch.func.vmap(torch.func.grad(loss of one example))`` in both tables.
The families (bench/families.py) have eager versions (``FAMILIES``: torch.cumsum, logcumsumexp,
F.max_pool2d / avg_pool2d on the NHWC input permuted, F.embedding, gradients by autograd);
torch.compile gets the ones without gradients.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from bench.workloads import LEARNING_RATE, N_HEADS


def tinyops(x):
    y = torch.sigmoid(x * 2.0 + 1.0)
    y = torch.tanh(y * y)
    return y / (torch.abs(y) + 1.0)


def ln_linear_gelu_res(x, w, b):
    h = F.layer_norm(x, x.shape[-1:], eps=1e-5)
    return F.gelu(torch.addmm(b, h.reshape(-1, h.shape[-1]), w).reshape(x.shape), approximate="tanh") + x


def simple_mlp(x, w1, b1, w2, b2):
    return torch.addmm(b2, F.gelu(torch.addmm(b1, x, w1), approximate="tanh"), w2)


def linear_relu(x, w, b):
    return torch.relu(torch.addmm(b, x, w))


def softmax(x):
    return torch.softmax(x, dim=-1)


def layernorm(x, gamma, beta):
    return F.layer_norm(x, x.shape[-1:], gamma, beta, eps=1e-5)


def transformer_layer(x, wq, bq, wk, bk, wv, bv, wo, bo, g1, be1, w1, b1, w2, b2, g2, be2):
    B, S, D = x.shape
    H, Dh = N_HEADS, D // N_HEADS
    x2 = x.reshape(B * S, D)

    def heads(t):
        return t.reshape(B, S, H, Dh).transpose(1, 2)

    q, k, v = (heads(torch.addmm(b, x2, w)) for w, b in ((wq, bq), (wk, bk), (wv, bv)))
    p = torch.softmax((q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(Dh)), dim=-1)
    o = (p @ v).transpose(1, 2).reshape(B * S, D)
    h = F.layer_norm(x2 + torch.addmm(bo, o, wo), (D,), g1, be1, eps=1e-5)
    f = torch.addmm(b2, F.gelu(torch.addmm(b1, h, w1), approximate="tanh"), w2)
    return F.layer_norm(h + f, (D,), g2, be2, eps=1e-5).reshape(B, S, D)


def _loss(w1, b1, w2, b2, x, labels):
    logits = torch.addmm(b2, torch.relu(torch.addmm(b1, x, w1)), w2)
    return F.cross_entropy(logits, labels.long())


def _sgd(params, grads, loss):
    return tuple(p - LEARNING_RATE * g for p, g in zip(params, grads)) + (loss,)


def mlp_train_step(w1, b1, w2, b2, x, labels):
    params = [p.detach().requires_grad_(True) for p in (w1, b1, w2, b2)]
    with torch.enable_grad():
        loss = _loss(*params, x, labels)
        grads = torch.autograd.grad(loss, params)
    return tuple(t.detach() for t in _sgd((w1, b1, w2, b2), grads, loss))


def train_step_compiled(w1, b1, w2, b2, x, labels):
    grads, loss = torch.func.grad_and_value(_loss, argnums=(0, 1, 2, 3))(w1, b1, w2, b2, x, labels)
    return _sgd((w1, b1, w2, b2), grads, loss)


def _example_loss(w1, b1, w2, b2, x, label):
    logits = torch.relu(x @ w1 + b1) @ w2 + b2
    return F.cross_entropy(logits, label.long())


def per_example_grads(w1, b1, w2, b2, x, labels):
    g = torch.func.grad(_example_loss, argnums=(0, 1, 2, 3))
    return torch.func.vmap(g, in_dims=(None, None, None, None, 0, 0))(w1, b1, w2, b2, x, labels)


def dispatch(x):
    return x + 1.0


# ---------------------------------------------------------------- the families (bench/families.py)

def _grad_of(f, x, g):
    """f(x) and d/dx sum(f(x) * g) by autograd (the harness calls under no_grad)."""
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        y = f(x)
        (dx,) = torch.autograd.grad(y, x, g)
    return y.detach(), dx


def _nchw_pool(pool):
    return lambda x: pool(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


FAMILIES = {
    "cumsum": lambda x: torch.cumsum(x, 1),
    "cumsum_hlo": lambda x: torch.cumsum(x, 1),
    "cummax_rev": lambda x: torch.flip(torch.cummax(torch.flip(x, (0,)), 0).values, (0,)),
    "cumlogsumexp": lambda x: torch.logcumsumexp(x, 1),
    "maxpool_grad": lambda x, g: _grad_of(_nchw_pool(lambda t: F.max_pool2d(t, 3, 2)), x, g),
    "avgpool_grad": lambda x, g: _grad_of(_nchw_pool(lambda t: F.avg_pool2d(t, 2, 2)), x, g),
    "embedding_grad": lambda table, tokens, g: _grad_of(lambda t: F.embedding(tokens.long(), t), table, g),
}

EAGER = {
    "tinyops": tinyops, "ln_linear_gelu_res": ln_linear_gelu_res, "simple_mlp": simple_mlp,
    "linear_relu": linear_relu, "softmax": softmax, "layernorm": layernorm,
    "transformer_layer": transformer_layer, "mlp_train_step": mlp_train_step, "per_example_grads": per_example_grads,
    "dispatch": dispatch, **FAMILIES,
}
# (torch.compile traces the families' autograd.grad calls as graph breaks: the eager ones are
# not given to it)
COMPILED = {**{k: v for k, v in EAGER.items() if k not in FAMILIES or not k.endswith("_grad")},
            "mlp_train_step": train_step_compiled}
