"""numpy indexing on traced arrays: ``x[idx]`` and ``x.at[idx].set/add/...``.

Supported index entries: ints (static or traced), slices with static bounds and any step,
``None``, ``Ellipsis``, boolean scalars, integer arrays (numpy, lists, or traced — these gather,
with numpy's rules for where the broadcast index dimensions go), and static (numpy) boolean
masks. A traced boolean mask selects a data-dependent number of elements and is refused.

Out-of-bounds indices: static ones raise IndexError (as numpy). Traced ones are clamped when
reading (as jax), and updates at them are dropped (``.at[]``, as jax).

``x.at[idx]`` updates work on the flattened array: the linear index of every selected element
is found by indexing an iota of ``x``'s shape exactly as ``x[idx]`` would, then one ``scatter``
writes the (broadcast) values. Index expressions of static ints and unit-step slices use a
``dynamic_update_slice`` instead.
"""
from __future__ import annotations

import builtins
from typing import Any, List, Optional, Tuple

import numpy as np

from .. import dtypes
from ..errors import HloIndexError, ShapeError, UnsupportedError
from ..lax import indexing as li
from ..lax import structural as ls
from ..lax.common import (
    as_tracer,
    broadcast_in_dim,
    broadcast_shapes,
    broadcast_to_shape,
    convert,
    ir_type,
    reshape,
)
from ..tracing.abstract import is_arraylike
from ..tracing.tracer import Tracer, emit1


class _Entry:
    __slots__ = ("kind", "dim", "value")

    def __init__(self, kind, dim=None, value=None):
        self.kind = kind  # "slice", "int", "adv", "new"
        self.dim = dim
        self.value = value


