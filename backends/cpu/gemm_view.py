"""Strided views: reading a dot_general operand (or writing its result) in place.

A GEMM (BLAS ``?gemm``) reads a matrix from any base pointer with one stride per row (the
leading dimension) and contiguous columns, or the transpose. A batched product adds one stride
per batch dimension. Many dot operands are such views of a buffer that already exists: the
buffer itself in a permuted layout, or a chain of reshapes, transposes and slices of it inside
a fusion (attention's ``[B,S,H*D] -> [B,H,S,D]`` head split is one; a slice of a weight's rows
or columns is another: a window of the buffer, at an offset). ``element_strides`` follows
those chains to the buffer and gives the element stride of each of the value's dimensions, so
the product reads the bytes where they are instead of copying them into canonical form first.
``MatrixView`` then groups those strides into the (batch, row, column) shape of one operand.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from hlo.ir.core import Value
from hlo.runtime.steps import BufRef

from ..llvm_util import i64, strides_of

_VIEW_OPS = ("reshape", "transpose", "slice")


def element_strides(v: Value, env: Dict[Value, BufRef]) -> Optional[Tuple[Value, int, List[int]]]:
    """(buffered value, element offset, element stride of each dimension of ``v``) when ``v``
    reads a buffer in ``env`` at an affine index (a chain of reshapes, transposes and slices of
    it); None otherwise."""
    if v in env:
        return v, 0, strides_of(v.type)
    op = v.op
    if op is None or op.name not in _VIEW_OPS or len(op.operands) != 1:
        return None
    x = op.operands[0]
    if x.dtype != v.dtype:
        return None
    inner = element_strides(x, env)
    if inner is None:
        return None
    base, off, s = inner
    if op.name == "transpose":
        perm = op.attrs["permutation"]
        return base, off, [s[p] for p in perm]
    if op.name == "slice":   # a window of x, every step-th element: start offset, strides x step
        start = op.attrs["start_indices"]
        step = op.attrs.get("strides") or (1,) * len(start)
        return base, off + sum(i * st for i, st in zip(start, s)), [st * k for st, k in zip(s, step)]
    r = _reshape_strides(list(x.shape), s, list(v.shape))
    return None if r is None else (base, off, r)


def _reshape_strides(shape: List[int], strides: List[int], new: List[int]) -> Optional[List[int]]:
    """Strides of ``new`` viewing the same elements as (shape, strides) in row-major index order,
    or None when some group of merged dimensions is not evenly strided (numpy's no-copy rule)."""
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    out = [0] * len(new)
    nz = [i for i, n in enumerate(new) if n != 1]
    i = j = 0
    while i < len(old) and j < len(nz):
        # smallest groups old[i:i2], new[j:j2] with equal products
        i2, j2 = i + 1, j + 1
        po, pn = old[i][0], new[nz[j]]
        while po != pn:
            if po < pn:
                po *= old[i2][0]
                i2 += 1
            else:
                pn *= new[nz[j2]]
                j2 += 1
        for k in range(i, i2 - 1):  # the old group must be one evenly strided run
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return None
        st = old[i2 - 1][1]
        for k in range(j2 - 1, j - 1, -1):
            out[nz[k]] = st
            st *= new[nz[k]]
        i, j = i2, j2
    if i != len(old) or j != len(nz):
        return None
    return out


def merge_group(sizes: Sequence[int], strides: Sequence[int]) -> Optional[Tuple[int, Optional[int]]]:
    """(size, stride) of dimensions flattened in row-major order, or None if they are not one
    evenly strided run. The stride is None when the size is 1 (any stride will do)."""
    kept = [(n, s) for n, s in zip(sizes, strides) if n != 1]
    size = 1
    for n in sizes:
        size *= n
    if not kept:
        return size, None
    for (n0, s0), (n1, s1) in zip(kept, kept[1:]):
        if s0 != s1 * n1:
            return None
    return size, kept[-1][1]


@dataclass
class MatrixView:
    """One GEMM operand in memory: ``batch`` is (size, stride) per batch dimension (row-major
    order of the batch index), then a rows x cols matrix with element strides ``rs``, ``cs``
    (None: that dimension has size 1)."""

    ref: BufRef
    batch: List[Tuple[int, int]]
    rows: int
    cols: int
    rs: Optional[int]
    cs: Optional[int]

    def blas_form(self) -> Optional[Tuple[bool, int]]:
        """(transposed, leading dimension) for a row-major BLAS call, or None: either the
        columns are contiguous (lda = row stride) or the rows are (transposed, lda = column
        stride), with lda at least the contiguous dimension's size."""
        rs, cs = self.rs, self.cs
        if cs in (1, None) and (rs is None or rs >= max(1, self.cols)):
            return False, max(1, self.cols) if rs is None else rs
        if rs in (1, None) and (cs is None or cs >= max(1, self.rows)):
            return True, max(1, self.rows) if cs is None else cs
        return None

    def transposed(self) -> "MatrixView":
        return MatrixView(self.ref, self.batch, self.cols, self.rows, self.cs, self.rs)


def matrix_view(v: Value, env: Dict[Value, BufRef], batch_dims, row_dims, col_dims) -> Optional[MatrixView]:
    """``v`` as a batched matrix (dimension groups given) read in place, or None."""
    r = element_strides(v, env)
    if r is None:
        return None
    base, off, s = r
    rows = merge_group([v.shape[d] for d in row_dims], [s[d] for d in row_dims])
    cols = merge_group([v.shape[d] for d in col_dims], [s[d] for d in col_dims])
    if rows is None or cols is None:
        return None
    batch = [(v.shape[d], s[d]) for d in batch_dims if v.shape[d] != 1]
    ref = env[base]
    if off or any(n == 0 for n in v.shape):
        # a window of the buffer: the bytes from its first element to its last
        item = v.dtype.itemsize
        span = 0 if any(n == 0 for n in v.shape) else \
            (sum((n - 1) * st for n, st in zip(v.shape, s)) + 1) * item
        ref = BufRef(ref.kind, ref.index, ref.offset + off * item, span)
    return MatrixView(ref, batch, rows[0], cols[0], rows[1], cols[1])


def canonical_view(ref: BufRef, batch: Sequence[int], R: int, C: int) -> MatrixView:
    """A contiguous row-major [*batch, R, C] buffer."""
    dims, st = [], R * C
    for n in reversed(list(batch)):
        if n != 1:
            dims.append((n, st))
        st *= n
    return MatrixView(ref, list(reversed(dims)), R, C, C if R != 1 else None, 1 if C != 1 else None)


def batch_offsets(b, bi, batch_dims: List[Tuple[int, int, int, int]]):
    """Element offsets (A, B, C) of linear batch index ``bi``: batch_dims lists (size, A stride,
    B stride, C stride) per batch dimension, major first."""
    offs = [i64(0), i64(0), i64(0)]
    rem = bi
    for k in range(len(batch_dims) - 1, -1, -1):
        n, *st = batch_dims[k]
        if k == 0:
            digit = rem
        else:
            digit = b.urem(rem, i64(n))
            rem = b.udiv(rem, i64(n))
        offs = [o if s == 0 else b.add(o, b.mul(digit, i64(s))) for o, s in zip(offs, st)]
    return offs


def block_item(b, t, per_batch: int, nblocks: int, MB: int, NB: int, M: int, N: int,
               batch_dims: List[Tuple[int, int, int, int]]):
    """Where work item ``t`` of a blocked product lies: its linear batch index, the element
    offsets (A, B, C) of that batch, its first row and column, and its row and column counts (clipped at M and N). Items
    run batch-major, then row blocks, then column blocks of ``nblocks`` per row of blocks."""
    clip = lambda start, size, total: b.select(b.icmp_signed("<", b.sub(i64(total), start), i64(size)),
                                               b.sub(i64(total), start), i64(size))
    bi = b.udiv(t, i64(per_batch))
    r = b.urem(t, i64(per_batch))
    m0 = b.mul(b.udiv(r, i64(nblocks)), i64(MB))
    n0 = b.mul(b.urem(r, i64(nblocks)), i64(NB))
    oa, ob, oc = batch_offsets(b, bi, batch_dims)
    return bi, oa, ob, oc, m0, n0, clip(m0, MB, M), clip(n0, NB, N)
