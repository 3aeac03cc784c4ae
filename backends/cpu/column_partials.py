"""The partial sums of a split float sum whose kept dimensions are all physically inner to its
reduced ones (``kernels._emit_split_sum``): batch norm's statistics and their gradients, sums of
x[N, H, W, C] over N, H and W into C values.

The general partial-sum kernel visits one output at a time and walks the reduced elements of it
down their stride (C floats apart): a scalar loop, and one pass over the chunk per output. For
x[8,28,28,64] that took 2 ms a sum (5 ns an element, the fused cone recomputed per element
scalar), seven sums in the conv + batch norm training block. Here a chunk is read once in
memory order: for each reduced index (the rows), the kept elements (a row of ``osize``) are
added into a row of block accumulators, vectorized along the row; every ``SUM_BLOCK`` rows the
block row is added into a row of f64 totals (each output's sum is still blocks of at most
``SUM_BLOCK`` values in f32, totals in f64, as the other kernels sum). Both rows live on the
stack, so an output row of at most ``MAX_ROW`` values.
"""
from __future__ import annotations

from typing import Optional

import llvmlite.ir as ir

from hlo.runtime.steps import BufRef, KernelCall

from .. import llvm_util as U
from ..elemental import SUM_BLOCK, blocked_loops, float_sum_types
from ..kernel_emitter import physical_order
from ..llvm_util import for_range, i64

MAX_ROW = 4096   # outputs: the two stack rows take at most 48 KiB


def applies(op) -> bool:
    """Whether ``op`` (a reduce the split sum takes) keeps only dimensions inner to every reduced
    one, with at most ``MAX_ROW`` outputs."""
    in_t = op.operands[0].type
    dims = set(op.attrs["dimensions"])
    order = physical_order(in_t)
    kept = [d for d in order if d not in dims]
    if not kept or float_sum_types(op) is None:
        return False
    first_kept = order.index(kept[0])
    return all(d not in dims for d in order[first_kept:]) and op.results[0].type.size <= MAX_ROW


def emit_column_partials(cg, kb, em, op, part: BufRef, n0: int, chunk: int) -> None:
    """part[p, o] (f64) = the sum of chunk p (of the outermost reduced dimension, ``chunk`` of its
    ``n0`` indices) of output o's elements, into ``kb`` (a kernel over the chunks)."""
    b = kb.b
    inp = op.operands[0]
    in_t = inp.type
    blk_et, wide_et = float_sum_types(op)
    blk_ty, wide_ty = U.reg_type(blk_et), U.reg_type(wide_et)
    dims = set(op.attrs["dimensions"])
    order = physical_order(in_t)
    reduced = [d for d in order if d in dims]
    kept = [d for d in order if d not in dims]
    out_t = op.results[0].type
    osize = out_t.size
    blk_row = U.entry_alloca(b, ir.ArrayType(blk_ty, osize))
    wide_row = U.entry_alloca(b, ir.ArrayType(wide_ty, osize))
    full: list = [None] * in_t.rank

    def at(row, o, ty):
        return b.gep(row, [i64(0), o], inbounds=True)

    def fill(row, ty, value):
        with for_range(b, 0, osize, "o") as o:
            b.store(ir.Constant(ty, value), at(row, o, ty))

    def start_block():
        fill(blk_row, blk_ty, -0.0)

    def end_block():
        with for_range(b, 0, osize, "o") as o:
            t = b.load(at(blk_row, o, blk_ty), typ=blk_ty)
            t = b.fpext(t, wide_ty) if blk_ty != wide_ty else t
            w = at(wide_row, o, wide_ty)
            b.store(b.fadd(b.load(w, typ=wide_ty), t), w)

    def row(ivs):
        for d in reduced:
            full[d] = ivs[d]
        em.push()
        # the kept dimensions, in memory order: o runs along them
        rem: Optional[ir.Value] = None
        with for_range(b, 0, osize, "o") as o:
            em.push()
            rem = o
            for d in reversed(kept):
                n = in_t.shape[d]
                if d == kept[0]:
                    full[d] = rem
                else:
                    full[d] = b.urem(rem, i64(n))
                    rem = b.udiv(rem, i64(n))
            x = em.at(inp, tuple(full))
            x = b.fpext(x, blk_ty) if x.type != blk_ty else x
            p = at(blk_row, o, blk_ty)
            b.store(b.fadd(b.load(p, typ=blk_ty), x, flags=("reassoc",)), p)
            em.pop()
        em.pop()

    with for_range(b, kb.lo, kb.hi, "part") as p:
        em.push()
        lo = b.mul(p, i64(chunk))
        hi = b.add(lo, i64(chunk))
        hi = b.select(b.icmp_signed("<", hi, i64(n0)), hi, i64(n0))
        fill(wide_row, wide_ty, -0.0)
        levels = [(d, lo, hi, chunk) if k == 0 else (d, 0, in_t.shape[d], in_t.shape[d])
                  for k, d in enumerate(reduced)]
        blocked_loops(b, levels, SUM_BLOCK, start_block, end_block, row)
        # the output's row-major order is the kept dimensions' logical order
        logical = sorted(kept)
        with for_range(b, 0, osize, "o") as o:
            rem = o
            idx = {}
            for d in reversed(kept):
                n = in_t.shape[d]
                idx[d] = rem if d == kept[0] else b.urem(rem, i64(n))
                if d != kept[0]:
                    rem = b.udiv(rem, i64(n))
            lin = U.linear_offset(b, tuple(idx[d] for d in logical), U.strides_of(out_t.with_layout(None)))
            off = b.add(b.mul(p, i64(osize)), lin) if lin is not None else b.mul(p, i64(osize))
            U.store_reg(b, b.load(at(wide_row, o, wide_ty), typ=wide_ty),
                        U.elem_ptr(b, kb.ptr(part), wide_et, off), wide_et)
        em.pop()


def finish(kb, P: int, what: str) -> KernelCall:
    return kb.finish(P, True, f"{what} (partial sums over {P} chunks, by rows)")
