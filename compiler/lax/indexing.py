"""``gather`` and the ``scatter`` family of hlo.lax (jax.lax's signatures; the index vector is
the last dimension of the indices).

Out-of-bounds indices: ``gather`` clamps them so that the slice fits (modes None, "clip",
"promise_in_bounds"), or with ``mode="fill"`` returns ``fill_value`` for slices that do not fit.
``scatter*`` drops updates whose window does not fit (modes None, "fill", "drop",
"promise_in_bounds"), or with ``mode="clip"`` clamps the indices first.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .. import dtypes
from ..errors import DTypeError, ShapeError
from ..tracing.abstract import ShapedArray
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit1, trace_region
from . import elementwise as ew
from .common import as_tracer, broadcast_in_dim, static_int


class GatherDimensionNumbers(NamedTuple):
    offset_dims: Tuple[int, ...]
    collapsed_slice_dims: Tuple[int, ...]
    start_index_map: Tuple[int, ...]
    operand_batching_dims: Tuple[int, ...] = ()
    start_indices_batching_dims: Tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    update_window_dims: Tuple[int, ...]
    inserted_window_dims: Tuple[int, ...]
    scatter_dims_to_operand_dims: Tuple[int, ...]
    operand_batching_dims: Tuple[int, ...] = ()
    scatter_indices_batching_dims: Tuple[int, ...] = ()


_GATHER_MODES = (None, "clip", "promise_in_bounds", "fill")
_SCATTER_MODES = (None, "clip", "promise_in_bounds", "fill", "drop")


def _mode(what, mode, allowed):
    m = getattr(mode, "name", mode)
    m = m.lower() if isinstance(m, str) else m
    if m == "fill_or_drop":
        m = "fill"
    if m not in allowed:
        raise ValueError(f"{what}: unknown mode {mode!r}; expected one of "
                         f"{', '.join(repr(a) for a in allowed if a is not None)}")
    return m


def _indices(what: str, x) -> Tracer:
    t = as_tracer(x, what=f"{what}: indices")
    if not dtypes.is_int(t.dtype):
        raise DTypeError(f"{what}: indices must be integers, got {t.aval.str_short()}")
    return t


def default_fill_value(dt):
    """What ``mode="fill"`` returns for missing elements: NaN, the dtype's minimum (signed),
    maximum (unsigned), or True."""
    if dtypes.is_float(dt):
        return np.nan
    if dtypes.is_signed(dt):
        return np.iinfo(dt).min
    if dtypes.is_unsigned(dt):
        return np.iinfo(dt).max
    return True


@api_function
def gather(operand, start_indices, dimension_numbers: GatherDimensionNumbers, slice_sizes, *,
           indices_are_sorted: bool = False, unique_indices: bool = False, mode=None,
           fill_value=None) -> Tracer:
    """Slices of ``operand`` at ``start_indices`` (StableHLO gather; see the module docstring for
    out-of-bounds behaviour)."""
    what = "lax.gather"
    x = as_tracer(operand, what=what)
    idx = _indices(what, start_indices)
    m = _mode(what, mode, _GATHER_MODES)
    dn = dimension_numbers
    ss = [static_int(f"{what}: slice_sizes", s) for s in slice_sizes]
    if idx.ndim == 0:
        raise ShapeError(f"{what}: indices need at least one dimension (the index vector)")
    attrs = {"offset_dims": list(dn.offset_dims), "collapsed_slice_dims": list(dn.collapsed_slice_dims),
             "operand_batching_dims": list(dn.operand_batching_dims),
             "start_indices_batching_dims": list(dn.start_indices_batching_dims),
             "start_index_map": list(dn.start_index_map), "index_vector_dim": idx.ndim - 1,
             "slice_sizes": ss, "indices_are_sorted": bool(indices_are_sorted)}
    out = emit1("gather", [x, idx], attrs, weak_type=x.weak_type)
    if m != "fill":
        return out
    # mask out slices that do not fit
    fv = default_fill_value(x.dtype) if fill_value is None else fill_value
    ok = None
    for k, d in enumerate(dn.start_index_map):
        comp = _index_component(idx, k)
        lo = emit1("compare", [comp, _full_like_scalar(0, comp)], {"comparison_direction": "GE", "compare_type": ew.compare_type(comp.dtype)})
        hi = emit1("compare", [comp, _full_like_scalar(x.shape[d] - ss[d], comp)], {"comparison_direction": "LE", "compare_type": ew.compare_type(comp.dtype)})
        both = emit1("and", [lo, hi])
        ok = both if ok is None else emit1("and", [ok, both])
    batch_dims = [i for i in range(out.ndim) if i not in dn.offset_dims]
    mask = broadcast_in_dim(ok, out.shape, batch_dims)
    fill = broadcast_in_dim(as_tracer(np.asarray(fv, x.dtype)), out.shape, [])
    return emit1("select", [mask, out, fill], weak_type=x.weak_type)


def _index_component(idx: Tracer, k: int) -> Tracer:
    from .common import reshape
    from .structural import slice as _slice
    st = [0] * idx.ndim
    li = list(idx.shape)
    st[-1], li[-1] = k, k + 1
    return reshape(_slice(idx, st, li), idx.shape[:-1])


def _full_like_scalar(v, like: Tracer) -> Tracer:
    return broadcast_in_dim(as_tracer(np.asarray(v, like.dtype)), like.shape, [])


def _clamp_indices(idx: Tracer, x: Tracer, dims: Sequence[int], window: Sequence[int]) -> Tracer:
    """Clamp each index component k to ``[0, x.shape[dims[k]] - window[k]]``."""
    from .common import reshape
    from .structural import concatenate
    parts = []
    for k, d in enumerate(dims):
        comp = _index_component(idx, k)
        lo = as_tracer(np.asarray(0, idx.dtype))
        hi = as_tracer(np.asarray(max(x.shape[d] - window[k], 0), idx.dtype))
        parts.append(reshape(emit1("clamp", [lo, comp, hi]), comp.shape + (1,)))
    return concatenate(parts, idx.ndim - 1)


def _scatter(what: str, operand, scatter_indices, updates, dimension_numbers, combine: Optional[Callable],
             indices_are_sorted, unique_indices, mode) -> Tracer:
    x = as_tracer(operand, what=what)
    idx = _indices(what, scatter_indices)
    u = as_tracer(updates, x.dtype if dtypes.is_python_scalar(updates) else None, f"{what}: updates")
    if u.dtype != x.dtype:
        raise DTypeError(f"{what}: updates dtype {dtypes.dtype_name(u.dtype)} differs from operand "
                         f"dtype {dtypes.dtype_name(x.dtype)}")
    m = _mode(what, mode, _SCATTER_MODES)
    dn = dimension_numbers
    if idx.ndim == 0:
        raise ShapeError(f"{what}: indices need at least one dimension (the index vector)")
    if m == "clip":
        window = []
        uw = list(dn.update_window_dims)
        full_window = [1 if (d in dn.inserted_window_dims or d in dn.operand_batching_dims) else None
                       for d in range(x.ndim)]
        it = iter(u.shape[i] for i in uw)
        for d in range(x.ndim):
            if full_window[d] is None:
                full_window[d] = next(it, 1)
        window = [full_window[d] for d in dn.scatter_dims_to_operand_dims]
        idx = _clamp_indices(idx, x, dn.scatter_dims_to_operand_dims, window)

    def body(a, b):
        return b if combine is None else combine(a, b)
    region = trace_region(body, [ShapedArray((), x.dtype), ShapedArray((), x.dtype)], name="update",
                          description=f"the update computation of {what}").region
    attrs = {"update_window_dims": list(dn.update_window_dims),
             "inserted_window_dims": list(dn.inserted_window_dims),
             "input_batching_dims": list(dn.operand_batching_dims),
             "scatter_indices_batching_dims": list(dn.scatter_indices_batching_dims),
             "scatter_dims_to_operand_dims": list(dn.scatter_dims_to_operand_dims),
             "index_vector_dim": idx.ndim - 1, "indices_are_sorted": bool(indices_are_sorted),
             "unique_indices": bool(unique_indices)}
    return emit1("scatter", [x, idx, u], attrs, regions=[region], weak_type=x.weak_type)


@api_function
def scatter(operand, scatter_indices, updates, dimension_numbers: ScatterDimensionNumbers, *,
            indices_are_sorted=False, unique_indices=False, mode=None) -> Tracer:
    """``operand`` with windows at ``scatter_indices`` replaced by ``updates`` (with repeated
    indices, which update wins is unspecified)."""
    return _scatter("lax.scatter", operand, scatter_indices, updates, dimension_numbers, None,
                    indices_are_sorted, unique_indices, mode)


def _combining(name, combine):
    def f(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
          unique_indices=False, mode=None):
        return _scatter(f"lax.{name}", operand, scatter_indices, updates, dimension_numbers,
                        combine, indices_are_sorted, unique_indices, mode)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"``operand`` with ``updates`` combined into it at ``scatter_indices`` ({name[8:]})."
    return api_function(f)


scatter_add = _combining("scatter_add", ew.add)
scatter_mul = _combining("scatter_mul", ew.mul)
scatter_min = _combining("scatter_min", ew.min)
scatter_max = _combining("scatter_max", ew.max)


@api_function
def scatter_apply(operand, scatter_indices, func: Callable, dimension_numbers: ScatterDimensionNumbers,
                  *, update_shape=None, indices_are_sorted=False, unique_indices=False, mode=None) -> Tracer:
    """``operand`` with ``func`` applied to the elements addressed by ``scatter_indices``."""
    x = as_tracer(operand, what="lax.scatter_apply")
    shape = tuple(update_shape) if update_shape is not None else ()
    dummy = broadcast_in_dim(as_tracer(np.zeros((), x.dtype)), shape, [])
    return _scatter("lax.scatter_apply", x, scatter_indices, dummy, dimension_numbers,
                    lambda a, b: func(a), indices_are_sorted, unique_indices, mode)
