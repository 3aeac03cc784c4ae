"""VJP rules of ``dot_general`` (general dimension numbers) and ``convolution``.

The cotangent of one operand is a ``dot_general`` of the result's cotangent with the other
operand (contracting the other operand's free dimensions), transposed into the operand's
dimension order: jax's ``_dot_general_transpose_lhs``/``_rhs``. When the result's element type
differs from the operands' (a preferred element type), the product is taken in the result's
type and converted back.

``convolution``'s VJPs are convolutions too (jax's ``_conv_general_dilated_transpose_lhs`` and
``_rhs``): the input's is the cotangent convolved with the spatially reversed kernel (strides
and input dilation trade places), the kernel's is the input convolved with the cotangent;
feature and batch groups move between the two.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

from ..tracing.tracer import Tracer
from . import prims as P
from .table import Eqn, vjp_rule


def _remaining(n: int, *removed: Sequence[int]) -> List[int]:
    gone = set(d for r in removed for d in r)
    return [i for i in range(n) if i not in gone]


def _transpose_lhs(g: Tracer, x: Tracer, y: Tracer, x_batch, y_batch, x_contract, y_contract,
                   swap_ans: bool) -> Tracer:
    """The cotangent of ``x`` in ``dot_general(x, y)`` (or of ``dot_general(y, x)`` when
    ``swap_ans``: then the result's free dimensions of ``y`` come first)."""
    x_kept = _remaining(x.ndim, x_contract, x_batch)
    y_kept = _remaining(y.ndim, y_contract, y_batch)
    nb = len(x_batch)
    if swap_ans:
        ans_y = list(range(nb, nb + len(y_kept)))
    else:
        ans_y = list(range(nb + len(x_kept), nb + len(x_kept) + len(y_kept)))
    ans_batch = list(range(nb))
    if g.dtype != y.dtype:
        y = P.convert(y, g.dtype)
    x_contract_by_y = [x_contract[i] for i in np.argsort(y_contract)]
    # dot(g, y) gives batch dims, g's free dims (x's kept dims), then y's free dims (x's
    # contracting dims); dot(y, g) the last two swapped. Take the one in x's order if either is.
    g_first = list(x_batch) + x_kept + x_contract_by_y
    y_first = list(x_batch) + x_contract_by_y + x_kept
    if y_first == list(range(x.ndim)) and g_first != y_first:
        out = P.dot_general(y, g, list(y_batch), ans_batch, y_kept, ans_y)
    else:
        d = P.dot_general(g, y, ans_batch, list(y_batch), ans_y, y_kept)
        out = P.transpose(d, [int(i) for i in np.argsort(g_first)])
    return P.convert(out, x.dtype)


@vjp_rule("dot_general")
def _dot_general(e: Eqn):
    x, y = e.args
    g = e.ct
    lb, rb = list(e.attr("lhs_batching_dimensions")), list(e.attr("rhs_batching_dimensions"))
    lc, rc = list(e.attr("lhs_contracting_dimensions")), list(e.attr("rhs_contracting_dimensions"))
    dx = _transpose_lhs(g, x, y, lb, rb, lc, rc, swap_ans=False) if e.needs[0] else None
    dy = _transpose_lhs(g, y, x, rb, lb, rc, lc, swap_ans=True) if e.needs[1] else None
    return [dx, dy]


# --------------------------------------------------------------------------------------------
# convolution (jax's _conv_general_dilated_transpose_lhs / _rhs)
# --------------------------------------------------------------------------------------------

def _dilate(shape, dilation):
    return [0 if n == 0 else 1 + r * (n - 1) for n, r in zip(shape, dilation)]


def _specs(a) -> Tuple[tuple, tuple, tuple]:
    """(batch, feature, spatial...) of lhs and output, (out feature, in feature, spatial...) of
    the kernel: jax's ConvDimensionNumbers."""
    return ((a["input_batch_dimension"], a["input_feature_dimension"], *a["input_spatial_dimensions"]),
            (a["kernel_output_feature_dimension"], a["kernel_input_feature_dimension"],
             *a["kernel_spatial_dimensions"]),
            (a["output_batch_dimension"], a["output_feature_dimension"], *a["output_spatial_dimensions"]))


def _swap(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


def _conv(lhs, rhs, specs, strides, padding, lhs_dil, rhs_dil, fgc, bgc) -> Tracer:
    ls, rs, os = specs
    return P.emit1("convolution", [lhs, rhs], {
        "window_strides": list(strides), "padding": [list(p) for p in padding],
        "lhs_dilation": list(lhs_dil), "rhs_dilation": list(rhs_dil),
        "input_batch_dimension": ls[0], "input_feature_dimension": ls[1],
        "input_spatial_dimensions": list(ls[2:]),
        "kernel_output_feature_dimension": rs[0], "kernel_input_feature_dimension": rs[1],
        "kernel_spatial_dimensions": list(rs[2:]),
        "output_batch_dimension": os[0], "output_feature_dimension": os[1],
        "output_spatial_dimensions": list(os[2:]),
        "feature_group_count": fgc, "batch_group_count": bgc})


def _axis_out_of(src: int, size1: int, x: Tracer) -> Tracer:
    shape = list(x.shape)
    shape[src:src + 1] = [size1, shape[src] // size1]
    return P.reshape(x, shape)


def _axis_into(src: int, dst: int, x: Tracer) -> Tracer:
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    shape = [n for i, n in enumerate(x.shape) if i != src]
    shape[dst] *= x.shape[src]
    return P.reshape(P.transpose(x, perm), shape)


@vjp_rule("convolution")
def _convolution(e: Eqn):
    lhs, rhs = e.args
    g = e.ct
    a = {k: e.attr(k) for k in ("input_batch_dimension", "input_feature_dimension",
                                "input_spatial_dimensions", "kernel_output_feature_dimension",
                                "kernel_input_feature_dimension", "kernel_spatial_dimensions",
                                "output_batch_dimension", "output_feature_dimension",
                                "output_spatial_dimensions", "feature_group_count",
                                "batch_group_count")}
    nsp = lhs.ndim - 2
    if any(e.attr("window_reversal") or ()):
        from .backprop import not_differentiable
        raise not_differentiable(e.op, " (convolution with window_reversal)")
    strides = list(e.attr("window_strides") or (1,) * nsp)
    padding = [tuple(p) for p in (e.attr("padding") or ((0, 0),) * nsp)]
    lhs_dil = list(e.attr("lhs_dilation") or (1,) * nsp)
    rhs_dil = list(e.attr("rhs_dilation") or (1,) * nsp)
    fgc, bgc = a["feature_group_count"], a["batch_group_count"]
    ls, rs, os = _specs(a)
    l_sp = [lhs.shape[d] for d in ls[2:]]
    r_sp = [rhs.shape[d] for d in rs[2:]]
    g_sp = [g.shape[d] for d in os[2:]]
    l_dilated, r_dilated, g_dilated = _dilate(l_sp, lhs_dil), _dilate(r_sp, rhs_dil), _dilate(g_sp, strides)
    dlhs = drhs = None
    if e.needs[0]:
        w = rhs if rhs.dtype == g.dtype else P.convert(rhs, g.dtype)
        groups = fgc
        if fgc > 1:
            w = _axis_into(rs[0], rs[1], _axis_out_of(rs[0], fgc, w))
        elif bgc > 1:
            w = _axis_into(rs[0], rs[1], _axis_out_of(rs[0], bgc, w))
            groups = bgc
        before = [r - lo - 1 for r, (lo, _) in zip(r_dilated, padding)]
        after = [l + r - 1 - o - b for l, r, o, b in zip(l_dilated, r_dilated, g_dilated, before)]
        out = _conv(g, P.reverse(w, list(rs[2:])), (os, _swap(rs), ls), lhs_dil,
                    list(zip(before, after)), strides, rhs_dil, groups, 1)
        if bgc > 1:
            out = _axis_into(ls[1], ls[0], _axis_out_of(ls[1], bgc, out))
        dlhs = P.convert(out, lhs.dtype)
    if e.needs[1]:
        if g.size == 0:
            drhs = P.zeros_like(rhs)
        else:
            x = lhs if lhs.dtype == g.dtype else P.convert(lhs, g.dtype)
            t_fgc, t_bgc = (bgc, 1) if bgc > 1 else ((1, fgc) if fgc > 1 else (1, 1))
            lo = [p[0] for p in padding]
            hi = [o - l + r - p - 1 for o, l, r, p in zip(g_dilated, l_dilated, r_dilated, lo)]
            out = _conv(x, g, (_swap(ls), _swap(os), _swap(rs)), rhs_dil, list(zip(lo, hi)),
                        lhs_dil, strides, t_fgc, t_bgc)
            drhs = P.convert(out, rhs.dtype)
    return [dlhs, drhs]
