"""Contractions of hlo.lax: ``dot_general``, ``dot`` and ``conv_general_dilated``."""
from __future__ import annotations

from typing import NamedTuple, Tuple

from .. import dtypes
from ..errors import ArgumentTypeError, DTypeError, ShapeError
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit1
from .common import as_tracer, canonical_axis, ir_type, static_int
from .reductions import _pairs, padtype_to_pads


def _result_dtype(what, lhs: Tracer, rhs: Tracer, preferred_element_type):
    if lhs.dtype != rhs.dtype:
        raise DTypeError(f"{what} requires arguments to have the same dtype, got "
                         f"{dtypes.dtype_name(lhs.dtype)} and {dtypes.dtype_name(rhs.dtype)} "
                         "(hlo.numpy.matmul / einsum promote automatically)")
    if preferred_element_type is None:
        return lhs.dtype
    return dtypes.canonicalize(preferred_element_type, f"{what}: preferred_element_type")


@api_function
def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None) -> Tracer:
    """General tensor contraction. ``dimension_numbers`` is
    ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``; the result has the batch
    dimensions, then lhs's free dimensions, then rhs's (as jax.lax.dot_general)."""
    what = "lax.dot_general"
    a = as_tracer(lhs, what=what)
    b = as_tracer(rhs, what=what)
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"{what}: dimension_numbers must be ((lhs_contracting, rhs_contracting), "
                                f"(lhs_batch, rhs_batch)), got {dimension_numbers!r}") from None
    lc = tuple(canonical_axis(what, d, a.ndim) for d in lc)
    rc = tuple(canonical_axis(what, d, b.ndim) for d in rc)
    lb = tuple(canonical_axis(what, d, a.ndim) for d in lb)
    rb = tuple(canonical_axis(what, d, b.ndim) for d in rb)
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise ShapeError(f"{what}: lhs and rhs need as many contracting and batch dimensions, got "
                         f"contracting {lc} / {rc}, batch {lb} / {rb}")
    if len(set(lc + lb)) != len(lc + lb) or len(set(rc + rb)) != len(rc + rb):
        raise ShapeError(f"{what}: a dimension is repeated in dimension_numbers {dimension_numbers!r}")
    for x, y in zip(lc, rc):
        if a.shape[x] != b.shape[y]:
            raise ShapeError(f"{what}: contracting dimensions differ: lhs {a.aval.str_short()} dimension "
                             f"{x} has size {a.shape[x]}, rhs {b.aval.str_short()} dimension {y} has "
                             f"size {b.shape[y]}")
    for x, y in zip(lb, rb):
        if a.shape[x] != b.shape[y]:
            raise ShapeError(f"{what}: batch dimensions differ: lhs {a.aval.str_short()} dimension {x} "
                             f"has size {a.shape[x]}, rhs {b.aval.str_short()} dimension {y} has size "
                             f"{b.shape[y]}")
    out_dt = _result_dtype(what, a, b, preferred_element_type)
    shape = [a.shape[d] for d in lb]
    shape += [s for i, s in enumerate(a.shape) if i not in lb and i not in lc]
    shape += [s for i, s in enumerate(b.shape) if i not in rb and i not in rc]
    attrs = {"lhs_batching_dimensions": list(lb), "rhs_batching_dimensions": list(rb),
             "lhs_contracting_dimensions": list(lc), "rhs_contracting_dimensions": list(rc)}
    return emit1("dot_general", [a, b], attrs, result_types=[ir_type(shape, out_dt)],
                 weak_type=a.weak_type and b.weak_type)


@api_function
def dot(lhs, rhs, precision=None, preferred_element_type=None) -> Tracer:
    """Vector-vector, matrix-vector or matrix-matrix product (rank 1 or 2 operands)."""
    a = as_tracer(lhs, what="lax.dot")
    b = as_tracer(rhs, what="lax.dot")
    if a.ndim not in (1, 2) or b.ndim not in (1, 2):
        raise ShapeError(f"lax.dot takes rank-1 or rank-2 arrays, got {a.shape} and {b.shape}")
    return dot_general(a, b, (((a.ndim - 1,), (0,)), ((), ())), precision, preferred_element_type)


class ConvDimensionNumbers(NamedTuple):
    """Dimension positions: ``lhs_spec = (batch, feature, *spatial)``, ``rhs_spec = (out feature,
    in feature, *spatial)``, ``out_spec = (batch, feature, *spatial)`` (as jax)."""
    lhs_spec: Tuple[int, ...]
    rhs_spec: Tuple[int, ...]
    out_spec: Tuple[int, ...]


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """Normalize ``None`` (NCHW/OIHW/NCHW), strings like ``("NHWC", "HWIO", "NHWC")`` or a
    ``ConvDimensionNumbers`` into a ``ConvDimensionNumbers``."""
    nd = len(lhs_shape)
    if dimension_numbers is None:
        spec = tuple(range(nd))
        return ConvDimensionNumbers(spec, spec, spec)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if len(dimension_numbers) != 3:
        raise ArgumentTypeError(f"conv dimension_numbers must have 3 entries, got {dimension_numbers!r}")
    if all(isinstance(s, str) for s in dimension_numbers):
        lhs, rhs, out = dimension_numbers
        if not len(lhs) == len(rhs) == len(out) == nd:
            raise ShapeError(f"conv dimension_numbers {dimension_numbers!r} do not match rank {nd}")
        for s, need in ((lhs, "NC"), (rhs, "OI"), (out, "NC")):
            if len(set(s)) != len(s) or any(c not in s for c in need):
                raise ArgumentTypeError(f"conv layout {s!r} must name each dimension once and "
                                        f"contain {need[0]} and {need[1]}")
        ls = (lhs.index("N"), lhs.index("C")) + tuple(i for i, c in enumerate(lhs) if c not in "NC")
        spatial_chars = [c for c in lhs if c not in "NC"]
        try:
            rs = (rhs.index("O"), rhs.index("I")) + tuple(rhs.index(c) for c in spatial_chars)
            os_ = (out.index("N"), out.index("C")) + tuple(out.index(c) for c in spatial_chars)
        except ValueError:
            raise ArgumentTypeError(f"conv dimension_numbers {dimension_numbers!r}: the spatial "
                                    "dimension letters must agree between lhs, rhs and output") from None
        return ConvDimensionNumbers(ls, rs, os_)
    return ConvDimensionNumbers(*(tuple(int(v) for v in s) for s in dimension_numbers))


