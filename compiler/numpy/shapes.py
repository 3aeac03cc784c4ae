"""Shape manipulation of hlo.numpy: reshape, transpose and axis moves, expand/squeeze,
broadcasting, joining and splitting, tiling and repeating, padding, flipping and rolling,
``take`` / ``take_along_axis``, triangles and diagonals."""
from __future__ import annotations

import builtins
import math
from typing import List

import numpy as np

from hlo.ir.dim_expr import DimExpr

from .. import dtypes
from ..errors import ArgumentTypeError, HloIndexError, ShapeError, UnsupportedError
from ..lax import indexing as li
from ..lax import structural as ls
from ..lax.common import (
    as_tracer,
    aval_of,
    broadcast_in_dim,
    broadcast_shapes,
    broadcast_to_shape,
    canonical_axes,
    canonical_axis,
    convert,
    ir_type,
    static_int,
    static_shape,
)
from ..lax.common import reshape as _reshape
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit1
from .promotion import promote


def _t(x, fname) -> Tracer:
    return as_tracer(x, what=fname)


@api_function
def reshape(a, shape=None, order: str = "C", *, newshape=None) -> Tracer:
    """A view of ``a`` with a new shape (one entry may be -1); order "C" or "F"."""
    x = _t(a, "reshape")
    if shape is None:
        shape = newshape
    if shape is None:
        raise TypeError("reshape: missing the shape")
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if isinstance(shape, Tracer):
        raise ArgumentTypeError("reshape: the new shape must be static (Python ints), not a traced value")
    dims = [d if isinstance(d, DimExpr) else static_int("reshape: shape entry", d) for d in shape]
    if dims.count(-1) > 1:
        raise ShapeError(f"reshape: can only infer one dimension, got shape {tuple(dims)}")
    if -1 in dims:
        known = math.prod(d for d in dims if not (isinstance(d, int) and d == -1))
        if known == 0 or x.size % known:
            raise ShapeError(f"reshape: cannot reshape array of shape {x.shape} (size {x.size}) into shape {tuple(dims)}")
        dims[dims.index(-1)] = x.size // known
    if any(d < 0 for d in dims) or math.prod(dims) != x.size:  # (math.prod: symbolic sizes too)
        raise ShapeError(f"reshape: cannot reshape array of shape {x.shape} (size {x.size}) into shape {tuple(dims)}")
    if order == "C":
        return _reshape(x, dims)
    if order == "F":
        xt = ls.transpose(x, list(reversed(range(x.ndim))))
        r = _reshape(xt, list(reversed(dims)))
        return ls.transpose(r, list(reversed(range(len(dims)))))
    raise ValueError(f"reshape: order must be 'C' or 'F', got {order!r}")


@api_function
def ravel(a, order: str = "C") -> Tracer:
    x = _t(a, "ravel")
    return reshape(x, (x.size,), order=order)


@api_function
def transpose(a, axes=None) -> Tracer:
    """Permute axes (reverse them when ``axes`` is None)."""
    x = _t(a, "transpose")
    if axes is None:
        perm = list(reversed(range(x.ndim)))
    else:
        perm = [canonical_axis("transpose", d, x.ndim) for d in axes]
        if sorted(perm) != list(range(x.ndim)):
            raise ShapeError(f"transpose: axes {tuple(axes)} are not a permutation of the {x.ndim} "
                             f"axes of shape {x.shape}")
    return ls.transpose(x, perm)


permute_dims = transpose


@api_function
def matrix_transpose(x) -> Tracer:
    """Swap the last two axes."""
    t = _t(x, "matrix_transpose")
    if t.ndim < 2:
        raise ShapeError(f"matrix_transpose needs at least 2 dimensions, got shape {t.shape}")
    return swapaxes(t, -1, -2)


@api_function
def moveaxis(a, source, destination) -> Tracer:
    """Move axes ``source`` to positions ``destination`` (others keep their order)."""
    x = _t(a, "moveaxis")
    src = canonical_axes("moveaxis", source if isinstance(source, (list, tuple)) else [source], x.ndim)
    dst = canonical_axes("moveaxis", destination if isinstance(destination, (list, tuple)) else [destination], x.ndim)
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination need the same number of axes")
    rest = [i for i in range(x.ndim) if i not in src]
    perm = [None] * x.ndim
    for s, d in zip(src, dst):
        perm[d] = s
    it = iter(rest)
    perm = [p if p is not None else next(it) for p in perm]
    return ls.transpose(x, perm)


