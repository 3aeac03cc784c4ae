"""VJP rules of ``gather`` and ``scatter`` (what ``hnp.take``, indexing and ``x.at[...]``
produce), and of ``sort``.

Index semantics decide the rules. ``gather`` clamps each start index so the slice is in bounds,
so its VJP scatter-adds the cotangent at the *clamped* indices. ``scatter`` skips exactly the
update elements that land out of bounds (hlo's reference semantics), so the cotangent of
``updates`` is the result's cotangent gathered back at each update element's position, and
zero for skipped elements. Windows that may stick out of the operand are gathered from a
zero-padded cotangent so that gather's clamping cannot shift them.

Supported update regions: ``add`` (``x.at[i].add(v)``) and plain replacement (``.set``: the
update wins, and among duplicate indices only the update that the scatter kept receives a
cotangent; found by scattering update ids the same way).
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np

from hlo.ir.clone import clone_region

from ..tracing.tracer import Tracer
from . import prims as P
from .backprop import not_differentiable
from .table import Eqn, vjp_rule
from .vjp_reduce import body_kind


def _index_component(idx: Tracer, ivd: int, k: int) -> Tracer:
    """Component ``k`` of the index vectors: the batch-shaped array of one coordinate."""
    if ivd == idx.ndim:
        return idx
    start = [0] * idx.ndim
    limit = list(idx.shape)
    start[ivd], limit[ivd] = k, k + 1
    part = P.slice(idx, start, limit)
    return P.reshape(part, [n for d, n in enumerate(idx.shape) if d != ivd])


def _along_vector(idx: Tracer, ivd: int, values: List[int]) -> Tracer:
    """An index-shaped array holding ``values[k]`` at component ``k`` of each index vector."""
    arr = np.asarray(values, dtype=idx.dtype)
    if ivd == idx.ndim:
        return P.full(idx.shape, arr[0], idx.dtype)
    c = P.emit1("constant", [], {"value": arr})
    return P.broadcast_in_dim(c, idx.shape, [ivd])


# --------------------------------------------------------------------------------------------
# gather
# --------------------------------------------------------------------------------------------

@vjp_rule("gather")
def _gather(e: Eqn):
    x, idx = e.args
    g = e.ct
    a = {k: e.attr(k) for k in ("offset_dims", "collapsed_slice_dims", "operand_batching_dims",
                                "start_indices_batching_dims", "start_index_map",
                                "index_vector_dim", "slice_sizes", "indices_are_sorted")}
    ivd, sim, ss = a["index_vector_dim"], list(a["start_index_map"]), list(a["slice_sizes"])
    # The starts gather actually used: clamped into [0, dim - slice_size].
    hi = _along_vector(idx, ivd, [x.shape[d] - ss[d] for d in sim])
    starts = P.emit1("clamp", [P.const(0, idx.dtype), idx, hi])
    dx = P.scatter(P.zeros_like(x), starts, g, "add",
                   update_window_dims=list(a["offset_dims"]),
                   inserted_window_dims=list(a["collapsed_slice_dims"]),
                   input_batching_dims=list(a["operand_batching_dims"]),
                   scatter_indices_batching_dims=list(a["start_indices_batching_dims"]),
                   scatter_dims_to_operand_dims=sim, index_vector_dim=ivd,
                   indices_are_sorted=bool(a["indices_are_sorted"]))
    return [dx, None]


# --------------------------------------------------------------------------------------------
# scatter
# --------------------------------------------------------------------------------------------

def _scatter_attrs(e: Eqn) -> Dict:
    return {k: e.attr(k) for k in ("update_window_dims", "inserted_window_dims",
                                   "input_batching_dims", "scatter_indices_batching_dims",
                                   "scatter_dims_to_operand_dims", "index_vector_dim",
                                   "indices_are_sorted")}


def _window_sizes(a: Dict, x_shape, u_shape) -> Dict[int, int]:
    """Operand dim -> window size, for the operand dims that are update window dims."""
    uwd = list(a["update_window_dims"])
    window_dims = [d for d in range(len(x_shape))
                   if d not in a["inserted_window_dims"] and d not in a["input_batching_dims"]]
    return {d: u_shape[w] for d, w in zip(window_dims, uwd)}


def _gather_at_updates(src: Tracer, idx: Tracer, a: Dict, u_shape, fill) -> Tracer:
    """``src`` (operand-shaped) read at every update element's target position; exact for the
    elements scatter keeps, arbitrary for the others."""
    sdod = list(a["scatter_dims_to_operand_dims"])
    ivd = a["index_vector_dim"]
    win = _window_sizes(a, src.shape, u_shape)
    # Dims where a window of size > 1 could stick out: pad so that gather never clamps there.
    grow = {d: win[d] for d in sdod if win.get(d, 1) > 1}
    if grow:
        lo = [grow.get(d, 0) for d in range(src.ndim)]
        src = P.pad(src, P.const(fill, src.dtype), lo, lo, [0] * src.ndim)
        idx = P.add(idx, _along_vector(idx, ivd, [grow.get(d, 0) for d in sdod]))
    slice_sizes = [1 if d not in win else win[d] for d in range(src.ndim)]
    return P.gather(src, idx, offset_dims=list(a["update_window_dims"]),
                    collapsed_slice_dims=list(a["inserted_window_dims"]),
                    operand_batching_dims=list(a["input_batching_dims"]),
                    start_indices_batching_dims=list(a["scatter_indices_batching_dims"]),
                    start_index_map=sdod, index_vector_dim=ivd, slice_sizes=slice_sizes,
                    indices_are_sorted=bool(a["indices_are_sorted"]))


def _in_bounds(idx: Tracer, a: Dict, x_shape, u_shape) -> Tracer:
    """pred[u_shape]: which update elements land inside the operand."""
    uwd = list(a["update_window_dims"])
    usd = [d for d in range(len(u_shape)) if d not in uwd]
    win = _window_sizes(a, x_shape, u_shape)
    window_pos = {d: w for d, w in zip(
        [d for d in range(len(x_shape)) if d not in a["inserted_window_dims"]
         and d not in a["input_batching_dims"]], uwd)}
    ok = None
    for k, d in enumerate(a["scatter_dims_to_operand_dims"]):
        c = P.broadcast_in_dim(_index_component(idx, a["index_vector_dim"], k), u_shape, usd)
        if win.get(d, 1) > 1:
            c = P.add(c, P.iota(u_shape, window_pos[d], idx.dtype))
        inside = P.logical_and(P.compare(c, 0, "GE"), P.compare(c, x_shape[d], "LT"))
        ok = inside if ok is None else P.logical_and(ok, inside)
    return ok


@vjp_rule("scatter")
def _scatter(e: Eqn):
    if len(e.args) != 3:
        raise not_differentiable(e.op, " (scatter of several arrays at once)")
    region = e.op.regions[0]
    replace = (not region.ops and len(region.outputs) == 1 and len(region.args) == 2
               and region.outputs[0] is region.args[1])
    kind = "replace" if replace else body_kind(region)
    if kind not in ("add", "replace"):
        raise not_differentiable(e.op, f" (scatter with {'a ' + repr(kind) if kind else 'this'} "
                                       "update region; only add and set are supported)")
    x, idx, u = e.args
    g = e.ct
    a = _scatter_attrs(e)
    dx = du = None
    if kind == "add":
        dx = g if e.needs[0] else None
        if e.needs[2]:
            got = _gather_at_updates(g, idx, a, u.shape, 0)
            du = P.select(_in_bounds(idx, a, x.shape, u.shape), got, P.zeros_like(got))
        return [dx, None, du]
    scatter_kw = dict(update_window_dims=list(a["update_window_dims"]),
                      inserted_window_dims=list(a["inserted_window_dims"]),
                      input_batching_dims=list(a["input_batching_dims"]),
                      scatter_indices_batching_dims=list(a["scatter_indices_batching_dims"]),
                      scatter_dims_to_operand_dims=list(a["scatter_dims_to_operand_dims"]),
                      index_vector_dim=a["index_vector_dim"],
                      indices_are_sorted=bool(a["indices_are_sorted"]),
                      unique_indices=bool(e.attr("unique_indices")))
    if e.needs[0]:  # overwritten positions get nothing
        dx = P.scatter(g, idx, P.zeros_like(u), None, **scatter_kw)
    if e.needs[2]:
        id_type = np.int32 if u.size < 2 ** 31 - 1 else np.int64
        ids = P.reshape(P.iota([max(u.size, 1)], 0, id_type), u.shape) if u.size else \
            P.zeros(u.shape, id_type)
        winners = P.scatter(P.full(x.shape, -1, id_type), idx, ids, None, **scatter_kw)
        kept = P.compare(_gather_at_updates(winners, idx, a, u.shape, -1), ids, "EQ")
        got = _gather_at_updates(g, idx, a, u.shape, 0)
        du = P.select(kept, got, P.zeros_like(got))
    return [dx, None, du]


# --------------------------------------------------------------------------------------------
# sort
# --------------------------------------------------------------------------------------------

@vjp_rule("sort")
def _sort(e: Eqn):
    """Sort again with an iota carried along to learn the permutation (a stable sort, with the
    same comparator), then scatter each result's cotangent back to where its elements came
    from. With an unstable forward sort and equal keys, equal keys may swap cotangents."""
    x0 = e.args[0]
    r = x0.ndim
    d = e.attr("dimension") % r
    cmp = clone_region(e.op.regions[0], {})
    cmp.add_arg(P.ir_type((), np.int32))
    cmp.add_arg(P.ir_type((), np.int32))
    res = P.emit("sort", [*e.args, P.iota(x0.shape, d, np.int32)],
                 {"dimension": d, "is_stable": True}, regions=[cmp])
    perm = res[-1]
    others = [k for k in range(r) if k != d]
    out = []
    for x, ct, need in zip(e.args, e.cts, e.needs):
        if not need or ct is None:
            out.append(None)
            continue
        out.append(P.scatter(P.zeros_like(x), perm, ct, "add", inserted_window_dims=[d],
                             input_batching_dims=others, scatter_indices_batching_dims=others,
                             scatter_dims_to_operand_dims=[d], index_vector_dim=r,
                             unique_indices=True))
    return out
