"""Activation functions and softmax-family functions of hlo.nn (jax.nn's definitions)."""
from __future__ import annotations

import math

import numpy as np

from .. import numpy as hnp
from ..lax import special
from ..lax.common import as_tracer, convert
from ..numpy.promotion import promote_inexact
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit1


def _float(fname, x) -> Tracer:
    (t,), _, weak = promote_inexact(fname, x)
    return t


@api_function
def relu(x) -> Tracer:
    """max(x, 0)."""
    return hnp.maximum(x, 0)


@api_function
def relu6(x) -> Tracer:
    """min(max(x, 0), 6)."""
    return hnp.minimum(hnp.maximum(x, 0), 6.0)


@api_function
def leaky_relu(x, negative_slope=0.01) -> Tracer:
    t = _float("leaky_relu", x)
    return hnp.where(t >= 0, t, t * negative_slope)


@api_function
def elu(x, alpha=1.0) -> Tracer:
    t = _float("elu", x)
    safe = hnp.where(t > 0, 0.0, t)
    return hnp.where(t > 0, t, alpha * hnp.expm1(safe))


@api_function
def sigmoid(x) -> Tracer:
    """1 / (1 + exp(-x))."""
    t = _float("sigmoid", x)
    return emit1("logistic", [t], weak_type=t.weak_type)


@api_function
def silu(x) -> Tracer:
    """x * sigmoid(x) (also called swish)."""
    t = _float("silu", x)
    return t * sigmoid(t)


swish = silu


@api_function
def log_sigmoid(x) -> Tracer:
    return -softplus(-_float("log_sigmoid", x))


@api_function
def softplus(x) -> Tracer:
    """log(1 + exp(x)), computed as logaddexp(x, 0)."""
    return hnp.logaddexp(_float("softplus", x), 0)


@api_function
def gelu(x, approximate: bool = True) -> Tracer:
    """Gaussian error linear unit: ``x * Phi(x)`` exactly (``approximate=False``, via erf) or
    with the tanh approximation (the default, as jax.nn.gelu)."""
    t = _float("gelu", x)
    if approximate:
        c = math.sqrt(2 / math.pi)
        cdf = 0.5 * (1.0 + hnp.tanh(c * (t + 0.044715 * (t ** 3))))
        return t * cdf
    return convert(t * (special.erf(t / math.sqrt(2)) + 1) / 2, t.dtype, weak_type=t.weak_type)


@api_function
def softmax(x, axis=-1, where=None) -> Tracer:
    """exp(x - max) / sum(exp(x - max)) along ``axis``; with ``where``, only those elements
    take part and the others are 0 (as jax.nn.softmax)."""
    t = _float("softmax", x)
    if where is None:
        unnormalized = hnp.exp(t - hnp.max(t, axis=axis, keepdims=True))
        return unnormalized / hnp.sum(unnormalized, axis=axis, keepdims=True)
    t_max = hnp.max(t, axis=axis, where=where, initial=-np.inf, keepdims=True)
    unnormalized = hnp.exp(hnp.where(where, t, -np.inf) - t_max)
    result = unnormalized / hnp.sum(unnormalized, axis=axis, where=where, keepdims=True)
    return hnp.where(where, result, 0.0)


@api_function
def log_softmax(x, axis=-1, where=None) -> Tracer:
    """x - logsumexp(x) along ``axis``; with ``where``, the other elements are -inf."""
    t = _float("log_softmax", x)
    if where is None:
        shifted = t - hnp.max(t, axis=axis, keepdims=True)
        return shifted - hnp.log(hnp.sum(hnp.exp(shifted), axis=axis, keepdims=True))
    t_max = hnp.max(t, axis=axis, where=where, initial=-np.inf, keepdims=True)
    shifted = hnp.where(where, t, -np.inf) - t_max
    out = shifted - hnp.log(hnp.sum(hnp.exp(shifted), axis=axis, where=where, keepdims=True))
    return hnp.where(where, out, -np.inf)


@api_function
def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False):
    """log(sum(b * exp(a))) along ``axis``, without overflow (as jax.scipy.special.logsumexp)."""
    t = _float("logsumexp", a)
    amax = hnp.max(t, axis=axis, keepdims=True)
    amax = hnp.where(hnp.isfinite(amax), amax, 0.0)
    e = hnp.exp(t - amax)
    if b is not None:
        e = e * b
    s = hnp.sum(e, axis=axis, keepdims=True)
    sign = hnp.sign(s)
    out = hnp.log(hnp.abs(s)) + amax
    if not keepdims:
        if axis is None:
            out, sign = hnp.reshape(out, ()), hnp.reshape(sign, ())
        else:
            out, sign = hnp.squeeze(out, axis=axis), hnp.squeeze(sign, axis=axis)
    if return_sign:
        return out, sign
    return out


@api_function
def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None) -> Tracer:
    """(x - mean) / sqrt(variance + epsilon) along ``axis`` (as jax.nn.standardize)."""
    t = _float("standardize", x)
    if mean is None:
        mean = hnp.mean(t, axis=axis, keepdims=True, where=where)
    if variance is None:
        variance = hnp.mean(hnp.square(t - mean), axis=axis, keepdims=True, where=where)
    return (t - mean) * hnp.rsqrt(variance + epsilon)


@api_function
def one_hot(x, num_classes: int, dtype=None, axis=-1) -> Tracer:
    """``x[..., None] == arange(num_classes)`` as ``dtype`` (float32 by default); the new axis
    goes at ``axis``. Out-of-range values give all-zero rows."""
    from .. import dtypes
    from ..lax.common import broadcast_in_dim, canonical_axis, ir_type, static_int
    n = static_int("one_hot: num_classes", num_classes)
    t = as_tracer(x, what="one_hot")
    dt = dtypes.canonicalize(dtype, "one_hot: dtype") if dtype is not None else dtypes.float32
    out_shape = list(t.shape)
    ax = canonical_axis("one_hot", axis, t.ndim + 1)
    out_shape.insert(ax, n)
    cls_dt = t.dtype if dtypes.is_int(t.dtype) else dtypes.to_inexact(t.dtype) if not dtypes.is_bool(t.dtype) else dtypes.int32
    tt = convert(t, cls_dt)
    iota = emit1("iota", [], {"iota_dimension": ax}, result_types=[ir_type(out_shape, cls_dt)])
    xb = broadcast_in_dim(tt, out_shape, [i for i in range(len(out_shape)) if i != ax])
    from ..lax.elementwise import compare_type
    eq = emit1("compare", [xb, iota], {"comparison_direction": "EQ", "compare_type": compare_type(cls_dt)})
    return convert(eq, dt)
