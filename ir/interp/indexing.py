"""``gather`` and ``scatter`` with full dimension numbers (including batching dimensions).

gather clamps each start index so that the whole slice is in bounds (spec). scatter computes
the result index of every update element and skips exactly the elements that fall out of
bounds (spec, and the StableHLO reference interpreter; XLA drops the whole window instead).
Updates apply in row-major order of the update index space, which is one of the schedules the
spec allows; bodies that are ``return(update)`` or a single add/mul/min/max/bitwise op use numpy's
indexed assignment / ``ufunc.at`` (same results), others run in rounds of distinct targets.
"""
from __future__ import annotations

import numpy as np

from . import numerics as nm
from .regions import BOOL_UFUNCS, INT_UFUNCS, apply_body, single_op_body
from .registry import attr, handler

_IDX_MAX = 1 << 62


def index_array(idx: np.ndarray) -> np.ndarray:
    """Integer indices as int64; huge unsigned values saturate instead of wrapping negative."""
    if idx.dtype == np.uint64:
        idx = np.minimum(idx, np.uint64(_IDX_MAX))
    return idx.astype(np.int64)


def _index_vectors(idx, ivd):
    idx = index_array(idx)
    if ivd == idx.ndim:
        return idx[..., None]
    return np.moveaxis(idx, ivd, -1)


def _axis_iota(n, axis, rank):
    shape = [1] * rank
    shape[axis] = n
    return np.arange(n, dtype=np.int64).reshape(shape)


@handler("gather")
def _gather(it, op, ins, env):
    x, idx = ins
    off = list(attr(op, "offset_dims"))
    col = list(attr(op, "collapsed_slice_dims"))
    ob = list(attr(op, "operand_batching_dims"))
    ib = list(attr(op, "start_indices_batching_dims"))
    sim = list(op.attrs["start_index_map"])
    ivd = op.attrs["index_vector_dim"]
    ss = list(op.attrs["slice_sizes"])
    rt = op.results[0].type
    vec = _index_vectors(idx, ivd)
    batch_shape = vec.shape[:-1]
    nb = len(batch_shape)
    offset_operand_dims = [d for d in range(x.ndim) if d not in col and d not in ob]
    offset_shape = tuple(ss[d] for d in offset_operand_dims)
    full = batch_shape + offset_shape
    rank = len(full)
    if 0 in full or x.size == 0:
        return [np.zeros(rt.shape, x.dtype)]
    index_arrays = []
    for d in range(x.ndim):
        comp = np.zeros((1,) * rank, np.int64)
        if d in sim:
            s = np.clip(vec[..., sim.index(d)], 0, x.shape[d] - ss[d])
            comp = comp + s.reshape(batch_shape + (1,) * len(offset_shape))
        if d in ob:
            d_start = ib[ob.index(d)]
            bdim = d_start if d_start < ivd else d_start - 1
            comp = comp + _axis_iota(batch_shape[bdim], bdim, rank)
        if d in offset_operand_dims:
            j = offset_operand_dims.index(d)
            comp = comp + _axis_iota(offset_shape[j], nb + j, rank)
        index_arrays.append(comp)
    g = np.broadcast_to(x[tuple(index_arrays)], full) if x.ndim else np.broadcast_to(x, full)
    perm, bi = [], 0
    for r in range(rank):
        if r in off:
            perm.append(nb + off.index(r))
        else:
            perm.append(bi)
            bi += 1
    return [np.transpose(g, perm)]