@api_function
def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count: int = 1,
                         batch_group_count: int = 1, precision=None,
                         preferred_element_type=None) -> Tracer:
    """General convolution (cross-correlation, as jax.lax.conv_general_dilated). ``padding`` is
    "SAME", "SAME_LOWER", "VALID" or a sequence of (low, high) pairs per spatial dimension."""
    what = "lax.conv_general_dilated"
    a = as_tracer(lhs, what=what)
    b = as_tracer(rhs, what=what)
    if a.ndim != b.ndim or a.ndim < 2:
        raise ShapeError(f"{what}: lhs and rhs must have the same rank (at least 2), got {a.shape} and {b.shape}")
    dn = conv_dimension_numbers(a.shape, b.shape, dimension_numbers)
    nsp = a.ndim - 2
    ws = tuple(static_int(f"{what}: window_strides", v) for v in window_strides)
    ld = tuple(static_int(f"{what}: lhs_dilation", v) for v in lhs_dilation) if lhs_dilation is not None else (1,) * nsp
    rd = tuple(static_int(f"{what}: rhs_dilation", v) for v in rhs_dilation) if rhs_dilation is not None else (1,) * nsp
    if not len(ws) == len(ld) == len(rd) == nsp:
        raise ShapeError(f"{what}: window_strides and dilations need one entry per spatial dimension ({nsp})")
    in_sp = [a.shape[d] for d in dn.lhs_spec[2:]]
    k_sp = [b.shape[d] for d in dn.rhs_spec[2:]]
    if isinstance(padding, str):
        dil_in = [(n - 1) * d + 1 if n else 0 for n, d in zip(in_sp, ld)]
        dil_k = [(k - 1) * d + 1 if k else 0 for k, d in zip(k_sp, rd)]
        pads = padtype_to_pads(dil_in, dil_k, ws, padding)
    else:
        pads = _pairs(what, padding, nsp)
    fgc = static_int(f"{what}: feature_group_count", feature_group_count)
    bgc = static_int(f"{what}: batch_group_count", batch_group_count)
    in_f, k_in, k_out = a.shape[dn.lhs_spec[1]], b.shape[dn.rhs_spec[1]], b.shape[dn.rhs_spec[0]]
    if fgc < 1 or bgc < 1 or in_f % fgc or in_f // fgc != k_in:
        raise ShapeError(f"{what}: lhs has {in_f} input features; with feature_group_count {fgc} the "
                         f"kernel must have {in_f // max(fgc, 1)} input features, it has {k_in}")
    if k_out % fgc or k_out % bgc or a.shape[dn.lhs_spec[0]] % bgc:
        raise ShapeError(f"{what}: output features ({k_out}) and batch ({a.shape[dn.lhs_spec[0]]}) must "
                         f"divide by the group counts ({fgc}, {bgc})")
    out_dt = _result_dtype(what, a, b, preferred_element_type)
    out_shape = [0] * a.ndim
    out_shape[dn.out_spec[0]] = a.shape[dn.lhs_spec[0]] // bgc
    out_shape[dn.out_spec[1]] = k_out
    for i in range(nsp):
        n, k = in_sp[i], k_sp[i]
        padded = ((n - 1) * ld[i] + 1 if n else 0) + pads[i][0] + pads[i][1]
        dk = (k - 1) * rd[i] + 1 if k else 0
        out_shape[dn.out_spec[2 + i]] = 0 if padded < dk or dk == 0 or padded <= 0 else (padded - dk) // ws[i] + 1
    attrs = {
        "window_strides": list(ws), "padding": [list(p) for p in pads],
        "lhs_dilation": list(ld), "rhs_dilation": list(rd),
        "input_batch_dimension": dn.lhs_spec[0], "input_feature_dimension": dn.lhs_spec[1],
        "input_spatial_dimensions": list(dn.lhs_spec[2:]),
        "kernel_output_feature_dimension": dn.rhs_spec[0], "kernel_input_feature_dimension": dn.rhs_spec[1],
        "kernel_spatial_dimensions": list(dn.rhs_spec[2:]),
        "output_batch_dimension": dn.out_spec[0], "output_feature_dimension": dn.out_spec[1],
        "output_spatial_dimensions": list(dn.out_spec[2:]),
        "feature_group_count": fgc, "batch_group_count": bgc,
    }
    return emit1("convolution", [a, b], attrs, result_types=[ir_type(out_shape, out_dt)])


@api_function
def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None) -> Tracer:
    """Convolution with NCHW input, OIHW kernel and NCHW output."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)
