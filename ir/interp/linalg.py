"""``dot_general`` and ``convolution``.

The result element type may differ from the operands' (StableHLO's preferred element type).
Like XLA, operands are converted to the result type before multiplying, so ``s8 x s8 -> s32``
products are exact and integer sums wrap in the result type. Float products accumulate in f32
(f16, bf16 and f32 results; rounded to f16/bf16 once at the end, as XLA does) or in f64; the
order of the sum is the BLAS library's (the spec leaves it implementation-defined). Complex
products are summed in index order without fused multiply-adds, as XLA's CPU code does.
"""
from __future__ import annotations

import numpy as np

from . import numerics as nm
from .registry import attr, handler
from .shape_ops import pad


def compute_dtype(operand_dt: np.dtype, result_dt: np.dtype) -> np.dtype:
    """The type the products and sums are computed in."""
    if nm.is_float(result_dt):
        return nm.F64 if nm.F64 in (operand_dt, result_dt) else nm.F32
    if nm.is_bool(result_dt):
        return np.dtype(np.int64)
    return result_dt


def _to_compute(x, cdt, result_dt):
    if nm.is_bool(result_dt):
        return x.astype(np.int64) if not nm.is_float(x.dtype) else (x != 0).astype(np.int64)
    if nm.is_float(cdt) and nm.is_float(x.dtype):
        return nm.convert(x, cdt)
    return nm.convert(nm.convert(x, result_dt), cdt)


def _from_compute(r, result_dt):
    if nm.is_bool(result_dt):
        return r != 0
    return nm.convert(r, result_dt)


def matmul(a, b, result_dt):
    """Batched ``a @ b`` ((B,M,K) x (B,K,N)) with the result-type rules above."""
    cdt = compute_dtype(a.dtype, result_dt)
    if nm.is_complex(cdt):  # sum in index order, one rounding per product part and per add
        x, y = _to_compute(a, cdt, result_dt), _to_compute(b, cdt, result_dt)
        r = np.zeros(x.shape[:-1] + y.shape[-1:], cdt)
        for k in range(x.shape[-1]):
            r = r + x[..., :, k, None] * y[..., k, None, :]
        return nm.arr(r, cdt)
    r = np.matmul(_to_compute(a, cdt, result_dt), _to_compute(b, cdt, result_dt))
    return _from_compute(nm.arr(r, cdt), result_dt)


@handler("dot_general")
def _dot_general(it, op, ins, env):
    lhs, rhs = ins
    lb = list(attr(op, "lhs_batching_dimensions"))
    rb = list(attr(op, "rhs_batching_dimensions"))
    lc = list(attr(op, "lhs_contracting_dimensions"))
    rc = list(attr(op, "rhs_contracting_dimensions"))
    lf = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.ndim) if d not in rb and d not in rc]
    bshape = [lhs.shape[d] for d in lb]
    B = int(np.prod(bshape, dtype=np.int64))
    M = int(np.prod([lhs.shape[d] for d in lf], dtype=np.int64))
    N = int(np.prod([rhs.shape[d] for d in rf], dtype=np.int64))
    K = int(np.prod([lhs.shape[d] for d in lc], dtype=np.int64))
    a = np.transpose(lhs, lb + lf + lc).reshape(B, M, K)
    b = np.transpose(rhs, rb + rc + rf).reshape(B, K, N)
    rt = op.results[0].type
    return [matmul(a, b, rt.np_dtype).reshape(rt.shape)]


@handler("convolution")
def _convolution(it, op, ins, env):
    lhs, rhs = ins
    rt = op.results[0].type
    nsp = lhs.ndim - 2
    ws = attr(op, "window_strides") or (1,) * nsp
    padding = attr(op, "padding") or ((0, 0),) * nsp
    ld = attr(op, "lhs_dilation") or (1,) * nsp
    rd = attr(op, "rhs_dilation") or (1,) * nsp
    rev = attr(op, "window_reversal") or (False,) * nsp
    a = op.attrs
    # canonical layouts: lhs (N, C, spatial...), rhs (O, I, spatial...)
    x = np.transpose(lhs, [a["input_batch_dimension"], a["input_feature_dimension"]]
                     + list(a["input_spatial_dimensions"]))
    k = np.transpose(rhs, [a["kernel_output_feature_dimension"], a["kernel_input_feature_dimension"]]
                     + list(a["kernel_spatial_dimensions"]))
    flip = [2 + i for i in range(nsp) if rev[i]]
    if flip:
        k = np.flip(k, axis=flip)  # same products as reversing each lhs window
    fgc, bgc = attr(op, "feature_group_count"), attr(op, "batch_group_count")
    out_sp = [rt.shape[d] for d in a["output_spatial_dimensions"]]
    cdt = compute_dtype(lhs.dtype, rt.np_dtype)
    x = _to_compute(x, cdt, rt.np_dtype)
    k = _to_compute(k, cdt, rt.np_dtype)
    zero = np.zeros((), x.dtype)
    x = pad(x, zero, [0, 0] + [p[0] for p in padding], [0, 0] + [p[1] for p in padding],
            [0, 0] + [d - 1 for d in ld])
    if fgc > 1:
        xs = np.split(x, fgc, axis=1)
        ks = np.split(k, fgc, axis=0)
        res = np.concatenate([_conv_core(xi, ki, ws, rd, out_sp) for xi, ki in zip(xs, ks)], axis=1)
    elif bgc > 1:
        xs = np.split(x, bgc, axis=0)
        ks = np.split(k, bgc, axis=0)
        res = np.concatenate([_conv_core(xi, ki, ws, rd, out_sp) for xi, ki in zip(xs, ks)], axis=1)
    else:
        res = _conv_core(x, k, ws, rd, out_sp)
    res = _from_compute(res, rt.np_dtype)
    # (N, O, spatial...) -> the result's dimension order
    perm = [a["output_batch_dimension"], a["output_feature_dimension"]] + list(a["output_spatial_dimensions"])
    return [np.transpose(res, np.argsort(perm))]


def _conv_core(x, k, strides, rhs_dilation, out_sp):
    """Ungrouped convolution of padded, dilated (N, C, S...) with (O, C, K...): one matrix
    product per kernel position, accumulated in the compute type."""
    n, o = x.shape[0], k.shape[0]
    out = np.zeros((n,) + tuple(out_sp) + (o,), dtype=x.dtype)
    if 0 in out.shape:
        return np.moveaxis(out, -1, 1)
    for pos in np.ndindex(*k.shape[2:]):
        sl = tuple(slice(p * d, p * d + (m - 1) * s + 1, s)
                   for p, d, m, s in zip(pos, rhs_dilation, out_sp, strides))
        win = x[(slice(None), slice(None)) + sl]  # (N, C, out...)
        win = np.moveaxis(win, 1, -1)  # (N, out..., C)
        kk = k[(slice(None), slice(None)) + pos]  # (O, C)
        out = out + np.matmul(win, kk.T)
    return np.moveaxis(out, -1, 1)
