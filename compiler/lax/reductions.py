"""Reductions, windowed reductions, cumulative ops and sorting of hlo.lax.

Ops with a body (``reduce``, ``reduce_window``, ``sort``) trace a Python callable on scalars into
the op's region with ``trace_region``; monoid helpers (``reduce_sum``, ``reduce_max``...) pass
the matching hlo.lax function.
"""
from __future__ import annotations

import builtins
from typing import Callable, List, Sequence, Tuple

import numpy as np

from hlo.ir import prefix_scan
from hlo.ir.prefix_scan import ScanOps

from .. import dtypes
from ..errors import ArgumentTypeError, DTypeError, ShapeError
from ..tracing.abstract import ShapedArray
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit, emit1, trace_region
from ..tree_util import tree_flatten, tree_unflatten
from . import elementwise as ew
from .common import as_tracer, canonical_axes, canonical_axis, ir_type, static_int

# --------------------------------------------------------------------------------------------
# reduce
# --------------------------------------------------------------------------------------------

def _scalar_body(what: str, computation: Callable, dts: Sequence[np.dtype], pytree_args: bool,
                 name: str = "body"):
    """Trace ``computation(acc, x)`` on scalars of ``dts`` (twice over: accumulators then
    inputs) into a region; check it returns scalars of the same dtypes."""
    n = len(dts)
    avals = [ShapedArray((), d) for d in dts] * 2

    def body(*args):
        a, b = args[:n], args[n:]
        if pytree_args:
            return computation(tuple(a), tuple(b))
        return computation(a[0], b[0])
    tr = trace_region(body, avals, name=name, description=f"the computation of {what}")
    if len(tr.out_avals) != n or any(o.shape != () or o.dtype != d for o, d in zip(tr.out_avals, dts)):
        raise DTypeError(f"{what}: the computation must return {n} scalar(s) of dtype "
                         f"{', '.join(dtypes.dtype_name(d) for d in dts)}, returned "
                         f"{', '.join(o.str_short() for o in tr.out_avals) or 'nothing'}")
    return tr.region


@api_function
def reduce(operands, init_values, computation: Callable, dimensions):
    """Reduce ``operands`` (an array or a pytree of same-shape arrays) over ``dimensions`` with
    ``computation(acc, x)`` (taking and returning pytrees like ``operands`` of scalars), starting
    from ``init_values`` (scalars)."""
    flat_ops, tree = tree_flatten(operands)
    flat_init, itree = tree_flatten(init_values)
    if tree != itree:
        raise ShapeError(f"lax.reduce: operands and init_values must have the same structure, got {tree} and {itree}")
    xs = [as_tracer(o, what="lax.reduce") for o in flat_ops]
    inits = [as_tracer(v, x.dtype if dtypes.is_python_scalar(v) else None, "lax.reduce: init_values")
             for v, x in zip(flat_init, xs)]
    for x, i in zip(xs, inits):
        if x.shape != xs[0].shape:
            raise ShapeError(f"lax.reduce: operands must have one shape, got {', '.join(str(t.shape) for t in xs)}")
        if i.ndim != 0 or i.dtype != x.dtype:
            raise DTypeError(f"lax.reduce: init value {i.aval.str_short()} must be a scalar of dtype "
                             f"{dtypes.dtype_name(x.dtype)}")
    dims = canonical_axes("lax.reduce", tuple(dimensions), xs[0].ndim)
    pytree = not (len(xs) == 1 and tree.num_nodes == 1)
    body = _scalar_body("lax.reduce", computation, [x.dtype for x in xs], pytree)
    outs = emit("reduce", xs + inits, {"dimensions": sorted(dims)}, regions=[body])
    return tree_unflatten(tree, outs)


