"""Normalization layers of hlo.nn: layer_norm and rms_norm (functional forms)."""
from __future__ import annotations

from .. import numpy as hnp
from ..numpy.promotion import promote_inexact
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer


@api_function
def layer_norm(x, gamma=None, beta=None, axis=-1, eps: float = 1e-5) -> Tracer:
    """(x - mean) / sqrt(var + eps) over ``axis`` (biased variance), then ``* gamma + beta``
    when given (both broadcast against x, typically of shape ``x.shape[axis]``)."""
    (t,), _, _ = promote_inexact("layer_norm", x)
    mean = hnp.mean(t, axis=axis, keepdims=True)
    centered = t - mean
    var = hnp.mean(hnp.square(centered), axis=axis, keepdims=True)
    y = centered * hnp.rsqrt(var + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


@api_function
def rms_norm(x, gamma=None, axis=-1, eps: float = 1e-6) -> Tracer:
    """x / sqrt(mean(x**2) + eps) over ``axis``, then ``* gamma`` when given."""
    (t,), _, _ = promote_inexact("rms_norm", x)
    ms = hnp.mean(hnp.square(t), axis=axis, keepdims=True)
    y = t * hnp.rsqrt(ms + eps)
    if gamma is not None:
        y = y * gamma
    return y
