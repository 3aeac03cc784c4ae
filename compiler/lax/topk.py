"""hlo.lax.top_k: the ``k`` largest entries along the last axis and their indices, as one
stable descending sort of (operand, iota) and a slice (ties keep the lower index first; NaNs
count as largest, as in jax)."""
from __future__ import annotations

from .. import dtypes
from ..errors import ShapeError
from ..tracing.api_util import api_function
from ..tracing.tracer import emit, emit1
from .common import as_tracer, ir_type, static_int
from .reductions import sort_comparator_region
from .structural import slice as _slice


@api_function
def top_k(operand, k: int):
    """``(values, indices)`` of the ``k`` largest entries along the last axis, largest first;
    indices are int32."""
    x = as_tracer(operand, what="lax.top_k")
    k = static_int("lax.top_k: k", k)
    if x.ndim == 0:
        raise ShapeError("lax.top_k: the operand must have at least one dimension")
    n = x.shape[-1]
    if not 0 <= k <= n:
        raise ValueError(f"lax.top_k: k must be between 0 and the last dimension's size {n}, got {k}")
    ax = x.ndim - 1
    idx = emit1("iota", [], {"iota_dimension": ax}, result_types=[ir_type(x.shape, dtypes.INDEX)])
    region = sort_comparator_region([x.dtype, dtypes.INDEX], 1, descending=True)
    vals, inds = emit("sort", [x, idx], {"dimension": ax, "is_stable": True}, regions=[region],
                      weak_type=[x.weak_type, False])
    limit = list(x.shape[:-1]) + [k]
    return _slice(vals, [0] * x.ndim, limit), _slice(inds, [0] * x.ndim, limit)
