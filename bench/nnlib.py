"""The neural-network helpers the workloads use, written once over an array namespace ``xp``.

``NN(numpy)``, ``NN(jax.numpy)`` and ``NN(hlo.numpy)`` compute the same composite formulas from the
same primitives (max, exp, sum, mean, sqrt, tanh, maximum, log), so the bench compares compilers on
one definition rather than on three libraries' differently fused versions of gelu or layer_norm.
"""
from __future__ import annotations

import math

GELU_C = math.sqrt(2.0 / math.pi)


class NN:
    """Composite nn functions over the array namespace ``xp`` (numpy-compatible API)."""

    def __init__(self, xp):
        self.xp = xp

    def relu(self, x):
        return self.xp.maximum(x, 0.0)

    def gelu_tanh(self, x):
        """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
        return 0.5 * x * (1.0 + self.xp.tanh(GELU_C * (x + 0.044715 * (x * x * x))))

    def layer_norm(self, x, gamma=None, beta=None, eps=1e-5):
        """Normalize over the last axis (biased variance); optional affine gamma, beta."""
        xp = self.xp
        mu = xp.mean(x, axis=-1, keepdims=True)
        d = x - mu
        var = xp.mean(d * d, axis=-1, keepdims=True)
        y = d / xp.sqrt(var + eps)
        if gamma is not None:
            y = y * gamma
        if beta is not None:
            y = y + beta
        return y

    def softmax(self, x):
        xp = self.xp
        e = xp.exp(x - xp.max(x, axis=-1, keepdims=True))
        return e / xp.sum(e, axis=-1, keepdims=True)

    def log_softmax(self, x):
        xp = self.xp
        s = x - xp.max(x, axis=-1, keepdims=True)
        return s - xp.log(xp.sum(xp.exp(s), axis=-1, keepdims=True))