def _monoid(x: Tracer, axes, op: Callable, init, what: str) -> Tracer:
    axes = canonical_axes(what, tuple(axes), x.ndim)
    if not axes:
        return x
    init_t = as_tracer(np.asarray(init, dtype=x.dtype))
    body = _scalar_body(what, op, [x.dtype], False)
    return emit1("reduce", [x, init_t], {"dimensions": sorted(axes)}, regions=[body])


@api_function
def reduce_sum(operand, axes) -> Tracer:
    x = as_tracer(operand, what="lax.reduce_sum")
    return _monoid(x, axes, ew.add, False if dtypes.is_bool(x.dtype) else 0, "lax.reduce_sum")


@api_function
def reduce_prod(operand, axes) -> Tracer:
    x = as_tracer(operand, what="lax.reduce_prod")
    return _monoid(x, axes, ew.mul, True if dtypes.is_bool(x.dtype) else 1, "lax.reduce_prod")


@api_function
def reduce_max(operand, axes) -> Tracer:
    x = as_tracer(operand, what="lax.reduce_max")
    return _monoid(x, axes, ew.max, dtypes.min_value(x.dtype), "lax.reduce_max")


@api_function
def reduce_min(operand, axes) -> Tracer:
    x = as_tracer(operand, what="lax.reduce_min")
    return _monoid(x, axes, ew.min, dtypes.max_value(x.dtype), "lax.reduce_min")


@api_function
def reduce_and(operand, axes) -> Tracer:
    x = as_tracer(operand, what="lax.reduce_and")
    init = True if dtypes.is_bool(x.dtype) else np.array(-1).astype(x.dtype)
    return _monoid(x, axes, ew.and_, init, "lax.reduce_and")


@api_function
def reduce_or(operand, axes) -> Tracer:
    x = as_tracer(operand, what="lax.reduce_or")
    return _monoid(x, axes, ew.or_, False if dtypes.is_bool(x.dtype) else 0, "lax.reduce_or")


@api_function
def reduce_xor(operand, axes) -> Tracer:
    x = as_tracer(operand, what="lax.reduce_xor")
    return _monoid(x, axes, ew.xor, False if dtypes.is_bool(x.dtype) else 0, "lax.reduce_xor")


def _isnan(x: Tracer) -> Tracer:
    return emit1("compare", [x, x], {"comparison_direction": "NE", "compare_type": "FLOAT"})


def _argminmax(operand, axis, index_dtype, is_max: bool) -> Tracer:
    what = "lax.argmax" if is_max else "lax.argmin"
    x = as_tracer(operand, what=what)
    ax = canonical_axis(what, axis, x.ndim)
    idt = dtypes.canonicalize(index_dtype, f"{what}: index_dtype")
    if not dtypes.is_int(idt):
        raise DTypeError(f"{what}: index_dtype must be an integer dtype, got {dtypes.dtype_name(idt)}")
    if x.shape[ax] == 0:
        raise ShapeError(f"{what}: cannot take the arg{'max' if is_max else 'min'} of an empty axis "
                         f"(axis {ax} of shape {x.shape})")
    idx = emit1("iota", [], {"iota_dimension": ax}, result_types=[ir_type(x.shape, idt)])
    direction = "GT" if is_max else "LT"
    is_float = dtypes.is_float(x.dtype)
    ct = ew.compare_type(x.dtype)

    def body(acc, cur):
        (av, ai), (bv, bi) = acc, cur
        better = emit1("compare", [av, bv], {"comparison_direction": direction, "compare_type": ct})
        equal = emit1("compare", [av, bv], {"comparison_direction": "EQ", "compare_type": ct})
        if is_float:  # NaN wins (the first NaN), as in numpy and jax
            an, bn = _isnan(av), _isnan(bv)
            better = emit1("or", [better, emit1("and", [an, emit1("not", [bn])])])
            equal = emit1("or", [equal, emit1("and", [an, bn])])
        lower_index = emit1("compare", [ai, bi], {"comparison_direction": "LT", "compare_type": ew.compare_type(idt)})
        pick_a = emit1("or", [better, emit1("and", [equal, lower_index])])
        return (emit1("select", [pick_a, av, bv]), emit1("select", [pick_a, ai, bi]))

    init_v = as_tracer(np.asarray(dtypes.min_value(x.dtype) if is_max else dtypes.max_value(x.dtype), x.dtype))
    init_i = as_tracer(np.asarray(0, idt))
    region = _scalar_body(what, body, [x.dtype, idt], True)
    _, out = emit("reduce", [x, idx, init_v, init_i], {"dimensions": [ax]}, regions=[region])
    return out


