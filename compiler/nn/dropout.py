"""``hlo.nn.dropout``: inverted dropout with an explicit PRNG key.

``dropout(key, rate, x, *, broadcast_dims=(), deterministic=False)`` keeps each element of
``x`` with probability ``1 - rate``, scaled by ``1 / (1 - rate)``, and zeroes the others, so the
expected value is unchanged. The argument order is haiku's ``hk.dropout(rng, rate, x)``; the
computation is flax's ``nn.Dropout``: the mask is ``hlo.random.bernoulli(key, 1 - rate,
mask_shape)`` (bit for bit jax's), where ``mask_shape`` is ``x.shape`` with the axes in
``broadcast_dims`` set to 1 (one decision shared along them), and the result is
``select(mask, x / (1 - rate), 0)`` (never ``0 * inf``). ``rate == 0`` or ``deterministic``
returns ``x`` unchanged; ``rate == 1`` returns zeros. ``rate`` is a static Python number.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..errors import ArgumentTypeError
from ..lax.common import as_tracer, broadcast_to_shape, canonical_axes, full, require_kind
from ..lax.elementwise import div, select
from ..random import bernoulli
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer

__all__ = ["dropout"]


@api_function
def dropout(key, rate, x, *, broadcast_dims=(), deterministic: bool = False) -> Tracer:
    """Zero each element of ``x`` with probability ``rate`` and scale the rest by
    ``1 / (1 - rate)``; see the module docstring."""
    what = "hlo.nn.dropout"
    if isinstance(rate, Tracer) or not isinstance(rate, numbers.Real) or isinstance(rate, bool):
        raise ArgumentTypeError(f"{what}: rate must be a static Python number in [0, 1], got "
                                f"{rate!r:.60}")
    rate = float(rate)
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"{what}: rate must be in [0, 1], got {rate}")
    t = as_tracer(x, what=f"{what}: x")
    require_kind(what, t, "f")
    if not isinstance(deterministic, (bool, np.bool_)):
        raise ArgumentTypeError(f"{what}: deterministic must be a Python bool, got {deterministic!r:.60}")
    dims = canonical_axes(f"{what}: broadcast_dims", broadcast_dims, t.ndim, allow_none=False)
    if deterministic or rate == 0.0:
        return t
    if rate == 1.0:
        return full(t.shape, 0, t.dtype)
    keep = 1.0 - rate
    mask_shape = tuple(1 if d in dims else n for d, n in enumerate(t.shape))
    mask = broadcast_to_shape(bernoulli(key, keep, mask_shape), t.shape, what)
    return select(mask, div(t, keep), full(t.shape, 0, t.dtype))