def scatter_targets(op, x_shape, idx, upd_shape):
    """Flat result indices of the in-bounds update elements (in row-major update order), and
    the flat positions of those elements in the updates."""
    uwd = list(attr(op, "update_window_dims"))
    iwd = list(attr(op, "inserted_window_dims"))
    ib = list(attr(op, "input_batching_dims"))
    sib = list(attr(op, "scatter_indices_batching_dims"))
    sdod = list(op.attrs["scatter_dims_to_operand_dims"])
    ivd = op.attrs["index_vector_dim"]
    urank = len(upd_shape)
    usd = [d for d in range(urank) if d not in uwd]
    vec = _index_vectors(idx, ivd)
    window_input_dims = [d for d in range(len(x_shape)) if d not in iwd and d not in ib]
    start_shape = [1] * urank
    for j, d in enumerate(usd):
        start_shape[d] = vec.shape[j]
    coords = []
    for d in range(len(x_shape)):
        c = np.zeros((1,) * urank, np.int64)
        if d in sdod:
            c = c + vec[..., sdod.index(d)].reshape(start_shape)
        if d in ib:
            d_start = sib[ib.index(d)]
            j = d_start if d_start < ivd else d_start - 1
            c = c + _axis_iota(upd_shape[usd[j]], usd[j], urank)
        if d in window_input_dims:
            w = uwd[window_input_dims.index(d)]
            c = c + _axis_iota(upd_shape[w], w, urank)
        coords.append(np.broadcast_to(c, upd_shape).reshape(-1))
    n = int(np.prod(upd_shape, dtype=np.int64))
    ok = np.ones(n, bool)
    for c, size in zip(coords, x_shape):
        ok &= (c >= 0) & (c < size)
    pos = np.nonzero(ok)[0]
    if len(x_shape) == 0:
        return np.zeros(len(pos), np.int64), pos
    flat = np.ravel_multi_index(tuple(c[pos] for c in coords), x_shape) if len(pos) else \
        np.zeros(0, np.int64)
    return flat.astype(np.int64), pos


@handler("scatter")
def _scatter(it, op, ins, env):
    n = (len(ins) - 1) // 2
    inputs, idx, updates = ins[:n], ins[n], ins[n + 1:]
    body = op.regions[0]
    updates = [nm.convert(u, body.args[n + i].type.np_dtype) for i, u in enumerate(updates)]
    outs = [np.array(x, copy=True, order="C") for x in inputs]
    flats = [o.reshape(-1) for o in outs]
    targets, pos = scatter_targets(op, inputs[0].shape, idx, updates[0].shape)
    if len(targets) == 0:
        return outs
    vals = [u.reshape(-1)[pos] for u in updates]
    if n == 1 and len(body.ops) == 0 and len(body.outputs) == 1:
        if body.outputs[0] is body.args[1]:  # replace
            flats[0][targets] = nm.convert(vals[0], outs[0].dtype)
            return outs
        if body.outputs[0] is body.args[0]:  # keep
            return outs
    name = single_op_body(body) if n == 1 else None
    if name is not None and body.args[0].type.np_dtype == outs[0].dtype == vals[0].dtype:
        dt = outs[0].dtype
        uf = None
        if nm.is_bool(dt):
            uf = BOOL_UFUNCS[name]
        elif nm.is_int(dt) and dt not in nm.SUB_BYTE:
            uf = INT_UFUNCS[name]
        elif name in ("add", "multiply") and dt not in nm.SUB_BYTE:
            uf = np.add if name == "add" else np.multiply  # sequential, rounds per step
        if uf is not None:
            uf.at(flats[0], targets, vals[0])
            return outs
    # general: rounds in which every target occurs at most once, in update order
    order = np.argsort(targets, kind="stable")
    st = targets[order]
    starts = np.r_[0, np.nonzero(st[1:] != st[:-1])[0] + 1]
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(st)]))
    rank = np.empty(len(targets), np.int64)
    rank[order] = np.arange(len(st)) - group_start
    for r in range(int(rank.max()) + 1):
        sel = np.nonzero(rank == r)[0]
        t = targets[sel]
        cur = [nm.convert(f[t], body.args[i].type.np_dtype) for i, f in enumerate(flats)]
        new = apply_body(it, body, cur + [v[sel] for v in vals], env, (len(sel),))
        for f, v in zip(flats, new):
            f[t] = nm.convert(v, f.dtype)
    return outs
