"""StableHLO ops that hlo expresses with ops of its table, built in place by the importer.

``triangular_solve(b, a, rhs, left_side, lower, unit_diagonal, transpose_a)``: the solution X
of ``op(a) X = rhs`` (``left_side``) or ``X op(a) = rhs``, ``op`` one of NO_TRANSPOSE,
TRANSPOSE, ADJOINT; only ``a``'s ``lower`` (or upper) triangle is read, and with
``unit_diagonal`` not its diagonal either. Every case becomes one lower-triangular left-side
system ``L Y = C`` (transposing for the right side and for op, reversing rows and columns for
an upper triangle), solved by forward substitution in a ``while`` loop, one row per step:
``Y[i] = (C[i] - S[i] Y) / L[i, i]`` with S the strictly lower part (Y's unsolved rows are
still zero). Each row is a dot of the row with Y in the element type, as XLA's expander does
(``xla/service/triangular_solve_expander.cc`` solves blocks; at these sizes: one row), so every
target runs it with the ops it already has, and autodiff, batching and export need nothing new.
"""
from __future__ import annotations

import numpy as np

from .builder import Builder
from .core import Region, Value
from .types import TensorType, s32

TRANSPOSE_KINDS = ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT")


def _const(b: Builder, value, et) -> Value:
    return b.value("constant", [], attrs={"value": np.array(value, dtype=et.np_dtype)})


def _swap_last(b: Builder, x: Value) -> Value:
    r = x.type.rank
    perm = tuple(range(r - 2)) + (r - 1, r - 2)
    return b.value("transpose", [x], attrs={"permutation": perm})


def _reverse_last(b: Builder, x: Value, dims) -> Value:
    r = x.type.rank
    return b.value("reverse", [x], attrs={"dimensions": tuple(r - 2 + d for d in dims)})


def _mask(b: Builder, t: TensorType, keep) -> Value:
    """A pred tensor of ``t``'s shape: ``keep(row, col)`` per element of the last two dims."""
    r = t.rank
    it = TensorType(t.shape, s32)
    rows = b.value("iota", [], attrs={"iota_dimension": r - 2}, result_types=[it])
    cols = b.value("iota", [], attrs={"iota_dimension": r - 1}, result_types=[it])
    return b.value("compare", [rows, cols], attrs={"comparison_direction": keep})


def _conj(b: Builder, x: Value) -> Value:
    re_ = b.value("real", [x])
    im = b.value("negate", [b.value("imag", [x])])
    return b.value("complex", [re_, im])


def _bcast_scalar(b: Builder, v: Value, t: TensorType) -> Value:
    return b.value("broadcast_in_dim", [v], attrs={"broadcast_dimensions": ()}, result_types=[t])


def triangular_solve(b: Builder, a: Value, rhs: Value, left_side: bool, lower: bool,
                     unit_diagonal: bool, transpose_a: str) -> Value:
    if transpose_a not in TRANSPOSE_KINDS:
        raise ValueError(f"transpose_a must be one of {', '.join(TRANSPOSE_KINDS)}, got {transpose_a!r}")
    at = a.type
    et = at.dtype
    zero = _bcast_scalar(b, _const(b, 0, et), at.without_layout())
    # keep the triangle that is read (with the diagonal, or ones on it)
    tri = b.value("select", [_mask(b, at, "GE" if lower else "LE"), a, zero])
    if unit_diagonal:
        one = _bcast_scalar(b, _const(b, 1, et), at.without_layout())
        tri = b.value("select", [_mask(b, at, "EQ"), one, tri])
    x, c = tri, rhs
    if transpose_a != "NO_TRANSPOSE":
        x = _swap_last(b, x)
        if transpose_a == "ADJOINT" and et.is_complex:
            x = _conj(b, x)
        lower = not lower
    if not left_side:  # Y op(a) = C  <=>  op(a)^T Y^T = C^T
        x, c = _swap_last(b, x), _swap_last(b, c)
        lower = not lower
    if not lower:  # reverse the unknowns' order: an upper system becomes a lower one
        x, c = _reverse_last(b, x, (0, 1)), _reverse_last(b, c, (0,))
    y = _forward_substitution(b, x, c, unit_diagonal)
    if not lower:
        y = _reverse_last(b, y, (0,))
    if not left_side:
        y = _swap_last(b, y)
    return y


def _forward_substitution(b: Builder, L: Value, C: Value, unit: bool) -> Value:
    lt, ct = L.type.without_layout(), C.type.without_layout()
    r = lt.rank
    n, k = lt.shape[-1], ct.shape[-1]
    et = lt.dtype
    batch = lt.shape[:-2]
    zero_l = _bcast_scalar(b, _const(b, 0, et), lt)
    strict = b.value("select", [_mask(b, lt, "GT"), L, zero_l])
    y0 = _bcast_scalar(b, _const(b, 0, et), ct)
    i0 = _const(b, 0, s32)
    carry = [TensorType((), s32), ct]

    cond = Region(carry, name="cond")
    cb = Builder(cond, b.loc)
    nval = _const(cb, n, s32)
    cond.outputs = [cb.value("compare", [cond.args[0], nval], attrs={"comparison_direction": "LT"})]

    body = Region(carry, name="body")
    bb = Builder(body, b.loc)
    i, y = body.args
    z = _const(bb, 0, s32)
    starts = [z] * (r - 2)
    row = bb.value("dynamic_slice", [strict] + starts + [i, z],
                   attrs={"slice_sizes": tuple(batch) + (1, n)})
    nb = len(batch)
    s = bb.value("dot_general", [row, y], attrs={
        "lhs_batching_dimensions": tuple(range(nb)), "rhs_batching_dimensions": tuple(range(nb)),
        "lhs_contracting_dimensions": (r - 1,), "rhs_contracting_dimensions": (r - 2,)},
        result_types=[TensorType(tuple(batch) + (1, k), et)])
    ci = bb.value("dynamic_slice", [C] + starts + [i, z], attrs={"slice_sizes": tuple(batch) + (1, k)})
    yi = bb.value("subtract", [ci, s])
    if not unit:
        d = bb.value("dynamic_slice", [L] + starts + [i, i], attrs={"slice_sizes": tuple(batch) + (1, 1)})
        d = bb.value("broadcast_in_dim", [d], attrs={"broadcast_dimensions": tuple(range(r))},
                     result_types=[TensorType(tuple(batch) + (1, k), et)])
        yi = bb.value("divide", [yi, d])
    y2 = bb.value("dynamic_update_slice", [y, yi] + starts + [i, z])
    body.outputs = [bb.value("add", [i, _const(bb, 1, s32)]), y2]

    w = b.op("while", [i0, y0], regions=[cond, body])
    return w.results[1]
