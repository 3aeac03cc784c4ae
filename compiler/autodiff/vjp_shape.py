"""VJP rules of ops that move data without arithmetic: broadcast_in_dim, reshape, transpose,
slice, pad, concatenate, reverse, dynamic_slice and dynamic_update_slice.

Each is linear, so its VJP is its transpose: broadcasting sums, slicing pads with zeros,
padding slices, and so on.
"""
from __future__ import annotations

from . import prims as P
from .table import Eqn, vjp_rule


@vjp_rule("broadcast_in_dim")
def _broadcast_in_dim(e: Eqn):
    (x,), g = e.args, e.ct
    dims = list(e.attrs["broadcast_dimensions"])
    summed = set(d for d in range(g.ndim) if d not in dims)
    summed |= {dims[i] for i in range(x.ndim) if x.shape[i] == 1 and g.shape[dims[i]] != 1}
    r = P.reduce_sum(g, sorted(summed))
    kept = [i for i in range(x.ndim) if dims[i] not in summed]  # operand dims left in r
    in_r = sorted(kept, key=lambda i: dims[i])  # r keeps the result's dimension order
    r = P.transpose(r, [in_r.index(i) for i in kept])
    return [P.reshape(r, x.shape)]


@vjp_rule("reshape")
def _reshape(e: Eqn):
    return [P.reshape(e.ct, e.args[0].shape)]


@vjp_rule("transpose")
def _transpose(e: Eqn):
    perm = list(e.attrs["permutation"])
    inverse = [perm.index(i) for i in range(len(perm))]
    return [P.transpose(e.ct, inverse)]


@vjp_rule("reverse")
def _reverse(e: Eqn):
    return [P.reverse(e.ct, list(e.attrs["dimensions"]))]


@vjp_rule("slice")
def _slice(e: Eqn):
    (x,), g = e.args, e.ct
    start = e.attrs["start_indices"]
    strides = e.attr("strides") or (1,) * x.ndim
    high = []
    for d in range(x.ndim):
        n = g.shape[d]
        used = start[d] + (n - 1) * strides[d] + 1 if n else start[d]
        high.append(x.shape[d] - used)
    interior = [s - 1 for s in strides]
    return [P.pad(g, P.const(0, g.dtype), start, high, interior)]


@vjp_rule("pad")
def _pad(e: Eqn):
    x, pv = e.args
    g = e.ct
    lo, hi = e.attrs["edge_padding_low"], e.attrs["edge_padding_high"]
    interior = e.attrs["interior_padding"]
    # Undo cropping (negative edge padding) with zeros, then take every (interior+1)-th element.
    grown = P.pad(g, P.const(0, g.dtype), [max(-v, 0) for v in lo], [max(-v, 0) for v in hi],
                  [0] * g.ndim)
    start = [max(v, 0) for v in lo]
    limit = [n - max(v, 0) for n, v in zip(grown.shape, hi)]
    dx = P.slice(grown, start, limit, [i + 1 for i in interior])
    dpv = None
    if e.needs[1]:  # every element not from x is the padding value
        dpv = P.sub(P.sum_all(g), P.sum_all(dx))
    return [dx if e.needs[0] else None, dpv]


@vjp_rule("concatenate")
def _concatenate(e: Eqn):
    g = e.ct
    d = e.attrs["dimension"]
    out, offset = [], 0
    for x, need in zip(e.args, e.needs):
        n = x.shape[d]
        if need:
            start = [0] * g.ndim
            limit = list(g.shape)
            start[d], limit[d] = offset, offset + n
            out.append(P.slice(g, start, limit))
        else:
            out.append(None)
        offset += n
    return out


@vjp_rule("dynamic_slice")
def _dynamic_slice(e: Eqn):
    x, starts = e.args[0], e.args[1:]
    # dynamic_update_slice clamps the starts exactly as dynamic_slice did.
    return [P.dynamic_update_slice(P.zeros_like(x), e.ct, starts)] + [None] * len(starts)


@vjp_rule("dynamic_update_slice")
def _dynamic_update_slice(e: Eqn):
    u, starts = e.args[1], e.args[2:]
    g = e.ct
    dx = P.dynamic_update_slice(g, P.zeros_like(u), starts) if e.needs[0] else None
    du = P.dynamic_slice(g, starts, u.shape) if e.needs[1] else None
    return [dx, du] + [None] * len(starts)
