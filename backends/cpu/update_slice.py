"""A ``dynamic_update_slice`` written in place: the kernel that stores only the update.

When the buffer plan (or a loop's step, ``lower.state_in_place``) puts the result of a
``dynamic_update_slice`` over its operand's buffer, every element outside the window already
holds its value; the elemental kernel would still read and rewrite the whole array. This kernel
loops over the update's index space instead, clamps the start indices as the op does
(``elemental._op_dynamic_update_slice``: each start into [0, operand - update]) and stores
``update[i]`` at ``start + i``: an LSTM's residual written into a stacked [T, B, H] loop carry
costs one row per step, not the array (XLA updates such a slice in place too).
"""
from __future__ import annotations

from typing import Dict

from hlo.ir.core import Value
from hlo.runtime.steps import BufRef, KernelCall

from ..llvm_util import I64, clamp_i64
from .kernels import (
    PARALLEL_MIN_WORK,
    Codegen,
    KernelBuilder,
    _store,
    collect_reads,
    emit_nest,
    interleave_for,
    loop_extent,
    make_emitter,
)


def emit_update_in_place(cg: Codegen, op, dest: BufRef, env: Dict[Value, BufRef], name: str,
                         what: str) -> KernelCall:
    """The kernel writing ``op``'s update into ``dest``, which holds the operand already."""
    x, u = op.operands[0], op.operands[1]
    starts = list(op.operands[2:])
    reads, nops = collect_reads([u] + starts, env)
    refs = [dest] + [env[v] for v in reads]
    kb = KernelBuilder(cg, name, refs, [True] + [False] * len(reads))
    em = make_emitter(kb, reads, env)
    b = kb.b
    rt = op.results[0].type
    first = []
    for d, v in enumerate(starts):
        s = em.at(v, ())
        if s.type.width < 64:
            s = b.sext(s, I64) if v.dtype.is_signed else b.zext(s, I64)
        first.append(clamp_i64(b, s, 0, x.shape[d] - u.shape[d]))
    ptr = kb.ptr(dest)

    def body(idx):
        val = em.at(u, idx)
        _store(b, em, ptr, rt, [b.add(s, i, flags=("nsw",)) for s, i in zip(first, idx)], val)

    emit_nest(kb, em, u.type, body, interleave=interleave_for(nops))
    return kb.finish(loop_extent(u.type), u.type.size * max(1, nops) >= PARALLEL_MIN_WORK, what)


def in_place_update(op, dest: BufRef, env: Dict[Value, BufRef]) -> bool:
    """Whether ``op`` (a dynamic_update_slice) may be lowered by ``emit_update_in_place``:
    its result goes into the operand's own buffer (same offset and size: the elements outside
    the window are there already), the update is not empty and its buffer does not overlap the
    destination (the kernel's pointers are noalias, and an update read while written would see
    its own stores)."""
    x, u = op.operands[0], op.operands[1]
    if env.get(x) != dest or u.type.size == 0:
        return False
    ref = env.get(u)
    return ref is not None and not (ref == dest or ref.overlaps(dest))
