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
  all of it (updates may collide; order matters). Before either: where the scatter adds its
  updates (one result of f32, f64 or 32/64-bit ints: ``scatter_atomic_add``) at more than one
  index, every update element is a thread that adds it with an atomic, in one pass
  (max-pooling's gradient, which the StableHLO importer makes a scatter-add of one element per
  window, walked by one thread before; an embedding's gradient, by a thread per column). Float
  sums then round in the order the threads land, as XLA's GPU scatter-add does.
"""
from __future__ import annotations

from typing import Dict, Sequence

from hlo.ir.core import Value
from hlo.runtime.steps import BufRef

from .. import llvm_util as U
from ..kernel_emitter import fused_reads
from ..llvm_util import I64, for_range, i64
from ..sort_scatter import merge_sort, scatter_atomic_add, scatter_copy_inputs, scatter_update, sort_shape
from .kernels import BLOCK, GpuKernel, make_emitter, physical_index, row_major_index, store

# Slices up to this long are sorted by rank (n^2 comparisons, all in parallel).
RANK_SORT_MAX = 4096


def lower_sort(lw, op, dests: Sequence[BufRef], env: Dict[Value, BufRef]) -> None:
    cg = lw.cg
    t = op.operands[0].type
    if t.size == 0:
        return
    r = t.rank
    dim, n, others, slices = sort_shape(op)
    reads = fused_reads(list(op.operands), env)
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
        with for_range(b, start, t.size, "e", step=step) as e:
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
    with for_range(b, start, slices, "slice", step=step) as s:
        em.push()
        base = base_of(s)
        off = b.mul(s, i64(n))
        perm = merge_sort(b, em, n, b.gep(bufs[0], [off], source_etype=I64),
                          b.gep(bufs[1], [off], source_etype=I64), lambda pa, pb: less(base, pa, pb))
        with for_range(b, 0, n, "gather") as i:
            em.push()
            p = b.load(b.gep(perm, [i], source_etype=I64), typ=I64)
            for v, ref, res in zip(op.operands, dests, op.results):
                store(b, kb.ptr(ref), res.type, at_pos(base, i), em.at(v, at_pos(base, p)))
            em.pop()
        em.pop()
    lw.steps.append(kb.finish(cg.grid(slices), BLOCK, f"sort {t} along {dim} (merge sort)"))


def lower_scatter(lw, op, dests: Sequence[BufRef], env: Dict[Value, BufRef]) -> None:
    cg = lw.cg
    if not scatter_copy_inputs(lw, op, dests, env):
        return
    nin = (len(op.operands) - 1) // 2
    indices = op.operands[nin]
    updates = op.operands[nin + 1:]
    res_t, u_t = op.results[0].type, updates[0].type
    a = op.attrs
    uwd = list(a.get("update_window_dims", ()))
    iwd = list(a.get("inserted_window_dims", ()))
    ib = list(a.get("input_batching_dims", ()))
    sdod = list(a["scatter_dims_to_operand_dims"])
    reads = fused_reads([indices] + list(updates), env)
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
        scatter_update(b, em, op, [kb.ptr(d) for d in dests], tuple(uidx))

    def serial_scatter(widx):
        with for_range(b, 0, s_t.size, "s") as s:
            em.push()
            update(widx, physical_index(b, s, s_t))
            em.pop()

    if s_t.size > 1 and scatter_atomic_add(op):
        # every update element on a thread of its own, added with an atomic: one pass over the
        # updates however the targets collide (max-pooling's gradient, an embedding's)
        start, step = kb.thread_range()
        with for_range(b, start, u_t.size, "u", step=step) as e:
            em.push()
            scatter_update(b, em, op, [kb.ptr(d) for d in dests], row_major_index(b, e, u_t.shape), atomic=True)
            em.pop()
        lw.steps.append(kb.finish(cg.grid(u_t.size), BLOCK,
                                  f"scatter {u_t} into {res_t} (a thread per update element, atomic add)"))
        return
    if parallel:
        start, step = kb.thread_range()
        with for_range(b, start, w_t.size, "w", step=step) as w:
            em.push()
            serial_scatter(physical_index(b, w, w_t))
            em.pop()
        lw.steps.append(kb.finish(cg.grid(w_t.size), BLOCK,
                                  f"scatter {u_t} into {res_t} (a thread per window position)"))
        return
    with for_range(b, 0, u_t.size, "u") as e:  # the update space in row-major order
        em.push()
        scatter_update(b, em, op, [kb.ptr(d) for d in dests], row_major_index(b, e, u_t.shape))
        em.pop()
    lw.steps.append(kb.finish(1, 1, f"scatter {u_t} into {res_t} (one thread: windows may overlap)"))
