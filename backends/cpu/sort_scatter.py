"""Kernels for sort and scatter: the ops whose result is not a function of one index.

* ``sort``: every slice along the sort dimension is sorted by a stable bottom-up merge sort of
  an index permutation (heap-allocated per call, so slices of any length work), ordered by the
  comparator region; then every operand is gathered through the permutation. Slices are the
  parallel range.
* ``scatter``: results start as copies of the inputs; then, in order, every update element's
  target index is computed per the StableHLO spec and, if it is inside the result, combined
  with the update region. Runs on one thread (updates may collide; order matters). The merge
  sort and the update element are the shared IR of ``backends/sort_scatter.py``.
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np

from hlo.ir.core import Value
from hlo.runtime.steps import BufRef

from .. import llvm_util as U
from ..llvm_util import I64, PTR, for_range, i64
from ..sort_scatter import merge_sort, scatter_copy_inputs, scatter_update, sort_shape
from .kernels import PARALLEL_MIN_WORK, Codegen, KernelBuilder, _store, collect_reads, make_emitter


def lower_sort(lw, op, dests: Sequence[BufRef], env: Dict[Value, BufRef]) -> None:
    cg: Codegen = lw.cg
    t = op.operands[0].type
    if t.size == 0:
        return
    r = t.rank
    dim, n, others, slices = sort_shape(op)
    reads, nops = collect_reads(list(op.operands), env)
    refs = list(dests) + [env[v] for v in reads]
    kb = KernelBuilder(cg, "sort", refs, [True] * len(dests) + [False] * len(reads))
    em = make_emitter(kb, reads, env)
    b = kb.b
    malloc = cg.ctx.declare("malloc", PTR, [I64])
    free = cg.ctx.declare("free", U.VOID, [PTR])
    bufs = [b.call(malloc, [i64(max(8, 8 * n))]), b.call(malloc, [i64(max(8, 8 * n))])]
    with for_range(b, kb.lo, kb.hi, "slice") as s:
        em.push()
        base = [None] * r
        rem = s
        for d in reversed(others):
            if d == others[0]:
                base[d] = rem
            else:
                base[d] = b.urem(rem, i64(t.shape[d]))
                rem = b.udiv(rem, i64(t.shape[d]))

        def at_pos(p):
            idx = list(base)
            idx[dim] = p
            return tuple(idx)

        def less(pa, pb):  # comparator(element at pa, element at pb)
            args = []
            for v in op.operands:
                args.append(em.at(v, at_pos(pa)))
                args.append(em.at(v, at_pos(pb)))
            return em.scalar_region(op.regions[0], args)[0]

        perm = merge_sort(b, em, n, bufs[0], bufs[1], less)
        with for_range(b, 0, n, "gather") as i:
            em.push()
            p = b.load(b.gep(perm, [i], source_etype=I64), typ=I64)
            for v, ref, res in zip(op.operands, dests, op.results):
                _store(b, em, kb.ptr(ref), res.type, at_pos(i), em.at(v, at_pos(p)))
            em.pop()
        em.pop()
    b.call(free, [bufs[0]])
    b.call(free, [bufs[1]])
    work = t.size * max(1, int(np.log2(max(n, 2)))) * max(1, nops)
    lw.steps.append(kb.finish(slices, work >= PARALLEL_MIN_WORK, f"sort {t} along {dim}"))


def lower_scatter(lw, op, dests: Sequence[BufRef], env: Dict[Value, BufRef]) -> None:
    cg: Codegen = lw.cg
    if not scatter_copy_inputs(lw, op, dests, env):
        return
    nin = (len(op.operands) - 1) // 2
    indices = op.operands[nin]
    updates = op.operands[nin + 1:]
    res_t, u_t = op.results[0].type, updates[0].type
    reads, nops = collect_reads([indices] + list(updates), env)
    refs = list(dests) + [env[v] for v in reads]
    kb = KernelBuilder(cg, "scatter", refs, [True] * nin + [False] * len(reads))
    em = make_emitter(kb, reads, env)
    b = kb.b
    urank = u_t.rank
    ivs: List = []

    def body():
        scatter_update(b, em, op, [kb.ptr(d) for d in dests], tuple(ivs))

    def rec(d):
        if d == urank:
            body()
            return
        with for_range(b, 0, u_t.shape[d], f"u{d}") as i:
            em.push()
            ivs.append(i)
            rec(d + 1)
            ivs.pop()
            em.pop()

    # One parallel item covering the whole update space (serial).
    with for_range(b, kb.lo, kb.hi, "once"):
        rec(0)
    lw.steps.append(kb.finish(1, False, f"scatter {u_t} into {res_t}"))
