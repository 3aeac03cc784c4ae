"""A loop kernel whose one root is a concatenate along a dimension other than the innermost
(physically): each row of the kernel's loop nest (its outer indices fixed) lies in one operand,
so the row branches once to that operand's own inner loop. Evaluated per element
(``elemental._op_concatenate``), every element computes every operand's value and selects one:
a convolution's im2col (``passes/conv_gemm.py``: 9 strided slices of the padded image stacked
along the tap dimension) cost 9 loads, 9 selects and 9 padding tests an element, 22.6 ms of a
3x3/2 convolution x[8,56,56,64] * w[3,3,64,128] whose product took 7.6.

``concat_root(roots)`` says whether a kernel qualifies; ``emit_concat_rows`` emits its loops in
place of ``kernels.emit_nest``'s, split over the threads by rows as that is.
"""
from __future__ import annotations

from typing import Optional, Sequence

from hlo.ir.core import Operation

from .. import llvm_util as U
from ..kernel_emitter import Root, physical_order
from ..llvm_util import for_range, i64
from ..scalar_ops import convert


def concat_root(roots: Sequence[Root]) -> Optional[Operation]:
    """The concatenate a kernel's one root is, where its rows each lie in one operand: the root
    is written at its own index, has rank 2 or more, and its concatenated dimension is not the
    destination's innermost; else None."""
    if len(roots) != 1:
        return None
    r = roots[0]
    op = r.value.op
    if r.index_fn is not None or op is None or op.name != "concatenate":
        return None
    t = r.dest_type
    if t.rank < 2 or list(t.shape) != list(r.value.type.shape):
        return None
    if physical_order(t)[-1] == op.attrs["dimension"]:
        return None
    return op


def emit_concat_rows(kb, em, root: Root, op: Operation, interleave: Optional[int], tag=None) -> None:
    """The loops of a kernel computing ``root`` (a concatenate ``op`` that ``concat_root``
    accepted): per row, a branch to the operand holding it, then that operand's inner loop."""
    b = kb.b
    t = root.dest_type
    if t.size == 0:
        return
    d = op.attrs["dimension"]
    order = physical_order(t)
    outer, inner = order[:-1], order[-1]
    parts = []
    off = 0
    for v in op.operands:
        n = v.type.shape[d]
        if n > 0:
            parts.append((v, off, n))
        off += n
    with for_range(b, kb.lo, kb.hi, "row") as f:
        em.push()
        idx = [None] * t.rank
        rem = f
        for dd in reversed(outer):
            if dd == outer[0]:
                idx[dd] = rem
            else:
                idx[dd] = b.urem(rem, i64(t.shape[dd]))
                rem = b.udiv(rem, i64(t.shape[dd]))
        end = b.append_basic_block("cat.end")
        for k, (v, start, n) in enumerate(parts):
            nxt = None
            if k < len(parts) - 1:
                here = b.append_basic_block(f"cat.{k}")
                nxt = b.append_basic_block(f"cat.{k}.next")
                b.cbranch(b.icmp_signed("<", idx[d], i64(start + n)), here, nxt)
                b.position_at_end(here)
            local = list(idx)
            if start:
                local[d] = b.sub(idx[d], i64(start))
            with for_range(b, i64(0), i64(t.shape[inner]), "i", interleave=interleave) as i:
                em.push()
                local[inner] = i
                full = list(idx)
                full[inner] = i
                val = em.at(v, tuple(local))
                if t.dtype != v.dtype:
                    val = convert(kb.cg.ctx, b, val, v.dtype, t.dtype)
                off = U.linear_offset(b, tuple(full), U.strides_of(t))
                st = U.store_reg(b, val, U.elem_ptr(b, kb.ptr(root.dest), t.dtype, off), t.dtype)
                if tag is not None:
                    st.set_metadata("tbaa", tag)
                em.pop()
            b.branch(end)
            if nxt is not None:
                b.position_at_end(nxt)
        b.position_at_end(end)
        em.pop()
