"""The rest of jax.nn's pointwise activations (celu, selu, glu, the hard_* family, mish,
soft_sign, sparse_plus/sparse_sigmoid, squareplus, log1mexp, identity, tanh) and logmeanexp,
each with jax.nn's definition written on hlo.numpy."""
from __future__ import annotations

import math

from .. import numpy as hnp
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from .activations import _float, logsumexp, relu6, sigmoid, softplus

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@api_function
def identity(x) -> Tracer:
    """x, as an array."""
    return hnp.asarray(x)


@api_function
def tanh(x) -> Tracer:
    return hnp.tanh(x)


@api_function
def celu(x, alpha=1.0) -> Tracer:
    """max(x, 0) + alpha * expm1(min(x, 0) / alpha)."""
    t = _float("celu", x)
    return hnp.maximum(t, 0.0) + alpha * hnp.expm1(hnp.minimum(t, 0.0) / alpha)


@api_function
def selu(x) -> Tracer:
    """scale * elu(x, alpha) with the self-normalizing constants."""
    t = _float("selu", x)
    safe = hnp.where(t > 0, 0.0, t)
    return _SELU_SCALE * hnp.where(t > 0, t, _SELU_ALPHA * hnp.expm1(safe))


@api_function
def glu(x, axis: int = -1) -> Tracer:
    """Gated linear unit: the first half of ``axis`` times sigmoid of the second half."""
    t = hnp.asarray(x)
    n = t.shape[axis] if t.ndim else 0
    if t.ndim == 0 or n % 2:
        raise ValueError(f"glu: axis {axis} of shape {t.shape} must have an even size")
    a, b = hnp.split(t, 2, axis=axis)
    return a * sigmoid(b)


@api_function
def hard_sigmoid(x) -> Tracer:
    """relu6(x + 3) / 6."""
    return relu6(_float("hard_sigmoid", x) + 3.0) / 6.0


@api_function
def hard_silu(x) -> Tracer:
    """x * hard_sigmoid(x) (also called hard_swish)."""
    t = _float("hard_silu", x)
    return t * hard_sigmoid(t)


hard_swish = hard_silu


@api_function
def hard_tanh(x) -> Tracer:
    """x clipped to [-1, 1]."""
    t = _float("hard_tanh", x)
    return hnp.where(t > 1, 1.0, hnp.where(t < -1, -1.0, t))


@api_function
def mish(x) -> Tracer:
    """x * tanh(softplus(x))."""
    t = _float("mish", x)
    return t * hnp.tanh(softplus(t))


@api_function
def soft_sign(x) -> Tracer:
    """x / (|x| + 1)."""
    t = _float("soft_sign", x)
    return t / (hnp.abs(t) + 1.0)


@api_function
def sparse_plus(x) -> Tracer:
    """0 for x <= -1, x for x >= 1, (x + 1)^2 / 4 between."""
    t = _float("sparse_plus", x)
    return hnp.where(t <= -1.0, 0.0, hnp.where(t >= 1.0, t, (t + 1.0) ** 2 / 4.0))


@api_function
def sparse_sigmoid(x) -> Tracer:
    """clip((x + 1) / 2, 0, 1): the derivative of sparse_plus."""
    t = _float("sparse_sigmoid", x)
    return 0.5 * hnp.clip(t + 1.0, 0.0, 2.0)


@api_function
def squareplus(x, b=4) -> Tracer:
    """(x + sqrt(x^2 + b)) / 2."""
    t = _float("squareplus", x)
    return (t + hnp.sqrt(hnp.square(t) + b)) / 2.0


@api_function
def log1mexp(x) -> Tracer:
    """log(1 - exp(-x)) for x > 0, accurate at both ends (log(-expm1(-x)) below log 2,
    log1p(-exp(-x)) above)."""
    t = _float("log1mexp", x)
    return hnp.where(t < math.log(2.0), hnp.log(-hnp.expm1(-t)), hnp.log1p(-hnp.exp(-t)))


@api_function
def logmeanexp(x, axis=None, where=None, keepdims: bool = False) -> Tracer:
    """log(mean(exp(x))) along ``axis``, over the elements ``where`` selects."""
    t = _float("logmeanexp", x)
    if where is None:
        lse = logsumexp(t, axis=axis, keepdims=keepdims)
        n = t.size if axis is None else math.prod(
            t.shape[a] for a in ((axis,) if isinstance(axis, int) else axis))
        return lse - math.log(n) if n else lse - hnp.log(0.0)
    w = hnp.broadcast_to(hnp.asarray(where), t.shape)
    lse = logsumexp(hnp.where(w, t, -hnp.inf), axis=axis, keepdims=keepdims)
    count = hnp.sum(w, axis=axis, keepdims=keepdims)
    return lse - hnp.log(count.astype(lse.dtype))
