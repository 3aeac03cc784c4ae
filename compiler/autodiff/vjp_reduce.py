"""VJP rules of reductions: ``reduce`` and ``reduce_window``.

The body region says which reduction it is: a body that is one ``add``, ``maximum``,
``minimum`` or ``multiply`` of its two arguments is recognized (in either order). Sums
broadcast the cotangent back; max and min send it to the elements equal to the result, split
evenly among ties (jax's rule for ``reduce_max``); products send each element the product of
the others (exactly, also with zeros).

``reduce_window`` with an ``add`` body (sum pooling, cumulative sums) uses jax's transpose: pad
the cotangent, then sum windows again. With ``maximum``/``minimum`` (max pooling, cummax) each
window's cotangent goes to its first element equal to the result, like XLA's
select_and_scatter in jax's max-pooling gradient; with ``multiply`` (cumprod) each element
gets the product of the rest of its window.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from hlo.ir import Region
from hlo.ir import ops as op_table

from . import prims as P
from .backprop import not_differentiable
from .table import Eqn, vjp_rule

_RECOGNIZED = op_table.with_trait(op_table.COMMUTATIVE)
# The bodies with a VJP: the commutative ops that take floats (add, maximum, minimum, multiply).
DIFFERENTIABLE_BODIES = _RECOGNIZED - op_table.with_trait(op_table.NON_DIFFERENTIABLE)


def body_kind(region: Region) -> Optional[str]:
    """``add``/``maximum``/... when ``region`` is ``return(op(%a, %b))`` of its two scalar
    arguments, else None."""
    if len(region.args) != 2 or len(region.ops) != 1 or len(region.outputs) != 1:
        return None
    op = region.ops[0]
    if op.name not in _RECOGNIZED or len(op.operands) != 2 or region.outputs[0] is not op.results[0]:
        return None
    if set(op.operands) != set(region.args) or op.operands[0] is op.operands[1]:
        return None
    return op.name


@vjp_rule("reduce")
def _reduce(e: Eqn):
    kind = body_kind(e.op.regions[0]) if len(e.args) == 2 else None
    if kind not in DIFFERENTIABLE_BODIES:
        what = f"a '{kind}' body" if kind else (
            "several inputs" if len(e.args) > 2 else "a body that is not a single add/max/min/mul")
        raise not_differentiable(e.op, f" (reduce with {what})")
    x, init = e.args
    g = e.ct
    dims = list(e.attrs["dimensions"])
    kept = [d for d in range(x.ndim) if d not in dims]
    if kind == "multiply":
        return _reduce_prod(e, x, init, g, dims, kept)
    if kind == "add":
        dx = P.broadcast_in_dim(g, x.shape, kept) if e.needs[0] else None
        dinit = P.sum_all(g) if e.needs[1] else None
        return [dx, dinit]
    ans = e.outs[0]
    one, zero = P.const(1, x.dtype), P.const(0, x.dtype)
    hit = P.select(P.compare(x, P.broadcast_in_dim(ans, x.shape, kept), "EQ"),
                   P.broadcast_in_dim(one, x.shape, []), P.broadcast_in_dim(zero, x.shape, []))
    counts = P.reduce_sum(hit, dims)
    init_hit = None
    if e.needs[1]:
        init_hit = P.select(P.compare(P.broadcast_in_dim(init, ans.shape, []), ans, "EQ"),
                            P.full_like(ans, 1), P.zeros_like(ans))
        counts = P.add(counts, init_hit)
    share = P.div(g, counts)
    dx = P.mul(hit, P.broadcast_in_dim(share, x.shape, kept)) if e.needs[0] else None
    dinit = P.sum_all(P.mul(share, init_hit)) if e.needs[1] else None
    return [dx, dinit]


def _reduce_prod(e: Eqn, x, init, g, dims, kept):
    """d/dx_i of init * prod(x) is the product of the others: prod / x_i without zeros, the
    product of the nonzero elements at the only zero, and 0 elsewhere when there are several
    zeros (exact, and differentiable again)."""
    dx = dinit = None
    if e.needs[0]:
        is_zero = P.compare(x, 0, "EQ")
        zeros = P.reduce_sum(P.select(is_zero, P.full_like(x, 1), P.zeros_like(x)), dims)
        nonzero_prod = P.reduce(P.select(is_zero, P.full_like(x, 1), x), init, dims, "multiply")
        nz_b = P.broadcast_in_dim(zeros, x.shape, kept)
        prod_b = P.broadcast_in_dim(nonzero_prod, x.shape, kept)
        safe_x = P.select(is_zero, P.full_like(x, 1), x)
        others = P.select(is_zero,
                          P.select(P.compare(nz_b, 1, "EQ"), prod_b, P.zeros_like(x)),
                          P.select(P.compare(nz_b, 0, "EQ"), P.div(prod_b, safe_x), P.zeros_like(x)))
        dx = P.mul(P.broadcast_in_dim(g, x.shape, kept), others)
    if e.needs[1]:
        dinit = P.sum_all(P.mul(g, P.reduce(x, P.const(1, x.dtype), dims, "multiply")))
    return [dx, dinit]


def _dilate(shape, dilation):
    return [0 if n == 0 else 1 + r * (n - 1) for n, r in zip(shape, dilation)]


# Max/min/product windows are unrolled over the window's offsets; past this many the IR would
# balloon.
MAX_UNROLLED_WINDOW = 64


@vjp_rule("reduce_window")
def _reduce_window(e: Eqn):
    kind = body_kind(e.op.regions[0]) if len(e.args) == 2 else None
    if kind not in DIFFERENTIABLE_BODIES:
        what = f"a '{kind}' body" if kind else "a body that is not a single add, max, min or mul"
        raise not_differentiable(e.op, f" (reduce_window with {what})")
    x, init = e.args
    g = e.ct
    r = x.ndim
    w = _Window(e, r)
    if kind != "add":
        return _reduce_window_unrolled(e, x, init, g, w, kind)
    dx = None
    if e.needs[0]:
        # jax's _reduce_window_sum_transpose_rule (conv_general_vjp_lhs_padding)
        in_dil = _dilate(x.shape, w.base_dilations)
        win_dil = _dilate(w.dims, w.dilations)
        out_dil = _dilate(g.shape, w.strides)
        before = [k - lo - 1 for k, (lo, _) in zip(win_dil, w.padding)]
        after = [i + k - 1 - o - b for i, k, o, b in zip(in_dil, win_dil, out_dil, before)]
        padded = P.pad(g, P.const(0, g.dtype), before, after, [s - 1 for s in w.strides])
        attrs = {"window_dimensions": w.dims, "window_strides": w.base_dilations,
                 "window_dilations": w.dilations}
        summed = P.emit1("reduce_window", [padded, P.const(0, g.dtype)], attrs,
                         regions=[P.scalar_body("add", g.dtype)])
        if summed.shape != x.shape:
            raise P.AutodiffInternalError(
                f"reduce_window transpose made {summed.aval.str_short()} for {x.aval.str_short()}",
                location=None)
        dx = summed
    dinit = P.sum_all(g) if e.needs[1] else None
    return [dx, dinit]


class _Window:
    def __init__(self, e: Eqn, r: int):
        self.dims = list(e.attrs["window_dimensions"])
        self.strides = list(e.attr("window_strides") or (1,) * r)
        self.base_dilations = list(e.attr("base_dilations") or (1,) * r)
        self.dilations = list(e.attr("window_dilations") or (1,) * r)
        self.padding = [tuple(p) for p in (e.attr("padding") or ((0, 0),) * r)]


def _reduce_window_unrolled(e: Eqn, x, init, g, w: _Window, kind: str):
    """Max/min/product windows, unrolled over the window's offsets in the padded, dilated input.

    Max/min: each output's cotangent goes to the first element of its window (row-major window
    order) equal to the result, as XLA's select_and_scatter does for jax's max pooling.
    Product: each element gets the product of the rest of its window (prefix times suffix
    products, so zeros are exact)."""
    offsets = [tuple(int(i) for i in o) for o in np.ndindex(*w.dims)]
    if len(offsets) > MAX_UNROLLED_WINDOW:
        raise not_differentiable(e.op, f" (reduce_window with a '{kind}' body over windows of "
                                       f"{len(offsets)} elements; at most {MAX_UNROLLED_WINDOW} are "
                                       "supported)")
    lo = [p[0] for p in w.padding]
    hi = [p[1] for p in w.padding]
    padded = P.pad(x, init, lo, hi, [b - 1 for b in w.base_dilations])
    out = e.outs[0]
    m = list(out.shape)
    windows = []  # (start, limit, the window element at this offset for every output)
    if g.size and padded.size:
        for off in offsets:
            start = [k * d for k, d in zip(off, w.dilations)]
            limit = [s + (n - 1) * st + 1 for s, n, st in zip(start, m, w.strides)]
            windows.append((start, limit, P.slice(padded, start, limit, w.strides)))
    shares = _chooser_shares(out, g, windows) if kind != "multiply" else \
        _product_shares(init, g, windows)
    acc = None
    for (start, limit, _), share in zip(windows, shares):
        high = [n - l for n, l in zip(padded.shape, limit)]
        acc = P.add_any(acc, P.pad(share, P.const(0, g.dtype), start, high,
                                   [st - 1 for st in w.strides]))
    if acc is None:
        acc = P.zeros(padded.shape, g.dtype)
    # the transpose of the padding: x's elements are every base_dilation-th past the low edge
    grown = P.pad(acc, P.const(0, g.dtype), [max(-v, 0) for v in lo], [max(-v, 0) for v in hi],
                  [0] * x.ndim)
    start = [max(v, 0) for v in lo]
    limit = [n - max(v, 0) for n, v in zip(grown.shape, hi)]
    dx = P.slice(grown, start, limit, w.base_dilations)
    dinit = None
    if e.needs[1]:  # init fills the padding; a product also multiplies it in once more
        dinit = P.sub(P.sum_all(acc), P.sum_all(dx))
        if kind == "multiply" and windows:
            whole = windows[0][2]
            for _, _, c in windows[1:]:
                whole = P.mul(whole, c)
            dinit = P.add(dinit, P.sum_all(P.mul(g, whole)))
    return [dx if e.needs[0] else None, dinit]


def _chooser_shares(out, g, windows):
    zero = P.zeros_like(g)
    taken, shares = None, []
    for _, _, c in windows:
        hit = P.compare(c, out, "EQ")
        if taken is not None:
            hit = P.logical_and(hit, P.unary("not", taken))
        taken = hit if taken is None else P.emit1("or", [taken, hit])
        shares.append(P.select(hit, g, zero))
    return shares


def _product_shares(init, g, windows):
    cs = [c for _, _, c in windows]
    prefix, suffix = [None] * len(cs), [None] * len(cs)
    run = None
    for k, c in enumerate(cs):
        prefix[k] = run
        run = c if run is None else P.mul(run, c)
    run = None
    for k in range(len(cs) - 1, -1, -1):
        suffix[k] = run
        run = cs[k] if run is None else P.mul(cs[k], run)
    g_init = P.mul(g, P.broadcast_in_dim(init, g.shape, []))
    shares = []
    for k in range(len(cs)):
        share = g_init
        for part in (prefix[k], suffix[k]):
            if part is not None:
                share = P.mul(share, part)
        shares.append(share)
    return shares