@api_function
def swapaxes(a, axis1, axis2) -> Tracer:
    x = _t(a, "swapaxes")
    i, j = canonical_axis("swapaxes", axis1, x.ndim), canonical_axis("swapaxes", axis2, x.ndim)
    perm = list(range(x.ndim))
    perm[i], perm[j] = perm[j], perm[i]
    return ls.transpose(x, perm)


@api_function
def expand_dims(a, axis) -> Tracer:
    x = _t(a, "expand_dims")
    axes = axis if isinstance(axis, (list, tuple)) else [axis]
    return ls.expand_dims(x, axes)


@api_function
def squeeze(a, axis=None) -> Tracer:
    """Remove size-1 axes (all of them, or those in ``axis``)."""
    x = _t(a, "squeeze")
    if axis is None:
        axes = [i for i, s in enumerate(x.shape) if s == 1]
    else:
        axes = canonical_axes("squeeze", axis, x.ndim)
        for i in axes:
            if x.shape[i] != 1:
                raise ShapeError(f"squeeze: cannot select axis {i} of shape {x.shape}: its size is not 1")
    return ls.squeeze(x, axes)


@api_function
def broadcast_to(array, shape) -> Tracer:
    x = _t(array, "broadcast_to")
    return broadcast_to_shape(x, static_shape("broadcast_to", shape), "broadcast_to")


@api_function
def broadcast_arrays(*args):
    ts = [_t(a, "broadcast_arrays") for a in args]
    shape = broadcast_shapes("broadcast_arrays", *[t.shape for t in ts])
    return [broadcast_to_shape(t, shape, "broadcast_arrays") for t in ts]


def broadcast_shapes_(*shapes):
    return broadcast_shapes("broadcast_shapes", *[tuple(s) if isinstance(s, (list, tuple)) else (s,) for s in shapes])


@api_function
def atleast_1d(*arys):
    out = [_t(a, "atleast_1d") for a in arys]
    out = [_reshape(t, (1,)) if t.ndim == 0 else t for t in out]
    return out[0] if len(out) == 1 else out


@api_function
def atleast_2d(*arys):
    out = []
    for a in arys:
        t = _t(a, "atleast_2d")
        out.append(_reshape(t, (1,) * (2 - t.ndim) + t.shape) if t.ndim < 2 else t)
    return out[0] if len(out) == 1 else out


@api_function
def atleast_3d(*arys):
    out = []
    for a in arys:
        t = _t(a, "atleast_3d")
        if t.ndim == 0:
            t = _reshape(t, (1, 1, 1))
        elif t.ndim == 1:
            t = _reshape(t, (1,) + t.shape + (1,))
        elif t.ndim == 2:
            t = _reshape(t, t.shape + (1,))
        out.append(t)
    return out[0] if len(out) == 1 else out


def _seq(fname, arrays) -> List:
    if isinstance(arrays, Tracer) or isinstance(arrays, np.ndarray):
        x = _t(arrays, fname)
        return [x[i] for i in range(x.shape[0])]
    try:
        items = list(arrays)
    except TypeError:
        raise ArgumentTypeError(f"{fname}: expected a sequence of arrays, got {type(arrays).__name__}") from None
    if not items:
        raise ValueError(f"{fname}: need at least one array")
    return items


@api_function
def concatenate(arrays, axis=0, dtype=None) -> Tracer:
    """Join arrays along an existing ``axis`` (None: flatten them first); dtypes promote."""
    items = _seq("concatenate", arrays)
    if axis is None:
        items = [ravel(a) for a in items]
        axis = 0
    avals = [aval_of(a, "concatenate") for a in items]
    if builtins.any(a.ndim == 0 for a in avals):
        raise ShapeError("concatenate: zero-dimensional arrays cannot be concatenated")
    ts, dt, weak = promote("concatenate", *items, broadcast=False)
    if dtype is not None:
        ts = [convert(t, dtypes.canonicalize(dtype)) for t in ts]
    ax = canonical_axis("concatenate", axis, ts[0].ndim)
    for t in ts:
        if t.ndim != ts[0].ndim or builtins.any(i != ax and a != b for i, (a, b) in enumerate(zip(t.shape, ts[0].shape))):
            raise ShapeError(f"concatenate: all input array dimensions except for the concatenation "
                             f"axis {ax} must match, got shapes {', '.join(str(u.shape) for u in ts)}")
    return ls.concatenate(ts, ax)


