"""GPU kernels for sort and scatter, the ops whose result is not a function of one index.

* ``sort``: slices of at most ``RANK_SORT_MAX`` elements are sorted by rank: one thread per
  element counts the elements ordered before it (the comparator says ``a < b``, ties broken by
  position, so the result is stable) and writes every operand's element at that rank. Longer
  slices get one thread each running a stable bottom-up merge sort of an index permutation in
  arena scratch (two i64 buffers a slice), then a gather through the permutation.
* ``scatter``: results start as copies of the inputs (a loop kernel); then every update element
  is combined into its target, in the spec's order. When every indexed operand dimension has a
  window of one element, two window positions never meet the same target element, so threads
  take window positions and each walks the scatter indices in order; otherwise one thread does
  all of it (updates may collide; order matters).
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np
import llvmlite.ir as ir

from hlo.ir.core import Value
from hlo.runtime.steps import BufRef
from .. import llvm_util as U
from ..llvm_util import I1, I64, for_range, i64, clamp_i64
from .kernels import (BLOCK, GpuKernel, emit_loop_kernel, make_emitter, physical_index, row_major_index, store,
                      stride_range)

# Slices up to this long are sorted by rank (n^2 comparisons, all in parallel).
RANK_SORT_MAX = 4096


def lower_sort(lw, op, dests: Sequence[BufRef], env: Dict[Value, BufRef]) -> None:
    from hlo.backends.cpu.kernels import collect_reads
    cg = lw.cg
    t = op.operands[0].type
    if t.size == 0:
        return
    r = t.rank
    dim = op.attrs.get("dimension", -1)
    if dim < 0:
        dim += r
    n = t.shape[dim]
    others = [d for d in range(r) if d != dim]
    slices = t.size // n if n else 0
    reads, _ = collect_reads(list(op.operands), env)
    rank_sort = n <= RANK_SORT_MAX
    scratch = [] if rank_sort else [lw.scratch(8 * n * slices), lw.scratch(8 * n * slices)]
    refs = list(dests) + [env[v] for v in reads] + scratch
    kb = GpuKernel(cg, "sort", refs, [True] * len(dests) + [False] * len(reads) + [True] * len(scratch))
    em = make_emitter(kb, reads, env)
    b = kb.b
    others_t = U.TensorType(tuple(t.shape[d] for d in others), t.dtype) if others else None
    comparator = op.regions[0]

    def base_of(s):
        base = [None] * r
        if others:
            for k, d in zip(others, physical_index(b, s, others_t)):
                base[k] = d
        return base

    def at_pos(base, p):
        idx = list(base)
        idx[dim] = p
        return tuple(idx)

    def less(base, pa, pb):
        """comparator(a, b): element at pa ordered before the one at pb."""
        args = []
        for v in op.operands:
            args.append(em.at(v, at_pos(base, pa)))
            args.append(em.at(v, at_pos(base, pb)))
        return em.scalar_region(comparator, args)[0]

    start, step = kb.thread_range()
    if rank_sort:
        with stride_range(b, start, t.size, step, "e") as e:
            em.push()
            s = b.udiv(e, i64(n))
            i = b.urem(e, i64(n))
            base = base_of(s)
            cnt = U.entry_alloca(b, I64)
            b.store(i64(0), cnt)
            with for_range(b, 0, n, "j") as j:
                em.push()
                before = less(base, j, i)
                tie_first = b.and_(b.icmp_signed("<", j, i), b.not_(less(base, i, j)))
                add = b.zext(b.or_(before, tie_first), I64)
                b.store(b.add(b.load(cnt, typ=I64), add), cnt)
                em.pop()
            pos = b.load(cnt, typ=I64)
            for v, ref, res in zip(op.operands, dests, op.results):
                store(b, kb.ptr(ref), res.type, at_pos(base, pos), em.at(v, at_pos(base, i)))
            em.pop()
        lw.steps.append(kb.finish(cg.grid(t.size), BLOCK, f"sort {t} along {dim} (rank sort)"))
        return
    bufs = [kb.ptr(s_) for s_ in scratch]
    src_slot = U.entry_alloca(b, U.PTR)
    dst_slot = U.entry_alloca(b, U.PTR)
    width_slot = U.entry_alloca(b, I64)
    with stride_range(b, start, slices, step, "slice") as s:
        em.push()
        base = base_of(s)
        off = b.mul(s, i64(n))
        p0 = b.gep(bufs[0], [off], source_etype=I64)
        p1 = b.gep(bufs[1], [off], source_etype=I64)
        with for_range(b, 0, n, "init") as i:
            b.store(i, b.gep(p0, [i], source_etype=I64))
        b.store(p0, src_slot)
        b.store(p1, dst_slot)
        b.store(i64(1), width_slot)
        head = b.function.append_basic_block("msort.pass")
        body = b.function.append_basic_block("msort.body")
        done = b.function.append_basic_block("msort.done")
        b.branch(head)
        b.position_at_end(head)
        w = b.load(width_slot, typ=I64)
        b.cbranch(b.icmp_signed("<", w, i64(n)), body, done)
        b.position_at_end(body)
        src = b.load(src_slot, typ=U.PTR)
        dst = b.load(dst_slot, typ=U.PTR)
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
                pi = b.load(b.gep(src, [clamp_i64(b, i, 0, n - 1)], source_etype=I64), typ=I64)
                pj = b.load(b.gep(src, [clamp_i64(b, j, 0, n - 1)], source_etype=I64), typ=I64)
                right_less = less(base, pj, pi)
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
        perm = b.load(src_slot, typ=U.PTR)
        with for_range(b, 0, n, "gather") as i:
            em.push()
            p = b.load(b.gep(perm, [i], source_etype=I64), typ=I64)
            for v, ref, res in zip(op.operands, dests, op.results):
                store(b, kb.ptr(ref), res.type, at_pos(base, i), em.at(v, at_pos(base, p)))
            em.pop()
        em.pop()
    lw.steps.append(kb.finish(cg.grid(slices), BLOCK, f"sort {t} along {dim} (merge sort)"))


def lower_scatter(lw, op, dests: Sequence[BufRef], env: Dict[Value, BufRef]) -> None:
    from hlo.backends.cpu.kernels import collect_reads
    from ..kernel_emitter import Root
    cg = lw.cg
    nin = (len(op.operands) - 1) // 2
    inputs = op.operands[:nin]
    indices = op.operands[nin]
    updates = op.operands[nin + 1:]
    res_t = op.results[0].type
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
    reads, _ = collect_reads([indices] + list(updates), env)
    refs = list(dests) + [env[v] for v in reads]
    kb = GpuKernel(cg, "scatter", refs, [True] * nin + [False] * len(reads))
    em = make_emitter(kb, reads, env)
    b = kb.b
    scatter_dims = [d for d in range(u_t.rank) if d not in uwd]
    window_operand_dims = [d for d in range(res_t.rank) if d not in iwd and d not in ib]
    # window extent of each operand dim (1 for inserted and batching dims)
    wext = {od: u_t.shape[uwd[k]] for k, od in enumerate(window_operand_dims)}
    indexed = set(sdod) | set(ib)
    parallel = all(wext.get(d, 1) == 1 for d in indexed)
    w_t = U.TensorType(tuple(u_t.shape[d] for d in uwd), u_t.dtype)
    s_t = U.TensorType(tuple(u_t.shape[d] for d in scatter_dims), u_t.dtype)

    def update(widx, sidx):
        uidx = [None] * u_t.rank
        for k, d in enumerate(uwd):
            uidx[d] = widx[k]
        for k, d in enumerate(scatter_dims):
            uidx[d] = sidx[k]
        uidx = tuple(uidx)
        usi = list(sidx)
        full = [i64(0)] * res_t.rank
        for k, od in enumerate(sdod):
            si = list(usi)
            if ivd < indices.type.rank:
                si.insert(ivd, i64(k))
            s = em.at(indices, tuple(si))
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

    def serial_scatter(widx):
        with for_range(b, 0, s_t.size, "s") as s:
            em.push()
            update(widx, physical_index(b, s, s_t))
            em.pop()

    if parallel:
        start, step = kb.thread_range()
        with stride_range(b, start, w_t.size, step, "w") as w:
            em.push()
            serial_scatter(physical_index(b, w, w_t))
            em.pop()
        lw.steps.append(kb.finish(cg.grid(w_t.size), BLOCK,
                                  f"scatter {u_t} into {res_t} (a thread per window position)"))
        return
    with for_range(b, 0, u_t.size, "u") as e:  # the update space in row-major order
        em.push()
        uidx = row_major_index(b, e, u_t.shape)
        update(tuple(uidx[d] for d in uwd), tuple(uidx[d] for d in scatter_dims))
        em.pop()
    lw.steps.append(kb.finish(1, 1, f"scatter {u_t} into {res_t} (one thread: windows may overlap)"))
