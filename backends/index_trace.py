"""Symbolic index tracing: at which indices does a fused computation read a given value?

The elemental emitter maps a consumer's index to each operand's index. This module mirrors
that mapping on symbols (no LLVM) for the re-indexing ops, to decide statically whether

* a fused region's reductions are only read at the current row (``row_fusable``: the whole
  region can run as one row-by-row kernel, softmax/layernorm style), and
* an output fusion's dot_general is only read at the output's own index (``reads_at_identity``:
  the dot can write straight into the output buffer and the epilogue can run in place).

Anything the tracer does not model reads its operands at an unknown index (``OPAQUE``), which
makes both questions answer "no" — the safe fallback (materializing into scratch).
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from hlo.ir import ops as op_table
from hlo.ir.core import Region, Value

OPAQUE = "?"
ZERO = 0

_SAME_INDEX = op_table.with_trait(op_table.ELEMENTWISE)


def _operand_indices(op, idx) -> List[Tuple[Value, tuple]]:
    name = op.name
    if name in _SAME_INDEX:
        return [(v, idx if v.type.rank else ()) for v in op.operands]
    if name == "broadcast_in_dim":
        x = op.operands[0]
        dims = op.attrs["broadcast_dimensions"]
        return [(x, tuple(ZERO if x.shape[k] == 1 and op.results[0].shape[d] != 1 else idx[d]
                          for k, d in enumerate(dims)))]
    if name == "transpose":
        perm = op.attrs["permutation"]
        o = [None] * len(perm)
        for i, p in enumerate(perm):
            o[p] = idx[i]
        return [(op.operands[0], tuple(o))]
    if name == "reshape":
        x = op.operands[0]
        out_nz = [(i, s) for i, s in enumerate(op.results[0].shape) if s != 1]
        in_nz = [(i, s) for i, s in enumerate(x.shape) if s != 1]
        if [s for _, s in out_nz] == [s for _, s in in_nz]:
            res = [ZERO] * x.type.rank
            for (oi, _), (ii, _) in zip(out_nz, in_nz):
                res[ii] = idx[oi]
            return [(x, tuple(res))]
    if name == "constant" or name == "iota":
        return []
    return [(v, (OPAQUE,) * v.type.rank) for v in op.operands] + _captured(op)


def _captured(op) -> List[Tuple[Value, tuple]]:
    """Values read inside an op's regions that are defined outside them (read anywhere)."""
    out = []
    inner = op.defined_inside()
    for r in op.regions:
        for o in r.walk():
            for v in o.operands:
                if v not in inner:
                    out.append((v, (OPAQUE,) * v.type.rank))
        for v in r.outputs:
            if v not in inner:
                out.append((v, (OPAQUE,) * v.type.rank))
    return out


def trace_reads(starts: Iterable[Tuple[Value, tuple]], targets: Set[Value],
                stop: Set[Value]) -> Dict[Value, Set[tuple]]:
    """Follow index mappings from ``starts`` through fused producers (not through ``stop``
    values, which are materialized) and collect the indices at which each target is read."""
    seen: Set[tuple] = set()
    found: Dict[Value, Set[tuple]] = {t: set() for t in targets}
    stack = list(starts)
    while stack:
        v, idx = stack.pop()
        key = (id(v), idx)
        if key in seen:
            continue
        seen.add(key)
        if v in targets:
            found[v].add(idx)
            continue
        if v in stop or v.op is None:
            continue
        stack.extend(_operand_indices(v.op, idx))
    return found


def row_fusable(region: Region, heavy_ops: Sequence, outputs: Sequence[Value],
                stop: Optional[Set[Value]] = None) -> Optional[int]:
    """If the region can run row by row, return the number of leading (row) dimensions.

    Conditions: every heavy op is a reduce over the trailing dimensions of default-layout
    inputs of one shape O+I; every output has shape O+I or O (default layout); and every read
    of a reduce result, from the outputs or from other reductions' inputs, is at the row index.
    """
    if not heavy_ops or any(op.name != "reduce" for op in heavy_ops):
        return None
    in_shape = None
    k = None
    for op in heavy_ops:
        n = len(op.operands) // 2
        t = op.operands[0].type
        if t.layout is not None and t.layout != t.default_layout:
            return None
        dims = sorted(op.attrs["dimensions"])
        if not dims or dims != list(range(t.rank - len(dims), t.rank)):
            return None
        kk = t.rank - len(dims)
        if in_shape is None:
            in_shape, k = t.shape, kk
        elif t.shape != in_shape or kk != k:
            return None
        if any(v.type.shape != in_shape for v in op.operands[:n]):
            return None
    O, I = in_shape[:k], in_shape[k:]
    rows = tuple(f"r{i}" for i in range(k))
    inner = tuple(f"i{i}" for i in range(len(I)))
    starts = []
    for o in outputs:
        t = o.type
        if t.layout is not None and t.layout != t.default_layout:
            return None
        if t.shape == tuple(in_shape):
            starts.append((o, rows + inner))
        elif t.shape == tuple(O):
            starts.append((o, rows))
        else:
            return None
    targets = set()
    for op in heavy_ops:
        targets.update(op.results)
    for op in heavy_ops:
        n = len(op.operands) // 2
        for v in op.operands[:n]:
            starts.append((v, rows + inner))
    found = trace_reads(starts, targets, stop=set(region.args) | set(stop or ()))
    # Region outputs that are reduce results are read at the row index by construction.
    for tset in found.values():
        for idx in tset:
            if idx != rows:
                return None
    # Each reduce's own inputs must not reach into that reduce (impossible in SSA) — done.
    return k


def reads_at_identity(value: Value, root: Value, stop: Set[Value]) -> bool:
    """True if computing ``root`` at index i reads ``value`` only at index i (same shape)."""
    if value.type.shape != root.type.shape:
        return False
    idx = tuple(f"d{i}" for i in range(root.type.rank))
    found = trace_reads([(root, idx)], {value}, stop)
    return all(i == idx for i in found[value])