concat = concatenate


@api_function
def stack(arrays, axis=0, dtype=None) -> Tracer:
    """Join same-shape arrays along a new ``axis``."""
    items = _seq("stack", arrays)
    ts, dt, weak = promote("stack", *items, broadcast=False)
    shapes = {t.shape for t in ts}
    if len(shapes) != 1:
        raise ShapeError(f"stack: all input arrays must have the same shape, got "
                         f"{', '.join(str(t.shape) for t in ts)}")
    ax = canonical_axis("stack", axis, ts[0].ndim + 1)
    ts = [ls.expand_dims(t, [ax]) for t in ts]
    out = ls.concatenate(ts, ax)
    return out if dtype is None else convert(out, dtypes.canonicalize(dtype))


@api_function
def vstack(tup, dtype=None) -> Tracer:
    return concatenate(atleast_2d_list(tup), axis=0, dtype=dtype)


def atleast_2d_list(tup):
    items = _seq("vstack", tup)
    out = []
    for a in items:
        t = _t(a, "vstack")
        out.append(_reshape(t, (1,) * (2 - t.ndim) + t.shape) if t.ndim < 2 else t)
    return out


row_stack = vstack


@api_function
def hstack(tup, dtype=None) -> Tracer:
    items = [_t(a, "hstack") for a in _seq("hstack", tup)]
    items = [_reshape(t, (1,)) if t.ndim == 0 else t for t in items]
    return concatenate(items, axis=0 if items[0].ndim == 1 else 1, dtype=dtype)


@api_function
def dstack(tup, dtype=None) -> Tracer:
    items = [atleast_3d(a) for a in _seq("dstack", tup)]
    return concatenate(items, axis=2, dtype=dtype)


@api_function
def column_stack(tup) -> Tracer:
    items = [_t(a, "column_stack") for a in _seq("column_stack", tup)]
    items = [_reshape(t, (t.size, 1)) if t.ndim < 2 else t for t in items]
    return concatenate(items, axis=1)


def _split_points(fname, n, indices_or_sections, even: bool):
    if isinstance(indices_or_sections, Tracer):
        raise ArgumentTypeError(f"{fname}: indices_or_sections must be static")
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError(f"{fname}: number of sections must be positive, got {k}")
        if even:
            if n % k:
                raise ShapeError(f"{fname}: array of size {n} along the axis does not divide into {k} equal sections")
            return [n // k * i for i in range(1, k)]
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        return list(np.cumsum(sizes)[:-1])
    return [static_int(f"{fname}: split index", i) for i in indices_or_sections]


def _split(fname, ary, indices_or_sections, axis, even):
    x = _t(ary, fname)
    ax = canonical_axis(fname, axis, x.ndim)
    n = x.shape[ax]
    pts = _split_points(fname, n, indices_or_sections, even)
    bounds = [0] + [builtins.min(builtins.max(p + n if p < 0 else p, 0), n) for p in pts] + [n]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        st = [0] * x.ndim
        lim = list(x.shape)
        st[ax], lim[ax] = lo, builtins.max(lo, hi)
        out.append(ls.slice(x, st, lim))
    return out


@api_function
def split(ary, indices_or_sections, axis: int = 0):
    """Split into equal sections (an int) or at the given indices (a sequence)."""
    return _split("split", ary, indices_or_sections, axis, True)


@api_function
def array_split(ary, indices_or_sections, axis: int = 0):
    """Like split, but a section count need not divide the axis evenly."""
    return _split("array_split", ary, indices_or_sections, axis, False)


@api_function
def hsplit(ary, indices_or_sections):
    x = _t(ary, "hsplit")
    return split(x, indices_or_sections, axis=1 if x.ndim > 1 else 0)


@api_function
def vsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, axis=0)


@api_function
def unstack(x, axis: int = 0):
    t = _t(x, "unstack")
    ax = canonical_axis("unstack", axis, t.ndim)
    return tuple(take(t, i, axis=ax) for i in range(t.shape[ax]))


