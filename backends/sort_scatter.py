"""The IR of sort and scatter that every target shares (``cpu/sort_scatter.py`` and
``cuda/sort_scatter.py`` drive it from their own loops and buffers):

* ``sort_shape``: a sort's dimension, length, other dimensions and slices;
* ``merge_sort``: a stable bottom-up merge sort of an index permutation of ``n`` positions,
  ordered by a comparator (``less(pa, pb)``: the element at position ``pa`` goes before the one
  at ``pb``), between two i64 buffers of ``n`` elements; returns the buffer holding the result;
* ``scatter_copy_inputs``: a scatter's results start as its inputs;
* ``scatter_update``: one update element of a scatter: its target index per the StableHLO spec
  (scatter indices, batching dimensions, window offsets) and, if that is inside the result, the
  update region applied to the result's element and the update.
"""
from __future__ import annotations

from typing import Callable, Sequence

import llvmlite.ir as ir

from . import llvm_util as U
from .elemental import ElementalEmitter
from .llvm_util import I1, I64, PTR, clamp_i64, for_range, i64


def sort_shape(op):
    """``(dim, n, others, slices)`` of a sort: the sorted dimension (non-negative), its length,
    the other dimensions and how many slices they hold."""
    t = op.operands[0].type
    dim = op.attrs.get("dimension", -1)
    if dim < 0:
        dim += t.rank
    n = t.shape[dim]
    others = [d for d in range(t.rank) if d != dim]
    slices = t.size // n if n else 0
    return dim, n, others, slices


def merge_sort(b: ir.IRBuilder, em: ElementalEmitter, n: int, buf0: ir.Value, buf1: ir.Value,
               less: Callable[[ir.Value, ir.Value], ir.Value]) -> ir.Value:
    """Sort the permutation 0..n-1 (written into ``buf0`` first); returns the pointer to the
    buffer holding the sorted permutation."""
    src_slot = U.entry_alloca(b, PTR)
    dst_slot = U.entry_alloca(b, PTR)
    width_slot = U.entry_alloca(b, I64)
    with for_range(b, 0, n, "init") as i:
        b.store(i, b.gep(buf0, [i], source_etype=I64))
    b.store(buf0, src_slot)
    b.store(buf1, dst_slot)
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
            pi = b.load(b.gep(src, [clamp_i64(b, i, 0, n - 1)], source_etype=I64), typ=I64)
            pj = b.load(b.gep(src, [clamp_i64(b, j, 0, n - 1)], source_etype=I64), typ=I64)
            take_j = b.select(b.and_(have_i, have_j), less(pj, pi), b.not_(have_i))
            b.store(b.select(take_j, pj, pi), b.gep(dst, [k], source_etype=I64))
            b.store(b.select(take_j, i, b.add(i, i64(1))), islot)
            b.store(b.select(take_j, b.add(j, i64(1)), j), jslot)
            em.pop()
    b.store(dst, src_slot)
    b.store(src, dst_slot)
    b.store(two_w, width_slot)
    b.branch(head)
    b.position_at_end(done)
    return b.load(src_slot, typ=PTR)


def scatter_copy_inputs(lw, op, dests, env) -> bool:
    """The first step of a scatter: its results = its inputs (a loop kernel of the target's,
    ``lw.cg.loop_kernel``). False when no update can land (empty updates or results)."""
    from .kernel_emitter import Root
    nin = (len(op.operands) - 1) // 2
    res_t = op.results[0].type
    if res_t.size:
        roots = [Root(v, d, r.type) for v, d, r in zip(op.operands[:nin], dests, op.results)]
        lw.steps.append(lw.cg.loop_kernel(roots, env, "scatter_init", "scatter: copy inputs"))
    return op.operands[-1].type.size > 0 and res_t.size > 0


# Element types whose ``add`` a scatter may do with one atomic read-modify-write (``atomicrmw
# add`` / ``fadd``: PTX ``atom.global.add`` of these widths).
ATOMIC_ADD_TYPES = frozenset({"f32", "f64", "s32", "u32", "s64", "u64"})


def scatter_atomic_add(op) -> bool:
    """Whether scatter ``op`` combines each update into its target by adding it, on one result
    of an element type with an atomic add (``ATOMIC_ADD_TYPES``): the updates can then be applied
    in any order, all at once (scatter_update with ``atomic``). Floating-point sums then round
    in the order the threads land, as XLA's GPU scatter-add does."""
    if len(op.operands) != 3 or op.results[0].dtype.name not in ATOMIC_ADD_TYPES:
        return False
    body = op.regions[0]
    if len(body.ops) != 1 or len(body.outputs) != 1:
        return False
    add = body.ops[0]
    return (add.name == "add" and body.outputs[0] is add.results[0]
            and sorted(map(id, add.operands)) == sorted(map(id, body.args)))


def scatter_update(b: ir.IRBuilder, em: ElementalEmitter, op, dests: Sequence[ir.Value], uidx,
                   atomic: bool = False) -> None:
    """Apply update element ``uidx`` (an index into the updates) of scatter ``op`` to the
    results at ``dests`` (pointers, one per result; the results already hold the inputs).
    ``atomic`` (only where ``scatter_atomic_add(op)``): add it with one atomic instruction."""
    a = op.attrs
    nin = (len(op.operands) - 1) // 2
    indices = op.operands[nin]
    updates = op.operands[nin + 1:]
    res_t = op.results[0].type
    uwd = list(a.get("update_window_dims", ()))
    iwd = list(a.get("inserted_window_dims", ()))
    ib = list(a.get("input_batching_dims", ()))
    sib = list(a.get("scatter_indices_batching_dims", ()))
    sdod = list(a["scatter_dims_to_operand_dims"])
    ivd = a["index_vector_dim"]
    scatter_dims = [d for d in range(updates[0].type.rank) if d not in uwd]
    window_operand_dims = [d for d in range(res_t.rank) if d not in iwd and d not in ib]
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
        if atomic:
            r = op.results[0]
            ptr = U.elem_ptr(b, dests[0], r.dtype, U.linear_offset(b, full, U.strides_of(r.type)))
            b.atomic_rmw("fadd" if r.dtype.is_float else "add", ptr, em.at(updates[0], tuple(uidx)), "monotonic")
            em.pop()
            return
        ptrs, cur = [], []
        for base, r in zip(dests, op.results):
            off = U.linear_offset(b, full, U.strides_of(r.type))
            p = U.elem_ptr(b, base, r.dtype, off)
            ptrs.append(p)
            cur.append(U.load_reg(b, p, r.dtype))
        ups = [em.at(u, tuple(uidx)) for u in updates]
        new = em.scalar_region(op.regions[0], cur + ups)
        for p, v, r in zip(ptrs, new, op.results):
            U.store_reg(b, v, p, r.dtype)
        em.pop()