@api_function
def argmax(operand, axis, index_dtype) -> Tracer:
    """Index of the largest element along ``axis`` (the first one on ties; NaN counts as largest)."""
    return _argminmax(operand, axis, index_dtype, True)


@api_function
def argmin(operand, axis, index_dtype) -> Tracer:
    """Index of the smallest element along ``axis`` (the first one on ties; NaN counts as smallest)."""
    return _argminmax(operand, axis, index_dtype, False)


# --------------------------------------------------------------------------------------------
# reduce_window
# --------------------------------------------------------------------------------------------

def padtype_to_pads(in_shape, window_shape, window_strides, padding: str) -> List[Tuple[int, int]]:
    """``(low, high)`` padding per dimension for "SAME", "SAME_LOWER" or "VALID" (as jax)."""
    p = padding.upper()
    if p == "VALID":
        return [(0, 0)] * len(in_shape)
    if p not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"unknown padding {padding!r}; expected 'SAME', 'SAME_LOWER', 'VALID' or a "
                         "list of (low, high) pairs")
    out = []
    for n, w, s in zip(in_shape, window_shape, window_strides):
        out_n = -(-n // s)
        total = builtins.max((out_n - 1) * s + w - n, 0)
        lo = total // 2 if p == "SAME" else -(-total // 2)
        out.append((lo, total - lo))
    return out


def _pairs(what, padding, rank):
    try:
        pads = [tuple(static_int(f"{what}: padding", v) for v in p) for p in padding]
    except TypeError:
        raise ArgumentTypeError(f"{what}: padding must be a string or a sequence of (low, high) pairs") from None
    if len(pads) != rank or any(len(p) != 2 for p in pads):
        raise ShapeError(f"{what}: padding needs one (low, high) pair per dimension ({rank})")
    return pads


@api_function
def reduce_window(operand, init_value, computation: Callable, window_dimensions, window_strides,
                  padding, base_dilation=None, window_dilation=None):
    """Reduce each window of ``operand`` with ``computation`` (like ``reduce``); ``padding`` is a
    list of (low, high) pairs or "SAME"/"VALID". Operands may be a pytree of arrays."""
    what = "lax.reduce_window"
    flat_ops, tree = tree_flatten(operand)
    flat_init, itree = tree_flatten(init_value)
    if tree != itree:
        raise ShapeError(f"{what}: operand and init_value must have the same structure")
    xs = [as_tracer(o, what=what) for o in flat_ops]
    inits = [as_tracer(v, x.dtype if dtypes.is_python_scalar(v) else None, f"{what}: init_value")
             for v, x in zip(flat_init, xs)]
    r = xs[0].ndim
    wd = tuple(static_int(f"{what}: window_dimensions", v) for v in window_dimensions)
    ws = tuple(static_int(f"{what}: window_strides", v) for v in window_strides) if window_strides is not None else (1,) * r
    bd = tuple(static_int(f"{what}: base_dilation", v) for v in base_dilation) if base_dilation is not None else (1,) * r
    wdl = tuple(static_int(f"{what}: window_dilation", v) for v in window_dilation) if window_dilation is not None else (1,) * r
    if not len(wd) == len(ws) == len(bd) == len(wdl) == r:
        raise ShapeError(f"{what}: window_dimensions, strides and dilations need one entry per "
                         f"dimension of {xs[0].shape}")
    if any(v <= 0 for v in wd + ws + bd + wdl):
        raise ShapeError(f"{what}: window sizes, strides and dilations must be positive")
    for x, i in zip(xs, inits):
        if x.shape != xs[0].shape:
            raise ShapeError(f"{what}: operands must have one shape")
        if i.ndim != 0 or i.dtype != x.dtype:
            raise DTypeError(f"{what}: init value {i.aval.str_short()} must be a scalar of dtype "
                             f"{dtypes.dtype_name(x.dtype)}")
    if isinstance(padding, str):
        dil_in = [(n - 1) * b + 1 if n else 0 for n, b in zip(xs[0].shape, bd)]
        dil_w = [(w - 1) * d + 1 for w, d in zip(wd, wdl)]
        pads = padtype_to_pads(dil_in, dil_w, ws, padding)
    else:
        pads = _pairs(what, padding, r)
    pytree = not (len(xs) == 1 and tree.num_nodes == 1)
    body = _scalar_body(what, computation, [x.dtype for x in xs], pytree)
    attrs = {"window_dimensions": list(wd), "window_strides": list(ws), "base_dilations": list(bd),
             "window_dilations": list(wdl), "padding": [list(p) for p in pads]}
    outs = emit("reduce_window", xs + inits, attrs, regions=[body])
    return tree_unflatten(tree, outs)


# Running reductions of more than SCAN_MIN elements along their axis are an associative scan
# (``hlo.ir.prefix_scan``, as jax's ``associative_scan`` for CPU and GPU): log2(n) levels of
# strided slices, the op on pairs, and zero-padded interleaves, O(n) work. A ``reduce_window`` whose window is the whole
# prefix does O(n^2): ``cumsum`` of 2^16 f32 took 1.75 s on the CPU, of 2^22 20 s on an H200
# (jax.jit: 58 us); now 0.14 ms and 82 us (jax.jit in that run: 62). Short ones stay one
# reduce_window (fewer, simpler kernels).
SCAN_MIN = 16


class _TracerScanOps(ScanOps):
    """``hlo.ir.prefix_scan``'s construction on tracers (the weak type of the scanned array)."""

    def __init__(self, weak_type: bool):
        self.weak_type = weak_type

    def shape(self, v):
        return v.shape

    def is_bool(self, v):
        return dtypes.is_bool(v.dtype)

    def emit(self, name, operands, attrs):
        return emit1(name, list(operands), attrs, weak_type=self.weak_type)

    def zero(self, like):
        return as_tracer(np.zeros((), like.dtype))


def _cumulative(what, operand, axis, reverse, op, init_fn):
    x = as_tracer(operand, what=what)
    ax = canonical_axis(what, axis, x.ndim)
    n = x.shape[ax]
    if n == 0:
        return x
    if n > SCAN_MIN:
        return prefix_scan.scan(_TracerScanOps(x.weak_type), op, x, ax, reverse)
    wd = [1] * x.ndim
    wd[ax] = n
    pads = [(0, 0)] * x.ndim
    pads[ax] = (0, n - 1) if reverse else (n - 1, 0)
    init = as_tracer(np.asarray(init_fn(x.dtype), x.dtype))
    body = _scalar_body(what, op, [x.dtype], False)
    return emit1("reduce_window", [x, init], {"window_dimensions": wd, "window_strides": [1] * x.ndim,
                                               "padding": [list(p) for p in pads]},
                 regions=[body], weak_type=x.weak_type)


@api_function
def cumsum(operand, axis: int = 0, reverse: bool = False) -> Tracer:
    """Running sum along ``axis`` (from the end when ``reverse``)."""
    return _cumulative("lax.cumsum", operand, axis, reverse, ew.add,
                       lambda d: False if dtypes.is_bool(d) else 0)


@api_function
def cumprod(operand, axis: int = 0, reverse: bool = False) -> Tracer:
    return _cumulative("lax.cumprod", operand, axis, reverse, ew.mul,
                       lambda d: True if dtypes.is_bool(d) else 1)


@api_function
def cummax(operand, axis: int = 0, reverse: bool = False) -> Tracer:
    return _cumulative("lax.cummax", operand, axis, reverse, ew.max, dtypes.min_value)


@api_function
def cummin(operand, axis: int = 0, reverse: bool = False) -> Tracer:
    return _cumulative("lax.cummin", operand, axis, reverse, ew.min, dtypes.max_value)


# --------------------------------------------------------------------------------------------
# sort
# --------------------------------------------------------------------------------------------

def _lt_total(a: Tracer, b: Tracer) -> Tracer:
    """a < b in the order numpy sorts: -0.0 == 0.0 and NaNs last."""
    ct = ew.compare_type(a.dtype)
    lt = emit1("compare", [a, b], {"comparison_direction": "LT", "compare_type": ct})
    if dtypes.is_float(a.dtype):
        lt = emit1("or", [lt, emit1("and", [_isnan(b), emit1("not", [_isnan(a)])])])
    return lt


def _eq_total(a: Tracer, b: Tracer) -> Tracer:
    ct = ew.compare_type(a.dtype)
    eq = emit1("compare", [a, b], {"comparison_direction": "EQ", "compare_type": ct})
    if dtypes.is_float(a.dtype):
        eq = emit1("or", [eq, emit1("and", [_isnan(a), _isnan(b)])])
    return eq


def sort_comparator_region(dts: Sequence[np.dtype], num_keys: int, descending: bool = False):
    """A sort comparator region: lexicographic "less than" (or "greater than") on the first
    ``num_keys`` operands, -0.0 equal to 0.0 and NaNs last (first when descending)."""
    avals = []
    for d in dts:
        avals += [ShapedArray((), d), ShapedArray((), d)]

    def cmp(*args):
        xs, ys = args[0::2], args[1::2]
        p = None
        for k in reversed(range(num_keys)):
            a, b = (ys[k], xs[k]) if descending else (xs[k], ys[k])
            lt = _lt_total(a, b)
            p = lt if p is None else emit1("or", [lt, emit1("and", [_eq_total(a, b), p])])
        return p
    return trace_region(cmp, avals, name="comparator", description="a sort comparator").region


@api_function
def sort(operand, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """Sort along ``dimension``. ``operand`` is an array or a sequence of same-shape arrays,
    sorted together by the first ``num_keys`` of them (lexicographically). NaNs sort last."""
    single = isinstance(operand, Tracer) or not isinstance(operand, (list, tuple))
    ops = [as_tracer(o, what="lax.sort") for o in ([operand] if single else operand)]
    if not ops:
        raise ValueError("lax.sort needs at least one operand")
    for o in ops:
        if o.shape != ops[0].shape:
            raise ShapeError(f"lax.sort: operands must have one shape, got {', '.join(str(t.shape) for t in ops)}")
    if ops[0].ndim == 0:
        raise ShapeError("lax.sort: cannot sort a 0-d array")
    dim = canonical_axis("lax.sort", dimension, ops[0].ndim)
    nk = static_int("lax.sort: num_keys", num_keys)
    if not 1 <= nk <= len(ops):
        raise ValueError(f"lax.sort: num_keys must be between 1 and {len(ops)}, got {nk}")
    region = sort_comparator_region([o.dtype for o in ops], nk)
    outs = emit("sort", ops, {"dimension": dim, "is_stable": bool(is_stable)}, regions=[region],
                weak_type=[o.weak_type for o in ops])
    return outs[0] if single else tuple(outs)


@api_function
def sort_key_val(keys, values, dimension: int = -1, is_stable: bool = True):
    """Sort ``values`` by ``keys`` along ``dimension``; returns (sorted keys, values)."""
    return sort((keys, values), dimension=dimension, is_stable=is_stable, num_keys=1)