@api_function
def tile(A, reps) -> Tracer:
    """Repeat the whole array ``reps`` times per axis."""
    x = _t(A, "tile")
    reps = static_shape("tile: reps", reps)
    nd = builtins.max(x.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + tuple(reps)
    shape = (1,) * (nd - x.ndim) + x.shape
    x = _reshape(x, shape)
    big = []
    dims = []
    for i, (r, s) in enumerate(zip(reps, shape)):
        big += [r, s]
        dims.append(2 * i + 1)
    b = broadcast_in_dim(x, big, dims)
    return _reshape(b, [r * s for r, s in zip(reps, shape)])


@api_function
def repeat(a, repeats, axis=None, total_repeat_length=None) -> Tracer:
    """Repeat each element ``repeats`` times (an int, or static per-element counts)."""
    x = _t(a, "repeat")
    if axis is None:
        x = _reshape(x, (x.size,))
        axis = 0
    ax = canonical_axis("repeat", axis, x.ndim)
    if isinstance(repeats, Tracer):
        raise UnsupportedError("repeat: traced repeat counts give a data-dependent shape; pass "
                               "static counts (a Python int or a numpy array)")
    if isinstance(repeats, (int, np.integer)):
        r = int(repeats)
        if r < 0:
            raise ValueError("repeat: repeats must be non-negative")
        shape = list(x.shape)
        big = shape[:ax + 1] + [r] + shape[ax + 1:]
        dims = [i if i <= ax else i + 1 for i in range(x.ndim)]
        b = broadcast_in_dim(x, big, dims)
        shape[ax] *= r
        return _reshape(b, shape)
    reps = np.asarray(repeats)
    if reps.ndim != 1 or reps.shape[0] not in (1, x.shape[ax]):
        raise ShapeError(f"repeat: repeats of shape {reps.shape} do not match axis {ax} of shape {x.shape}")
    if reps.shape[0] == 1:
        return repeat(x, int(reps[0]), axis=ax)
    idx = np.repeat(np.arange(x.shape[ax], dtype=np.int32), reps)
    return take(x, idx, axis=ax)


def _pad_widths(fname, pad_width, ndim):
    pw = np.asarray(pad_width if not isinstance(pad_width, Tracer) else None)
    if pw.dtype == object:
        raise ArgumentTypeError(f"{fname}: pad_width must be static ints")
    if pw.ndim == 0:
        pw = np.full((ndim, 2), int(pw))
    elif pw.ndim == 1:
        if pw.shape[0] == 1:
            pw = np.full((ndim, 2), int(pw[0]))
        elif pw.shape[0] == 2:
            pw = np.tile(pw[None, :], (ndim, 1))
        else:
            raise ShapeError(f"{fname}: pad_width {pad_width!r} does not fit {ndim} dimensions")
    if pw.shape == (1, 2):
        pw = np.tile(pw, (ndim, 1))
    if pw.shape != (ndim, 2):
        raise ShapeError(f"{fname}: pad_width {pad_width!r} does not fit {ndim} dimensions")
    if (pw < 0).any():
        raise ValueError(f"{fname}: pad widths must be non-negative, got {pad_width!r}")
    return [(int(lo), int(hi)) for lo, hi in pw]


def _slice_axis(x, ax, lo, hi):
    st = [0] * x.ndim
    lim = list(x.shape)
    st[ax], lim[ax] = lo, hi
    return ls.slice(x, st, lim)


@api_function
def pad(array, pad_width, mode: str = "constant", constant_values=0, **kwargs) -> Tracer:
    """Pad with a constant ("constant"), the edge values ("edge"), a mirror image ("reflect",
    "symmetric") or the array repeated ("wrap")."""
    x = _t(array, "pad")
    pw = _pad_widths("pad", pad_width, x.ndim)
    if mode == "constant":
        cv = constant_values
        if isinstance(cv, Tracer) or np.ndim(cv) == 0:
            pv = as_tracer(cv, x.dtype, "pad: constant_values")
            if pv.ndim != 0:
                raise ShapeError("pad: a traced constant_values must be a scalar")
            return ls.pad(x, pv, [(lo, hi, 0) for lo, hi in pw])
        vals = np.asarray(cv)
        if vals.shape in ((1,), (2,), (1, 2)):
            vals = np.broadcast_to(vals.reshape(-1)[-2:] if vals.size == 2 else vals.reshape(1), (x.ndim, 2))
        if vals.shape != (x.ndim, 2):
            raise ShapeError(f"pad: constant_values {cv!r} do not fit {x.ndim} dimensions")
        out = x
        for ax, ((lo, hi), (vlo, vhi)) in enumerate(zip(pw, vals)):
            cfg = [(0, 0, 0)] * x.ndim
            cfg[ax] = (lo, 0, 0)
            out = ls.pad(out, as_tracer(np.asarray(vlo, x.dtype)), cfg)
            cfg[ax] = (0, hi, 0)
            out = ls.pad(out, as_tracer(np.asarray(vhi, x.dtype)), cfg)
        return out
    if mode not in ("edge", "wrap", "reflect", "symmetric"):
        raise UnsupportedError(f"pad: mode {mode!r} is not supported (supported: constant, edge, "
                               "reflect, symmetric, wrap)")
    out = x
    for ax, (lo, hi) in enumerate(pw):
        if lo == 0 and hi == 0:
            continue
        n = out.shape[ax]
        if n == 0:
            raise ShapeError(f"pad: cannot pad an empty axis {ax} in mode {mode!r}")
        if mode == "edge":
            parts = []
            if lo:
                parts.append(repeat(_slice_axis(out, ax, 0, 1), lo, axis=ax))
            parts.append(out)
            if hi:
                parts.append(repeat(_slice_axis(out, ax, n - 1, n), hi, axis=ax))
            out = ls.concatenate(parts, ax)
            continue
        idx = _pad_index(n, lo, hi, mode)
        out = take(out, idx, axis=ax)
    return out


def _pad_index(n, lo, hi, mode):
    """Source index along an axis for numpy's wrap / reflect / symmetric padding."""
    base = np.arange(-lo, n + hi)
    if mode == "wrap":
        return (base % n).astype(np.int32)
    if mode == "reflect":
        if n == 1:
            return np.zeros_like(base, dtype=np.int32)
        period = 2 * (n - 1)
        m = base % period
        return np.where(m < n, m, period - m).astype(np.int32)
    period = 2 * n  # symmetric
    m = base % period
    return np.where(m < n, m, period - 1 - m).astype(np.int32)


@api_function
def flip(m, axis=None) -> Tracer:
    x = _t(m, "flip")
    axes = canonical_axes("flip", axis, x.ndim)
    return ls.rev(x, axes)


@api_function
def fliplr(m) -> Tracer:
    return flip(m, 1)


@api_function
def flipud(m) -> Tracer:
    return flip(m, 0)


@api_function
def rot90(m, k: int = 1, axes=(0, 1)) -> Tracer:
    x = _t(m, "rot90")
    a0, a1 = (canonical_axis("rot90", a, x.ndim) for a in axes)
    k = static_int("rot90: k", k) % 4
    if k == 0:
        return x
    if k == 2:
        return flip(flip(x, a0), a1)
    perm = list(range(x.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return ls.transpose(flip(x, a1), perm)
    return flip(ls.transpose(x, perm), a1)


@api_function
def roll(a, shift, axis=None) -> Tracer:
    """Shift elements cyclically along ``axis`` (the flattened array when None)."""
    x = _t(a, "roll")
    if axis is None:
        return reshape(roll(ravel(x), shift, 0), x.shape)
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    shifts = list(shift) if isinstance(shift, (list, tuple)) else [shift] * len(axes)
    if len(shifts) != len(axes):
        raise ValueError("roll: shift and axis must have the same length")
    out = x
    for s, ax in zip(shifts, axes):
        ax = canonical_axis("roll", ax, x.ndim)
        n = x.shape[ax]
        if n == 0:
            continue
        if isinstance(s, Tracer):
            from .ufuncs import remainder
            k = remainder(convert(s, dtypes.int32) if s.dtype != dtypes.int32 else s, n)
            doubled = ls.concatenate([out, out], ax)
            start = [0] * x.ndim
            start[ax] = emit1("subtract", [as_tracer(np.asarray(n, dtypes.int32)), k])
            out = ls.dynamic_slice(doubled, start, out.shape)
            continue
        s = static_int("roll: shift", s) % n
        if s:
            out = ls.concatenate([_slice_axis(out, ax, n - s, n), _slice_axis(out, ax, 0, n - s)], ax)
    return out


def _normalize_index(idx: Tracer, n: int) -> Tracer:
    """Negative indices count from the end."""
    if not dtypes.is_signed(idx.dtype):
        return idx
    zero = broadcast_in_dim(as_tracer(np.asarray(0, idx.dtype)), idx.shape, [])
    nn = broadcast_in_dim(as_tracer(np.asarray(n, idx.dtype)), idx.shape, [])
    neg = emit1("compare", [idx, zero], {"comparison_direction": "LT", "compare_type": "SIGNED"})
    return emit1("select", [neg, emit1("add", [idx, nn]), idx])


def _index_array(fname, indices) -> Tracer:
    if isinstance(indices, Tracer):
        t = indices
    elif isinstance(indices, (int, np.integer)) and not isinstance(indices, bool):
        t = as_tracer(np.asarray(indices, dtype=np.int64 if builtins.abs(int(indices)) >= 2 ** 31 else np.int32))
    else:
        arr = np.asarray(indices) if not isinstance(indices, (list, tuple)) or not _has_tracer(indices) else None
        if arr is None:
            from .creation import asarray
            t = asarray(indices)
        else:
            if arr.size == 0 and arr.dtype == np.float64:
                arr = arr.astype(np.int32)
            if arr.dtype.kind not in "iu":
                raise ArgumentTypeError(f"{fname}: indices must be integers, got dtype {arr.dtype}")
            if arr.dtype == np.int64 and (arr.size == 0 or builtins.max(builtins.abs(int(arr.min())), builtins.abs(int(arr.max()))) < 2 ** 31):
                arr = arr.astype(np.int32)
            t = as_tracer(arr)
    if not dtypes.is_int(t.dtype):
        raise ArgumentTypeError(f"{fname}: indices must be integers, got {t.aval.str_short()}")
    return t


def _has_tracer(x):
    if isinstance(x, Tracer):
        return True
    if isinstance(x, (list, tuple)):
        return builtins.any(_has_tracer(v) for v in x)
    return False


@api_function
def take(a, indices, axis=None, out=None, mode=None, unique_indices=False, indices_are_sorted=False,
         fill_value=None) -> Tracer:
    """Elements of ``a`` at ``indices`` along ``axis`` (the flattened array when None). With the
    default mode "fill", negative indices count from the end and out-of-bounds ones give
    ``fill_value`` (NaN for floats); mode "clip" clamps every index into range (negative ones to
    0); mode "wrap" wraps them modulo the axis length."""
    if out is not None:
        raise TypeError("take: out= is not supported")
    x = _t(a, "take")
    if axis is None:
        x = _reshape(x, (x.size,))
        axis = 0
    ax = canonical_axis("take", axis, x.ndim)
    idx = _index_array("take", indices)
    n = x.shape[ax]
    m = "fill" if mode is None else mode
    if m not in ("fill", "clip", "wrap", "promise_in_bounds"):
        raise ValueError(f"take: unknown mode {mode!r}")
    if m == "wrap":
        from .ufuncs import remainder
        idx = remainder(idx, n) if n else idx
    elif m != "clip":  # "clip" clamps negative indices to 0, as numpy and jax
        idx = _normalize_index(idx, n)
    if n == 0 and x.size == 0 and idx.size:
        raise HloIndexError(f"take: cannot take from an empty axis {ax} of shape {x.shape}")
    start = _reshape(idx, idx.shape + (1,))
    slice_sizes = list(x.shape)
    slice_sizes[ax] = 1
    offset_dims = list(range(ax)) + list(range(ax + idx.ndim, x.ndim - 1 + idx.ndim))
    dn = li.GatherDimensionNumbers(offset_dims=tuple(offset_dims), collapsed_slice_dims=(ax,),
                                   start_index_map=(ax,))
    gmode = "fill" if m == "fill" else "clip"
    return li.gather(x, start, dn, slice_sizes, mode=gmode, fill_value=fill_value,
                     indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)


@api_function
def take_along_axis(arr, indices, axis, mode=None, fill_value=None) -> Tracer:
    """``arr`` indexed along ``axis`` by ``indices`` (which broadcast against ``arr`` elsewhere).
    Out-of-bounds indices give ``fill_value`` (mode "fill", the default) or clamp ("clip")."""
    x = _t(arr, "take_along_axis")
    idx = _index_array("take_along_axis", indices)
    if axis is None:
        x = _reshape(x, (x.size,))
        idx = _reshape(idx, (idx.size,))
        axis = 0
    if idx.ndim != x.ndim:
        raise ShapeError(f"take_along_axis: indices and arr must have the same number of dimensions, "
                         f"got {idx.shape} and {x.shape}")
    ax = canonical_axis("take_along_axis", axis, x.ndim)
    shape = []
    for i, (a, b) in enumerate(zip(x.shape, idx.shape)):
        if i == ax:
            shape.append(b)
        else:
            shape.append(broadcast_shapes("take_along_axis", (a,), (b,))[0])
    idx = broadcast_to_shape(idx, shape, "take_along_axis")
    idx = _normalize_index(idx, x.shape[ax])
    idt = idx.dtype
    comps = []
    for d in range(x.ndim):
        if d == ax:
            c = idx
        else:
            c = emit1("iota", [], {"iota_dimension": d}, result_types=[ir_type(shape, idt)])
        comps.append(_reshape(c, tuple(shape) + (1,)))
    start = ls.concatenate(comps, x.ndim) if len(comps) > 1 else comps[0]
    # dimensions other than `ax` that are broadcast from size 1 in x must index element 0
    if builtins.any(x.shape[d] == 1 and shape[d] != 1 for d in range(x.ndim) if d != ax):
        x = broadcast_to_shape(x, [shape[d] if d != ax else x.shape[d] for d in range(x.ndim)], "take_along_axis")
    dn = li.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=tuple(range(x.ndim)),
                                   start_index_map=tuple(range(x.ndim)))
    m = "fill" if mode is None else mode
    return li.gather(x, start, dn, [1] * x.ndim, mode="fill" if m == "fill" else "clip", fill_value=fill_value)


def _tri_mask(fname, m: Tracer, k, direction):
    from .creation import _diag_mask
    if m.ndim < 2:
        raise ShapeError(f"{fname}: the array needs at least 2 dimensions, got shape {m.shape}")
    k = static_int(f"{fname}: k", k)
    return _diag_mask(m.shape, k, direction)


@api_function
def tril(m, k: int = 0) -> Tracer:
    """Zero the elements above the k-th diagonal (of the last two axes)."""
    x = _t(m, "tril")
    mask = _tri_mask("tril", x, k, "LE")
    return emit1("select", [mask, x, broadcast_in_dim(as_tracer(np.zeros((), x.dtype)), x.shape, [])],
                 weak_type=x.weak_type)


@api_function
def triu(m, k: int = 0) -> Tracer:
    """Zero the elements below the k-th diagonal (of the last two axes)."""
    x = _t(m, "triu")
    mask = _tri_mask("triu", x, k, "GE")
    return emit1("select", [mask, x, broadcast_in_dim(as_tracer(np.zeros((), x.dtype)), x.shape, [])],
                 weak_type=x.weak_type)


@api_function
def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tracer:
    """The ``offset`` diagonal of the ``axis1``/``axis2`` planes (as the last axis)."""
    x = _t(a, "diagonal")
    if x.ndim < 2:
        raise ShapeError(f"diagonal needs at least 2 dimensions, got shape {x.shape}")
    a1, a2 = canonical_axis("diagonal", axis1, x.ndim), canonical_axis("diagonal", axis2, x.ndim)
    if a1 == a2:
        raise ValueError("diagonal: axis1 and axis2 must differ")
    k = static_int("diagonal: offset", offset)
    x = moveaxis(x, [a1, a2], [-2, -1])
    n, m = x.shape[-2], x.shape[-1]
    length = builtins.max(0, builtins.min(n + builtins.min(k, 0), m - builtins.max(k, 0)))
    rows = np.arange(length, dtype=np.int32) - builtins.min(k, 0)
    cols = np.arange(length, dtype=np.int32) + builtins.max(k, 0)
    flat = _reshape(x, x.shape[:-2] + (n * m,))
    return take(flat, rows * m + cols, axis=-1)


@api_function
def trace(a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None) -> Tracer:
    from .reductions import sum as _sum
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


@api_function
def append(arr, values, axis=None) -> Tracer:
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], axis=0)
    return concatenate([arr, values], axis=axis)


def ndim(a) -> int:
    return aval_of(a).ndim


def shape(a):
    return aval_of(a).shape


def size(a, axis=None) -> int:
    s = aval_of(a).shape
    if axis is None:
        return int(np.prod(s, dtype=np.int64))
    return s[canonical_axis("size", axis, len(s))]
