"""Mapping a ``dot_general`` onto one cuBLASLt matrix product (a ``LibraryCall`` step).

``plan_dot(lhs, rhs, out, dims, ...)`` takes the operand and result ``TensorType``\\ s (their
``layout``, minor-to-major, is the physical order; None means row-major), the dot_general's
dimension numbers (the op's attrs: ``lhs_batching_dimensions``, ``rhs_batching_dimensions``,
``lhs_contracting_dimensions``, ``rhs_contracting_dimensions``) and optionally an epilogue,
and returns a ``GemmPlan`` -- or ``Declined(reason)`` (falsy) when cuBLASLt cannot compute it;
the caller then emits a generated kernel. ``GemmPlan.library_call(lhs_ref, rhs_ref, out_ref,
c_ref=None, bias_ref=None, what="")`` gives the step.

How a dot_general becomes one GEMM: its dimensions fall into four groups -- batch (B), the lhs
free dimensions (M), the rhs free dimensions (N), contracting (K). Each group must collapse
into one dimension with one stride in every operand that has it (the dimensions of a group
contiguous and in the same order everywhere); then every operand is a strided batch of
matrices. cuBLASLt is column-major: when the result's N dimension is the unit-stride one (the
usual row-major result) the plan computes the transpose, D^T = rhs^T lhs^T (``swapped``).
Each of cuBLASLt's A and B is then read as stored (``trans`` false: its rows have unit stride)
or transposed (its columns have unit stride). Declined: integer / pred / mixed element types,
an empty dimension, dimensions of a group that do not collapse, an operand or result with no
unit-stride dimension, a bias not along the result's cuBLASLt rows.

The plan's ``params`` is a ``hlo.runtime.cuda.matmul_params.MatmulParams``, the record the
runtime's cuBLASLt binding reads (that module documents each field); the step carries it as
``MatmulParams.to_json()``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence, Tuple

from hlo.ir.types import TensorType
from hlo.runtime.cuda.matmul_params import BIAS_EPILOGUES, EPILOGUES, MatmulParams, Matrix
from hlo.runtime.steps import BufRef, LibraryCall

PRECISIONS = {None: "32F", "default": "32F", "highest": "32F", "tf32": "32F_FAST_TF32"}
_FLOAT = ("f16", "bf16", "f32", "f64")


class Declined:
    """cuBLASLt cannot compute this dot_general; ``reason`` says why. Falsy."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"Declined({self.reason!r})"


@dataclass
class GemmPlan:
    """A dot_general as one cuBLASLt matmul: ``params``, the runtime's record of it."""

    params: MatmulParams

    @property
    def swapped(self) -> bool:
        return self.params.swapped

    def library_call(self, lhs: BufRef, rhs: BufRef, out: BufRef, c: Optional[BufRef] = None,
                     bias: Optional[BufRef] = None, what: str = "") -> LibraryCall:
        p = self.params
        if (p.c is not None) != (c is not None) or ("bias" in p.inputs) != (bias is not None):
            raise ValueError(f"the plan takes inputs {list(p.inputs)}; got c={c}, bias={bias}")
        a, b = (rhs, lhs) if p.swapped else (lhs, rhs)
        refs = [a, b] + ([c] if c is not None else []) + ([bias] if bias is not None else []) + [out]
        return LibraryCall("cublaslt", "matmul", refs, [False] * (len(refs) - 1) + [True], p.to_json(), what)


def strides_of(t: TensorType) -> Tuple[int, ...]:
    """Element strides of each logical dimension of a dense array in ``t``'s layout."""
    strides = [0] * t.rank
    step = 1
    for d in t.minor_to_major:
        strides[d] = step
        step *= t.shape[d]
    return tuple(strides)


def _collapse(sizes: Sequence[int], strides: Sequence[Sequence[int]]):
    """One (size, [stride per operand]) for a group of dimensions (``strides[k][j]``: operand
    k's stride of dimension j), or None when they are not contiguous in the same order in
    every operand. Size-1 dimensions are dropped; the order is operand 0's (outermost first)."""
    keep = [j for j, s in enumerate(sizes) if s != 1]
    nops = len(strides)
    if not keep:
        return 1, [0] * nops
    keep.sort(key=lambda j: -strides[0][j])
    total = 1
    for j in keep:
        total *= sizes[j]
    for k in range(nops):
        for x, y in zip(keep, keep[1:]):
            if strides[k][x] != strides[k][y] * sizes[y]:
                return None
    return total, [strides[k][keep[-1]] for k in range(nops)]


