"""Sorting of hlo.numpy: sort and argsort (stable; NaNs last, -0.0 equal to 0.0, as numpy)."""
from __future__ import annotations

from .. import dtypes
from ..lax.common import as_tracer, canonical_axis, ir_type, reshape
from ..lax.reductions import sort_comparator_region
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit, emit1


def _prep(fname, a, axis):
    x = as_tracer(a, what=fname)
    if axis is None:
        x = reshape(x, (x.size,))
        axis = 0
    if x.ndim == 0:
        x = reshape(x, (1,))
        axis = 0
    return x, canonical_axis(fname, axis, x.ndim)


@api_function
def sort(a, axis=-1, kind=None, order=None, *, stable: bool = True, descending: bool = False) -> Tracer:
    """Sorted copy along ``axis`` (the flattened array when None). ``descending`` sorts from
    largest to smallest (NaNs first), keeping equal elements in order."""
    if order is not None:
        raise ValueError("sort: order= (structured arrays) is not supported")
    x, ax = _prep("sort", a, axis)
    region = sort_comparator_region([x.dtype], 1, descending)
    (out,) = emit("sort", [x], {"dimension": ax, "is_stable": True}, regions=[region], weak_type=x.weak_type)
    return out


@api_function
def argsort(a, axis=-1, kind=None, order=None, *, stable: bool = True, descending: bool = False) -> Tracer:
    """Indices that sort ``a`` along ``axis`` (int32; stable)."""
    if order is not None:
        raise ValueError("argsort: order= (structured arrays) is not supported")
    x, ax = _prep("argsort", a, axis)
    idx = emit1("iota", [], {"iota_dimension": ax}, result_types=[ir_type(x.shape, dtypes.INDEX)])
    region = sort_comparator_region([x.dtype, dtypes.INDEX], 1, descending)
    _, out = emit("sort", [x, idx], {"dimension": ax, "is_stable": True}, regions=[region])
    return out


@api_function
def msort(a) -> Tracer:
    return sort(a, axis=0)
