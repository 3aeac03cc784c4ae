"""Kernels for sort and scatter: the ops whose result is not a function of one index.

* ``sort``: every slice along the sort dimension is sorted by a stable bottom-up merge sort of
  an index permutation (heap-allocated per call, so slices of any length work), ordered by the
  comparator region; then every operand is gathered through the permutation. Slices are the
  parallel range.
* ``scatter``: results start as copies of the inputs; then, in order, every update element's
  target index is computed per the StableHLO spec and, if it is inside the result, combined
  with the update region. Runs on one thread (updates may collide; order matters).
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np
import llvmlite.ir as ir

from hlo.ir.core import Value
from .. import llvm_util as U
from ..llvm_util import I1, I64, PTR, for_range, i64, clamp_i64
from .kernels import (Codegen, KernelBuilder, Root, collect_reads, emit_loop_kernel,
                      make_emitter, PARALLEL_MIN_WORK, _store)
from .program import BufRef


def lower_sort(lw, op, dests: Sequence[BufRef], env: Dict[Value, BufRef]) -> None:
    cg: Codegen = lw.cg
    t = op.operands[0].type
    if t.size == 0:
        return
    r = t.rank
    dim = op.attrs.get("dimension", -1)
    if dim < 0:
        dim += r
    n = t.shape[dim]
    others = [d for d in range(r) if d != dim]
    slices = int(np.prod([t.shape[d] for d in others])) if others else 1
    reads, nops = collect_reads(list(op.operands), env)
    refs = list(dests) + [env[v] for v in reads]
    kb = KernelBuilder(cg, "sort", refs, [True] * len(dests) + [False] * len(reads))
    em = make_emitter(kb, reads, env)
    b = kb.b
    malloc = cg.ctx.declare("malloc", PTR, [I64])
    free = cg.ctx.declare("free", U.VOID, [PTR])
    bufs = [b.call(malloc, [i64(max(8, 8 * n))]), b.call(malloc, [i64(max(8, 8 * n))])]
    src_slot = U.entry_alloca(b, PTR)
    dst_slot = U.entry_alloca(b, PTR)
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

        with for_range(b, 0, n, "init") as i:
            b.store(i, b.gep(bufs[0], [i], source_etype=I64))
        b.store(bufs[0], src_slot)
        b.store(bufs[1], dst_slot)
        width_slot = U.entry_alloca(b, I64)
        b.store(i64(1), width_slot)
        head = b.function.append_basic_block("msort.pass")
        body = b.function.append_basic_block("msort.body")
        done = b.function.append_basic_block("msort.done")
        b.branch(head)
        b.position_at_end(head)
        w = b.load(width_slot, typ=I64)
        b.cbranch(b.icmp_signed("<", w, i64(n)), body, done)
        b.position_at_end(body)
        src = b.load(src_slot, typ=PTR)
        dst = b.load(dst_slot, typ=PTR)
        two_w = b.mul(w, i64(2))
        nruns = b.sdiv(b.add(i64(n), b.sub(two_w, i64(1))), two_w)
        with for_range(b, 0, nruns, "run") as run:
            lo = b.mul(run, two_w)
            mid = b.add(lo, w)
            mid = b.select(b.icmp_signed("<", mid, i64(n)), mid, i64(n))
            hi = b.add(lo, two_w)
            hi = b.select(b.icmp_signed("<", hi, i64(n)), hi, i64(n))
            islot = U.entry_alloca(b, I64)
            jslot = U.entry_alloca(b, I64)
            b.store(lo, islot)
            b.store(mid, jslot)
            with for_range(b, lo, hi, "merge") as k:
                em.push()
                i = b.load(islot, typ=I64)
                j = b.load(jslot, typ=I64)
                have_i = b.icmp_signed("<", i, mid)
                have_j = b.icmp_signed("<", j, hi)
                ic = clamp_i64(b, i, 0, n - 1)
                jc = clamp_i64(b, j, 0, n - 1)
                pi = b.load(b.gep(src, [ic], source_etype=I64), typ=I64)
                pj = b.load(b.gep(src, [jc], source_etype=I64), typ=I64)
                args = []
                for v in op.operands:
                    args.append(em.at(v, at_pos(pj)))
                    args.append(em.at(v, at_pos(pi)))
                right_less = em.scalar_region(op.regions[0], args)[0]
                take_j = b.select(b.and_(have_i, have_j), right_less, b.not_(have_i))
                b.store(b.select(take_j, pj, pi), b.gep(dst, [k], source_etype=I64))
                b.store(b.select(take_j, i, b.add(i, i64(1))), islot)
                b.store(b.select(take_j, b.add(j, i64(1)), j), jslot)
                em.pop()
        b.store(dst, src_slot)
        b.store(src, dst_slot)
        b.store(two_w, width_slot)
        b.branch(head)
        b.position_at_end(done)
        perm = b.load(src_slot, typ=PTR)
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
    nin = (len(op.operands) - 1) // 2
    inputs = op.operands[:nin]
    indices = op.operands[nin]
    updates = op.operands[nin + 1:]
    res_t = op.results[0].type
    # 1. results = inputs
    if res_t.size:
        roots = [Root(v, d, r.type) for v, d, r in zip(inputs, dests, op.results)]
        lw.steps.append(emit_loop_kernel(cg, roots, env, name="scatter_init", what="scatter: copy inputs"))
    u_t = updates[0].type
    if u_t.size == 0 or res_t.size == 0:
        return
    a = op.attrs
    uwd = list(a.get("update_window_dims", ()))
    iwd = list(a.get("inserted_window_dims", ()))
    ib = list(a.get("input_batching_dims", ()))
    sib = list(a.get("scatter_indices_batching_dims", ()))
    sdod = list(a["scatter_dims_to_operand_dims"])
    ivd = a["index_vector_dim"]
    reads, nops = collect_reads([indices] + list(updates), env)
    refs = list(dests) + [env[v] for v in reads]
    kb = KernelBuilder(cg, "scatter", refs, [True] * nin + [False] * len(reads))
    em = make_emitter(kb, reads, env)
    b = kb.b
    urank = u_t.rank
    scatter_dims = [d for d in range(urank) if d not in uwd]
    window_operand_dims = [d for d in range(res_t.rank) if d not in iwd and d not in ib]
    ivs: List = []

    def body():
        uidx = tuple(ivs)
        usi = [uidx[d] for d in scatter_dims]
        full = [i64(0)] * res_t.rank
        for k, od in enumerate(sdod):
            sidx = list(usi)
            if ivd < indices.type.rank:
                sidx.insert(ivd, i64(k))
            s = em.at(indices, tuple(sidx))
            if s.type.width < 64:
                s = b.sext(s, I64) if indices.dtype.is_signed else b.zext(s, I64)
            full[od] = b.add(full[od], s)
        for odim, sdim in zip(ib, sib):
            pos = sdim if sdim < ivd else sdim - 1
            full[odim] = b.add(full[odim], usi[pos])
        for k, od in enumerate(window_operand_dims):
            full[od] = b.add(full[od], uidx[uwd[k]])
        inb = ir.Constant(I1, 1)
        for d in range(res_t.rank):
            inb = b.and_(inb, b.icmp_signed(">=", full[d], i64(0)))
            inb = b.and_(inb, b.icmp_signed("<", full[d], i64(res_t.shape[d])))
        with b.if_then(inb):
            em.push()
            ptrs, cur = [], []
            for d_ref, r in zip(dests, op.results):
                off = U.linear_offset(b, full, U.strides_of(r.type))
                p = U.elem_ptr(b, kb.ptr(d_ref), r.dtype, off)
                ptrs.append(p)
                cur.append(U.load_reg(b, p, r.dtype))
            ups = [em.at(u, uidx) for u in updates]
            new = em.scalar_region(op.regions[0], cur + ups)
            for p, v, r in zip(ptrs, new, op.results):
                U.store_reg(b, v, p, r.dtype)
            em.pop()

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