def _matrix(rows: int, cols: int, s_rows: int, s_cols: int):
    """How cuBLASLt reads an operand whose op(X) is rows x cols with these element strides:
    ``(trans, stored_rows, stored_cols, ld)``, or None when neither dimension is unit-stride."""
    if (s_rows == 1 or rows == 1) and (cols == 1 or s_cols >= rows):
        return False, rows, cols, (s_cols if cols > 1 else rows)
    if (s_cols == 1 or cols == 1) and (rows == 1 or s_rows >= cols):
        return True, cols, rows, (s_rows if rows > 1 else cols)
    return None


def plan_dot(lhs: TensorType, rhs: TensorType, out: TensorType, dims: Mapping[str, Sequence[int]], *,
             precision: Optional[str] = None, epilogue: str = "DEFAULT", bias: Optional[TensorType] = None,
             bias_dim: Optional[int] = None, c: Optional[TensorType] = None, alpha: float = 1.0,
             beta: float = 0.0):
    """A ``GemmPlan`` for ``out = dot_general(lhs, rhs)`` (+ epilogue), or ``Declined``.

    ``bias``: a rank-1 vector added along result dimension ``bias_dim`` (BIAS epilogues).
    ``c``: an operand of the result's type and layout, scaled by ``beta`` and added.
    ``precision``: None / "default" / "highest" (full f32) or "tf32" (f32 through tf32 tensor cores):
    the compile's ``Options.matmul_precision`` (``hlo.config.update("matmul_precision", ...)`` /
    ``HLO_MATMUL_PRECISION``, which ``compile_options`` puts into every cuda compile's options)."""
    lb = tuple(dims.get("lhs_batching_dimensions", ()))
    rb = tuple(dims.get("rhs_batching_dimensions", ()))
    lc = tuple(dims.get("lhs_contracting_dimensions", ()))
    rc = tuple(dims.get("rhs_contracting_dimensions", ()))
    if epilogue not in EPILOGUES:
        raise ValueError(f"unknown cuBLASLt epilogue {epilogue!r} (expected one of {', '.join(EPILOGUES)})")
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r} (expected 'default', 'highest' or 'tf32')")
    dt, ot = lhs.dtype.name, out.dtype.name
    if rhs.dtype.name != dt:
        return Declined(f"operands of different element types ({dt}, {rhs.dtype.name})")
    if dt not in _FLOAT:
        return Declined(f"cuBLASLt has no {dt} matrix product here (only {', '.join(_FLOAT)})")
    if not (ot == dt or (dt in ("f16", "bf16") and ot == "f32")):
        return Declined(f"a {dt} product with a {ot} result")
    compute = PRECISIONS[precision]
    if compute != "32F" and dt != "f32":
        compute = "32F"  # tf32 only concerns f32 data
    if dt == "f64":
        compute = "64F"
    if any(d == 0 for d in lhs.shape + rhs.shape):
        return Declined("an empty dimension")
    lf = [d for d in range(lhs.rank) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.rank) if d not in rb and d not in rc]
    nb = len(lb)
    want = tuple([lhs.shape[d] for d in lb] + [lhs.shape[d] for d in lf] + [rhs.shape[d] for d in rf])
    if out.shape != want:
        raise ValueError(f"dot_general result shape {out.shape} is not {want}")
    ls, rs, os_ = strides_of(lhs), strides_of(rhs), strides_of(out)
    od_m = list(range(nb, nb + len(lf)))
    od_n = list(range(nb + len(lf), out.rank))
    grp_b = _collapse([lhs.shape[d] for d in lb], [[ls[d] for d in lb], [rs[d] for d in rb],
                                                   [os_[d] for d in range(nb)]])
    grp_m = _collapse([lhs.shape[d] for d in lf], [[ls[d] for d in lf], [os_[d] for d in od_m]])
    grp_n = _collapse([rhs.shape[d] for d in rf], [[rs[d] for d in rf], [os_[d] for d in od_n]])
    grp_k = _collapse([lhs.shape[d] for d in lc], [[ls[d] for d in lc], [rs[d] for d in rc]])
    for g, name in ((grp_b, "batch"), (grp_m, "lhs free"), (grp_n, "rhs free"), (grp_k, "contracting")):
        if g is None:
            return Declined(f"the {name} dimensions are not contiguous in the same order in every "
                            "operand (cuBLASLt takes one stride per matrix dimension)")
    B, (lbs, rbs, obs) = grp_b
    M, (lms, oms) = grp_m
    N, (rns, ons) = grp_n
    K, (lks, rks) = grp_k
    # The result as cuBLASLt's column-major D: rows M (not swapped) or N (swapped).
    d_plain = (oms == 1 or M == 1) and (N == 1 or ons >= M)
    d_swap = (ons == 1 or N == 1) and (M == 1 or oms >= N)
    if not (d_plain or d_swap):
        return Declined(f"the result {out} has no unit-stride matrix dimension")
    swapped = d_swap and (ons == 1 or not d_plain)
    if swapped:
        m, n = N, M
        d_ld = oms if M > 1 else N
        A = _matrix(N, K, rns, rks)   # rhs^T: N x K
        Bm = _matrix(K, M, lks, lms)  # lhs^T: K x M
        a_t, b_t, a_bs, b_bs = rhs, lhs, rbs, lbs
    else:
        m, n = M, N
        d_ld = ons if N > 1 else M
        A = _matrix(M, K, lms, lks)
        Bm = _matrix(K, N, rks, rns)
        a_t, b_t, a_bs, b_bs = lhs, rhs, lbs, rbs
    for mat, t, name in ((A, a_t, "A"), (Bm, b_t, "B")):
        if mat is None:
            return Declined(f"operand {t} (cuBLASLt's {name}) has no unit-stride matrix dimension "
                            "(a non-unit-stride contraction cuBLASLt cannot express)")
    bs = (lambda s: s if B > 1 else 0)
    d_mat = Matrix(ot, m, n, d_ld, bs(obs))
    c_mat, bias_dtype = None, None
    inputs: List[str] = ["a", "b"]
    if c is not None:
        if c.shape != out.shape or c.dtype != out.dtype or strides_of(c) != os_:
            return Declined(f"the C operand {c} differs from the result {out} in type or layout")
        c_mat = d_mat
        inputs.append("c")
    if epilogue in BIAS_EPILOGUES:
        if bias is None or bias_dim is None:
            raise ValueError(f"epilogue {epilogue} needs a bias vector and the result dimension it runs along")
        if bias.rank != 1 or bias.shape[0] != out.shape[bias_dim]:
            raise ValueError(f"bias {bias} does not run along result dimension {bias_dim} of {out}")
        if bias.dtype != out.dtype:
            return Declined(f"a {bias.dtype} bias for a {ot} result")
        rows_dims = od_n if swapped else od_m
        if [d for d in rows_dims if out.shape[d] != 1] != [bias_dim] and not (m == 1 and out.shape[bias_dim] == 1):
            return Declined(f"the bias runs along result dimension {bias_dim}, but cuBLASLt adds it "
                            f"along the result's {'rhs' if swapped else 'lhs'} free dimensions {rows_dims}")
        bias_dtype = ot
        inputs.append("bias")
    elif bias is not None:
        raise ValueError(f"a bias vector with epilogue {epilogue}")
    return GemmPlan(MatmulParams(
        m=m, n=n, k=K, batch=B, trans_a=A[0], trans_b=Bm[0],
        a=Matrix(dt, A[1], A[2], A[3], bs(a_bs)), b=Matrix(dt, Bm[1], Bm[2], Bm[3], bs(b_bs)), d=d_mat,
        compute=compute, scale="f64" if dt == "f64" else "f32", alpha=float(alpha), beta=float(beta),
        epilogue=epilogue, swapped=swapped, c=c_mat, bias_dtype=bias_dtype, inputs=tuple(inputs)))