def _is_int_scalar(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _has_tracer(v) -> bool:
    if isinstance(v, Tracer):
        return True
    if isinstance(v, (list, tuple)):
        return builtins.any(_has_tracer(e) for e in v)
    return False


def _as_index_array(v):
    """An integer index array entry as a numpy array or an integer Tracer; None if not one."""
    if isinstance(v, Tracer):
        if dtypes.is_bool(v.dtype):
            if v.ndim == 0:
                raise UnsupportedError("indexing with a traced boolean scalar is not supported; use "
                                       "hlo.numpy.where")
            raise UnsupportedError(
                f"boolean mask indexing with a traced mask ({v.aval.str_short()}) selects a number of "
                "elements that depends on the data, which hlo cannot compile; use "
                "hlo.numpy.where(mask, x, fill) or multiply by the mask instead")
        if not dtypes.is_int(v.dtype):
            raise HloIndexError(f"indices must be integers, got a traced {v.aval.str_short()}")
        return v
    if isinstance(v, (list, tuple)):
        if _has_tracer(v):
            from .creation import asarray
            return _as_index_array(asarray(v))
        arr = np.asarray(v)
        if arr.size == 0:
            arr = arr.astype(np.int32)
    elif isinstance(v, np.ndarray) or (is_arraylike(v) and not isinstance(v, np.generic)):
        from ..tracing.abstract import to_numpy
        arr = to_numpy(v)
    else:
        return None
    if arr.dtype == np.bool_:
        return arr
    if arr.dtype.kind not in "iu":
        raise HloIndexError(f"indices must be integers or booleans, got an array of dtype {arr.dtype}")
    return arr


def _expand(x: Tracer, idx) -> List[_Entry]:
    """Index entries, one per consumed or created dimension, with Ellipsis expanded and
    boolean masks turned into integer arrays."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    items: List[Any] = []
    for v in idx:
        arr = None if (v is None or v is Ellipsis or isinstance(v, slice) or _is_int_scalar(v)
                       or isinstance(v, (bool, np.bool_))) else _as_index_array(v)
        if arr is not None and isinstance(arr, np.ndarray) and arr.dtype == np.bool_:
            if arr.ndim == 0:
                items.append(bool(arr))
                continue
            items.extend(("mask", a) for a in np.nonzero(arr))
            items[-arr.ndim] = ("mask_start", items[-arr.ndim][1], arr.shape)
            continue
        items.append(v if arr is None else ("array", arr))
    n_ell = builtins.sum(1 for v in items if v is Ellipsis)
    if n_ell > 1:
        raise HloIndexError("an index can only have a single ellipsis ('...')")
    consumed = builtins.sum(1 for v in items if not (v is None or v is Ellipsis or isinstance(v, (bool, np.bool_))))
    if consumed > x.ndim:
        raise HloIndexError(f"too many indices for an array of shape {x.shape}: {consumed} were given")
    if n_ell == 0:
        items.append(Ellipsis)
    entries: List[_Entry] = []
    dim = 0
    for v in items:
        if v is Ellipsis:
            for _ in range(x.ndim - consumed):
                entries.append(_Entry("slice", dim, (0, x.shape[dim], 1)))
                dim += 1
        elif v is None:
            entries.append(_Entry("new", None, 1))
        elif isinstance(v, (bool, np.bool_)):
            entries.append(_Entry("new", None, 1 if v else 0))
        elif isinstance(v, slice):
            for part in (v.start, v.stop, v.step):
                if isinstance(part, Tracer):
                    raise UnsupportedError(
                        "slice bounds must be static (Python ints): a traced bound gives a "
                        "data-dependent shape; use hlo.lax.dynamic_slice(x, starts, sizes) for a "
                        "fixed-size window at a traced position")
            n = x.shape[dim]
            try:
                if v.start is None and v.stop is None and v.step in (None, 1):
                    st, sp, step = 0, n, 1  # the whole axis (a symbolic size too)
                else:
                    st, sp, step = v.indices(n)
            except (TypeError, ValueError) as e:
                raise HloIndexError(f"invalid slice {v!r}: {e}") from None
            entries.append(_Entry("slice", dim, (st, sp, step)))
            dim += 1
        elif _is_int_scalar(v):
            n = x.shape[dim]
            i = int(v)
            if not -n <= i < n:
                raise HloIndexError(f"index {i} is out of bounds for axis {dim} with size {n}")
            entries.append(_Entry("int", dim, i + n if i < 0 else i))
            dim += 1
        elif isinstance(v, tuple) and v[0] in ("array", "mask", "mask_start"):
            arr = v[1]
            if isinstance(arr, np.ndarray):
                n = x.shape[dim]
                if arr.size and (arr.min() < -n or arr.max() >= n):
                    bad = arr[(arr < -n) | (arr >= n)].reshape(-1)[0]
                    raise HloIndexError(f"index {int(bad)} is out of bounds for axis {dim} with size {n}")
                arr = np.where(arr < 0, arr + n, arr)
                if v[0] == "mask_start" and len(v) == 3 and tuple(x.shape[dim:dim + len(v[2])]) != tuple(v[2]):
                    raise HloIndexError(f"boolean index of shape {v[2]} does not match the indexed "
                                        f"dimensions {x.shape[dim:dim + len(v[2])]}")
            entries.append(_Entry("adv", dim, arr))
            dim += 1
        elif isinstance(v, Tracer):
            if v.ndim == 0 and dtypes.is_int(v.dtype):
                entries.append(_Entry("adv", dim, v))
                dim += 1
            else:
                entries.append(_Entry("adv", dim, _as_index_array(v)))
                dim += 1
        else:
            raise HloIndexError(f"unsupported index {v!r} of type {type(v).__name__}; use ints, slices, "
                                "None, ..., or integer / boolean arrays")
    return entries


def _apply_slices(x: Tracer, entries: List[_Entry]) -> Tracer:
    st, lim, stride, rev = [0] * x.ndim, list(x.shape), [1] * x.ndim, []
    for e in entries:
        if e.kind == "slice":
            a, b, s = e.value
            if s > 0:
                st[e.dim], lim[e.dim], stride[e.dim] = a, builtins.max(a, b), s
            else:
                # reverse, then slice forward: element a becomes n-1-a
                n = x.shape[e.dim]
                rev.append(e.dim)
                count = len(range(a, b, s))
                ra = n - 1 - a
                st[e.dim], lim[e.dim], stride[e.dim] = ra, ra + (count - 1) * (-s) + 1 if count else ra, -s
        elif e.kind == "int" and not isinstance(e.value, (Tracer, np.ndarray)):
            st[e.dim], lim[e.dim] = e.value, e.value + 1
    if rev:
        x = ls.rev(x, rev)
    return ls.slice(x, st, lim, stride)


def _index_dtype(arrays) -> np.dtype:
    for a in arrays:
        if (isinstance(a, Tracer) and a.dtype.itemsize == 8) or (
                isinstance(a, np.ndarray) and a.size and builtins.max(builtins.abs(int(a.min())), builtins.abs(int(a.max()))) >= 2 ** 31):
            return dtypes.int64
    return dtypes.int32


def _normalize(t: Tracer, n: int) -> Tracer:
    if not dtypes.is_signed(t.dtype):
        return t
    zero = broadcast_in_dim(as_tracer(np.asarray(0, t.dtype)), t.shape, [])
    neg = emit1("compare", [t, zero], {"comparison_direction": "LT", "compare_type": "SIGNED"})
    return emit1("select", [neg, emit1("add", [t, broadcast_in_dim(as_tracer(np.asarray(n, t.dtype)), t.shape, [])]), t])


def getitem(x: Tracer, idx, mode: Optional[str] = None, fill_value=None) -> Tracer:
    """``x[idx]`` (see the module docstring); ``mode="fill"`` returns ``fill_value`` for traced
    out-of-bounds indices instead of clamping them."""
    entries = _expand(x, idx)
    if builtins.any(e.kind == "adv" for e in entries):  # numpy: ints are then advanced too
        for e in entries:
            if e.kind == "int":
                e.kind, e.value = "adv", np.asarray(e.value)
    y = _apply_slices(x, entries)
    out_entries = [e for e in entries if e.kind in ("slice", "new")]
    adv = [e for e in entries if e.kind == "adv"]
    bshape: Tuple[int, ...] = ()
    q = None
    if adv:
        idt = _index_dtype([e.value for e in adv])
        arrays = []
        for e in adv:
            if isinstance(e.value, Tracer):
                arrays.append(_normalize(convert(e.value, idt), y.shape[e.dim]))
            else:
                arrays.append(as_tracer(np.asarray(e.value, dtype=idt)))
        bshape = broadcast_shapes("indexing", *[a.shape for a in arrays])
        comps = [reshape(broadcast_to_shape(a, bshape, "indexing"), bshape + (1,)) for a in arrays]
        start = ls.concatenate(comps, len(bshape)) if len(comps) > 1 else comps[0]
        # numpy: the broadcast index dimensions replace the indexed ones when those are adjacent,
        # and go first otherwise
        positions = [i for i, e in enumerate(entries) if e.kind == "adv"]
        contiguous = positions == list(range(positions[0], positions[-1] + 1))
        before = entries[:positions[0]] if contiguous else []
        p = builtins.sum(1 for e in before if e.kind == "slice")
        q = builtins.sum(1 for e in before if e.kind in ("slice", "new"))
        n_out = len(bshape) + builtins.sum(1 for e in entries if e.kind == "slice")
        adv_dims = [e.dim for e in adv]
        dn = li.GatherDimensionNumbers(
            offset_dims=tuple(i for i in range(n_out) if not p <= i < p + len(bshape)),
            collapsed_slice_dims=tuple(sorted(adv_dims)), start_index_map=tuple(adv_dims))
        slice_sizes = [1 if d in adv_dims else y.shape[d] for d in range(y.ndim)]
        y = li.gather(y, start, dn, slice_sizes, mode="fill" if mode == "fill" else None,
                      fill_value=fill_value)
        core = list(y.shape[:p]) + list(y.shape[p + len(bshape):])
    else:
        core = [y.shape[e.dim] for e in out_entries if e.kind == "slice"]
    final, zero_axes, it = [], [], iter(core)
    for k, e in enumerate(out_entries):
        if k == q:
            final.extend(bshape)
        if e.kind == "slice":
            final.append(next(it))
        else:
            if e.value == 0:
                zero_axes.append(len(final))
            final.append(1)
    if q is not None and q == len(out_entries):
        final.extend(bshape)
    y = reshape(y, final)
    if zero_axes:
        lim = list(y.shape)
        for i in zero_axes:
            lim[i] = 0
        y = ls.slice(y, [0] * y.ndim, lim)
    return y


# --------------------------------------------------------------------------------------------
# x.at[idx]
# --------------------------------------------------------------------------------------------

def _static_box(x: Tracer, idx):
    """``(starts, sizes, out_shape)`` if ``idx`` is only static ints and unit-step slices (a box
    that dynamic_update_slice can write), else None."""
    try:
        entries = _expand(x, idx)
    except (HloIndexError, UnsupportedError):
        return None
    starts, sizes, out_shape = [0] * x.ndim, list(x.shape), []
    for e in entries:
        if e.kind == "slice":
            a, b, s = e.value
            if s != 1:
                return None
            starts[e.dim], sizes[e.dim] = a, builtins.max(b - a, 0)
            out_shape.append(sizes[e.dim])
        elif e.kind == "int" and _is_int_scalar(e.value):
            starts[e.dim], sizes[e.dim] = e.value, 1
        else:
            return None
    return starts, sizes, out_shape


def _linear_indices(x: Tracer, idx) -> Tracer:
    """For every element that ``x[idx]`` selects, its index in ``x.ravel()`` (``x.size`` where a
    traced index is out of bounds, so that scatter drops the update)."""
    idt = dtypes.int32 if x.size < 2 ** 31 - 1 else dtypes.int64
    lin = emit1("iota", [], {"iota_dimension": 0}, result_types=[ir_type((x.size,), idt)])
    lin = reshape(lin, x.shape)
    return getitem(lin, idx, mode="fill", fill_value=x.size)


class _IndexUpdateRef:
    """``x.at[idx]``: methods return a new array with the selected elements updated."""

    def __init__(self, array: Tracer, index):
        self.array = array
        self.index = index

    def get(self, mode=None, fill_value=None, indices_are_sorted=False, unique_indices=False) -> Tracer:
        """``x[idx]``; with ``mode="fill"``, out-of-bounds traced indices give ``fill_value``."""
        if mode not in (None, "fill", "clip", "promise_in_bounds"):
            raise ValueError(f"at[].get: unknown mode {mode!r}")
        return getitem(self.array, self.index, mode="fill" if mode == "fill" else None, fill_value=fill_value)

    def _update(self, what, values, scatter_fn=None, combine=None) -> Tracer:
        """Write ``values`` (broadcast to ``x[idx]``'s shape): with ``scatter_fn`` (scatter,
        scatter_add...) directly, else as ``combine(old, values)`` (read, modify, write)."""
        x = self.array
        v = as_tracer(values, x.dtype if dtypes.is_python_scalar(values) else None, f"at[].{what}")
        if v.dtype != x.dtype:
            v = convert(v, x.dtype)
        box = _static_box(x, self.index)
        if box is not None:
            starts, sizes, out_shape = box
            vb = reshape(self._broadcast(what, v, out_shape), sizes)
            if combine is not None:
                old = ls.slice(x, starts, [a + b for a, b in zip(starts, sizes)])
                vb = combine(old, vb)
            return ls.dynamic_update_slice(x, vb, starts)
        lin = _linear_indices(x, self.index)
        vb = self._broadcast(what, v, lin.shape)
        flat = reshape(x, (x.size,))
        idx = reshape(lin, (lin.size, 1))
        upd = reshape(vb, (lin.size,))
        dn = li.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
        if scatter_fn is None:
            old = getitem(flat, (reshape(lin, (lin.size,)),), mode="fill", fill_value=0)
            upd = combine(old, upd)
            scatter_fn = li.scatter
        return reshape(scatter_fn(flat, idx, upd, dn, mode="drop"), x.shape)

    @staticmethod
    def _broadcast(what, v: Tracer, shape) -> Tracer:
        try:
            return broadcast_to_shape(v, shape, f"at[].{what}")
        except ShapeError:
            raise ShapeError(f"at[].{what}: values of shape {v.shape} cannot be broadcast to the "
                             f"indexed shape {tuple(shape)}") from None

    def set(self, values, indices_are_sorted=False, unique_indices=False, mode=None) -> Tracer:
        """Replace the selected elements (with repeated indices, one of the values wins)."""
        return self._update("set", values, li.scatter)

    def add(self, values, indices_are_sorted=False, unique_indices=False, mode=None) -> Tracer:
        """Add to the selected elements (repeated indices accumulate)."""
        return self._update("add", values, li.scatter_add, lambda a, b: emit1("add", [a, b]))

    def subtract(self, values, indices_are_sorted=False, unique_indices=False, mode=None) -> Tracer:
        from .ufuncs import negative
        return self.add(negative(values))

    def multiply(self, values, indices_are_sorted=False, unique_indices=False, mode=None) -> Tracer:
        return self._update("multiply", values, li.scatter_mul, lambda a, b: emit1("multiply", [a, b]))

    mul = multiply

    def min(self, values, indices_are_sorted=False, unique_indices=False, mode=None) -> Tracer:
        return self._update("min", values, li.scatter_min, lambda a, b: emit1("minimum", [a, b]))

    def max(self, values, indices_are_sorted=False, unique_indices=False, mode=None) -> Tracer:
        return self._update("max", values, li.scatter_max, lambda a, b: emit1("maximum", [a, b]))

    def divide(self, values, indices_are_sorted=False, unique_indices=False, mode=None) -> Tracer:
        from .ufuncs import true_divide
        return self._update("divide", values, None, lambda old, v: convert(true_divide(old, v), old.dtype))

    def power(self, values, indices_are_sorted=False, unique_indices=False, mode=None) -> Tracer:
        from .ufuncs import power
        return self._update("power", values, None, lambda old, v: convert(power(old, v), old.dtype))

    def apply(self, func, indices_are_sorted=False, unique_indices=False, mode=None) -> Tracer:
        """Replace the selected elements by ``func`` of them."""
        return self._update("apply", np.zeros((), self.array.dtype), None,
                            lambda old, v: convert(as_tracer(func(old)), old.dtype))

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"


class _IndexUpdateHelper:
    """The object behind ``x.at``: ``x.at[idx]`` gives an ``_IndexUpdateRef``."""

    __slots__ = ("array",)

    def __init__(self, array: Tracer):
        self.array = array

    def __getitem__(self, index) -> _IndexUpdateRef:
        return _IndexUpdateRef(self.array, index)
