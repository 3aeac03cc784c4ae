"""``reduce`` and ``reduce_window``.

The spec lets an implementation pick any binary tree whose in-order traversal is the init value
followed by the elements in index order. We use ``body(init, tree(elements))`` with a balanced
tree of adjacent pairs (``regions.tree_reduce``); for reduce_window, a left fold over window
positions. Both are exact schedules of the spec, so float sums round like the element type at
every step. Bodies that are one exactly associative op (integer add/mul/min/max, bitwise ops,
float min/max) reduce with numpy's reductions instead, which give the same result.
"""
from __future__ import annotations

import numpy as np

from . import numerics as nm
from .elementwise import BINARY_FUNCTIONS
from .regions import BOOL_UFUNCS, INT_UFUNCS, apply_body, single_op_body, tree_reduce
from .registry import attr, handler
from .shape_ops import pad


def _float_extremum(name, x):
    """IEEE maximum/minimum over the last (non-empty) axis: NaN wins, +0 > -0."""
    w = x.astype(nm.F32) if x.dtype in nm.NARROW_FLOATS else x
    r = (np.maximum if name == "maximum" else np.minimum).reduce(w, axis=-1)
    zero = r == 0
    if zero.any():
        if name == "maximum":
            pos = ((w == 0) & ~np.signbit(w)).any(axis=-1)
            r = np.where(zero, np.where(pos, w.dtype.type(0.0), w.dtype.type(-0.0)), r)
        else:
            neg = ((w == 0) & np.signbit(w)).any(axis=-1)
            r = np.where(zero, np.where(neg, w.dtype.type(-0.0), w.dtype.type(0.0)), r)
    return nm.arr(r, x.dtype)


def reduce_last_axis(it, body, xs, inits, env):
    """Reduce the last axis of each array of ``xs`` with ``body``, starting from ``inits``."""
    kshape = xs[0].shape[:-1]
    name = single_op_body(body) if len(xs) == 1 else None
    if name is not None and xs[0].dtype == inits[0].dtype:
        x, init = xs[0], inits[0]
        dt = x.dtype
        fn = BINARY_FUNCTIONS[name]
        if x.shape[-1] == 0:
            return [np.broadcast_to(init, kshape)]
        if nm.is_bool(dt):
            return [fn(init, BOOL_UFUNCS[name].reduce(x, axis=-1))]
        if nm.is_int(dt) and dt not in nm.SUB_BYTE:
            return [fn(init, nm.arr(INT_UFUNCS[name].reduce(x, axis=-1, dtype=dt), dt))]
        if name in ("maximum", "minimum") and nm.is_float(dt):
            return [fn(init, _float_extremum(name, x))]
        if name in ("add", "multiply"):
            t = tree_reduce(lambda l, r: [fn(l[0], r[0])], [x])
            return [fn(init, t[0])]
    # generic body: balanced tree of body applications on whole arrays
    t = tree_reduce(lambda l, r: apply_body(it, body, l + r, env, l[0].shape), xs)
    inits_b = [np.broadcast_to(v, kshape) for v in inits]
    if t is None:
        return inits_b
    return apply_body(it, body, inits_b + t, env, kshape)


def _to_body_types(body, xs, offset):
    return [nm.convert(x, body.args[offset + i].type.np_dtype) for i, x in enumerate(xs)]


@handler("reduce")
def _reduce(it, op, ins, env):
    n = len(ins) // 2
    body = op.regions[0]
    inputs = _to_body_types(body, ins[:n], 0)
    inits = _to_body_types(body, ins[n:], n)
    dims = sorted(op.attrs["dimensions"])
    rank = inputs[0].ndim
    kept = [d for d in range(rank) if d not in dims]
    kshape = tuple(inputs[0].shape[d] for d in kept)
    perm = kept + dims
    n = int(np.prod([inputs[0].shape[d] for d in dims], dtype=np.int64))
    xs = [(np.transpose(x, perm) if perm != list(range(rank)) else x).reshape(kshape + (n,))
          for x in inputs]
    outs = reduce_last_axis(it, body, xs, inits, env)
    return [nm.convert(o, r.type.np_dtype) for o, r in zip(outs, op.results)]


@handler("reduce_window")
def _reduce_window(it, op, ins, env):
    n = len(ins) // 2
    body = op.regions[0]
    inputs = _to_body_types(body, ins[:n], 0)
    inits = _to_body_types(body, ins[n:], n)
    r = inputs[0].ndim
    wd = op.attrs["window_dimensions"]
    ws = attr(op, "window_strides") or (1,) * r
    bd = attr(op, "base_dilations") or (1,) * r
    wdl = attr(op, "window_dilations") or (1,) * r
    padding = attr(op, "padding") or ((0, 0),) * r
    out_shape = op.results[0].type.shape
    acc = [np.broadcast_to(v, out_shape) for v in inits]
    if 0 in out_shape:
        return [nm.convert(a, t.type.np_dtype) for a, t in zip(acc, op.results)]
    padded = [pad(x, v, [p[0] for p in padding], [p[1] for p in padding], [b - 1 for b in bd])
              for x, v in zip(inputs, inits)]
    for w in np.ndindex(*wd):
        sl = tuple(slice(w[d] * wdl[d], w[d] * wdl[d] + (out_shape[d] - 1) * ws[d] + 1, ws[d])
                   for d in range(r))
        acc = apply_body(it, body, acc + [p[sl] for p in padded], env, out_shape)
    return [nm.convert(a, t.type.np_dtype) for a, t in zip(acc, op.results)]
