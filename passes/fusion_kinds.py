"""What a ``fusion`` op may contain: the four kinds, checked structurally. This is the contract
between the fusion passes and the backends (and the verifier the pipeline runs on every fusion).

- ``loop``: elementwise and data-movement ops (``LOOP_FUSIBLE``: elementwise ops, broadcast,
  reshape, transpose, slice, concatenate, pad, reverse, dynamic_slice, iota, constants); every
  output has the same shape, the iteration space. A backend evaluates each output element from
  the parameters (elemental emission).
- ``input``: one or more ``reduce`` ops that all reduce the same shape ``S`` over the same
  dimensions ``R`` (the rows are the kept index space ``K``), with loop-fusible producers
  (softmax's exp feeding its sum) and, after the reductions, per-row work (ops of shape K) and
  full-shape work that reads a row's results through ``broadcast_in_dim`` along the kept
  dimensions (softmax's divide, layer norm's scale). Reductions may read earlier reductions this
  way (softmax's sum of exp(x - max)). Per-row values may also be spelled with the reduced
  dimensions kept as units (K1, jax's keepdims), reshaped between K and K1, and broadcast
  from K1 with the identity dimension map. Outputs have shape S, K or K1. A backend runs, for
  each row, the reductions in region order, then the outputs of that row.
- ``output``: exactly one ``dot_general`` with an epilogue of elementwise ops at the dot's
  shape (bias, activation, residual; side inputs computed elementally, e.g. a broadcast bias),
  and operand prologues: loop-fusible, cheap ops computing a dot operand from the parameters
  (transposes, slices, converts), evaluated while the operand is packed; or, where the target
  allows it, a row prologue on one operand (a layer norm) whose rows are that operand's rows
  over its contracting dimensions. Outputs are the dot or epilogue values (dot's shape).
- ``multi``: independent kernels launched as one; its region holds only nested ``fusion`` ops
  (each of kind loop or input) that read only the region's parameters.

``analyze(region)`` names the kind and its iteration shape or raises ``NotFusible`` with the
reason, which is what the fusion decision log prints.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Set, Tuple

from hlo.ir.core import Operation, Region, Value

from .util import ELEMENTWISE, EXPENSIVE, is_elementwise, is_loop_fusible, is_scalar_body

KINDS = ("loop", "input", "output", "multi")


class NotFusible(Exception):
    """A region is not a valid fusion of any (or of the requested) kind; the message says why."""


@dataclass
class FusedInfo:
    kind: str
    shape: Tuple[int, ...]                 # iteration space: loop shape, reduced shape S, dot shape
    reduce_dims: Tuple[int, ...] = ()      # input kind (and a row prologue): R
    dot: Optional[Operation] = None        # output kind
    row_prologue: Optional[int] = None     # output kind: operand index (0 lhs, 1 rhs) with a row prologue
    parts: Tuple["FusedInfo", ...] = ()    # multi kind


def _dependents(region: Region, seeds: Set[Value]) -> Set[Value]:
    dep = set(seeds)
    for op in region.ops:
        if any(v in dep for v in op.operands):
            dep.update(op.results)
    return dep


def _ancestors(region: Region, value: Value) -> List[Operation]:
    """Ops of ``region`` that ``value`` depends on (including its producer), in region order."""
    want = {value}
    out = []
    for op in reversed(region.ops):
        if any(r in want for r in op.results):
            out.append(op)
            want.update(op.operands)
    out.reverse()
    return out


def _check_isolated(region: Region) -> None:
    """A fused region reads only its own parameters (values from outside are operands)."""
    defined = set(region.args)
    for op in region.walk():
        defined.update(op.results)
        for r in op.regions:
            defined.update(r.args)
    for op in region.walk():
        for v in op.operands:
            if v not in defined:
                raise NotFusible(f"'{op.name}' in a fused region reads a value from outside the "
                                 "fusion; pass it as an operand")


def _check_ops(region: Region) -> None:
    for op in region.ops:
        if op.name == "reduce":
            if not is_scalar_body(op.regions[0]):
                raise NotFusible("reduce body is not a scalar computation")
            if not op.attrs["dimensions"]:
                raise NotFusible("reduce over no dimensions")
            continue
        if op.name == "dot_general":
            continue
        if not is_loop_fusible(op):
            raise NotFusible(f"'{op.name}' cannot be fused")
    produced = {r for op in region.ops for r in op.results}
    for v in region.outputs:
        if v not in produced:
            raise NotFusible("a fusion output is a parameter passed through unchanged")


def check_rows(region: Region, ops: List[Operation], outputs: List[Value]) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """Check the row structure of ``ops`` (a subset of ``region``'s ops, in order, holding the
    reductions); return (S, R)."""
    reduces = [op for op in ops if op.name == "reduce"]
    S = tuple(reduces[0].operands[0].type.shape)
    R = tuple(sorted(reduces[0].attrs["dimensions"]))
    for r in reduces[1:]:
        if tuple(r.operands[0].type.shape) != S or tuple(sorted(r.attrs["dimensions"])) != R:
            raise NotFusible("reductions of different shapes or dimensions "
                             f"({list(S)} over {list(R)} vs {list(r.operands[0].type.shape)} over "
                             f"{list(sorted(r.attrs['dimensions']))})")
    kept = [d for d in range(len(S)) if d not in R]
    K = tuple(S[d] for d in kept)
    K1 = tuple(1 if d in R else S[d] for d in range(len(S)))  # the keepdims spelling of a row
    rows = {K, K1}
    dep: Set[Value] = set()
    for op in ops:
        if op.name == "reduce":
            dep.update(op.results)
            continue
        if not any(v in dep for v in op.operands):
            continue
        shape = tuple(op.results[0].type.shape)
        if is_elementwise(op):
            if shape not in rows and shape != S:
                raise NotFusible(f"'{op.name}' of shape {list(shape)} uses a reduction result "
                                 f"but is neither per row {list(K)} nor per element {list(S)}")
        elif op.name == "reshape":
            if shape not in rows or tuple(op.operands[0].type.shape) not in rows:
                raise NotFusible("a reduction result is reshaped other than to add or drop the "
                                 "reduced unit dimensions")
        elif op.name == "broadcast_in_dim":
            src = tuple(op.operands[0].type.shape)
            dims = list(op.attrs["broadcast_dimensions"])
            if shape != S or not ((src == K and dims == kept) or
                                  (src == K1 and dims == list(range(len(S))))):
                raise NotFusible("a reduction result is broadcast other than back along its rows")
        elif op.name == "constant":
            pass
        else:
            raise NotFusible(f"'{op.name}' reads a reduction result (only elementwise ops and "
                             "broadcasts back along the rows may)")
        dep.update(op.results)
    for v in outputs:
        if tuple(v.type.shape) not in rows and tuple(v.type.shape) != S:
            raise NotFusible(f"output of shape {list(v.type.shape)} is neither per row {list(K)} "
                             f"nor per element {list(S)}")
    return S, R


def analyze(region: Region, allow_row_prologue: bool = True) -> FusedInfo:
    """The kind of fusion ``region`` is, or NotFusible with the reason."""
    _check_isolated(region)
    if region.ops and all(op.name == "fusion" for op in region.ops):
        return _analyze_multi(region, allow_row_prologue)
    if any(op.name == "fusion" for op in region.ops):
        raise NotFusible("nested fusions only appear in a multi fusion, alone")
    _check_ops(region)
    dots = [op for op in region.ops if op.name == "dot_general"]
    if len(dots) > 1:
        raise NotFusible("more than one dot in one kernel")
    if dots:
        return _analyze_output(region, dots[0], allow_row_prologue)
    if any(op.name == "reduce" for op in region.ops):
        S, R = check_rows(region, region.ops, region.outputs)
        return FusedInfo("input", S, R)
    shapes = {tuple(v.type.shape) for v in region.outputs}
    if len(shapes) != 1:
        raise NotFusible("loop fusion outputs of different shapes "
                         f"({', '.join(str(list(s)) for s in sorted(shapes))})")
    return FusedInfo("loop", shapes.pop())


def _analyze_output(region: Region, dot: Operation, allow_row_prologue: bool) -> FusedInfo:
    D = tuple(dot.results[0].type.shape)
    desc = _dependents(region, {dot.results[0]})
    anc_ops = _ancestors(region, dot.results[0])
    anc_ops = [op for op in anc_ops if op is not dot]
    for op in region.ops:
        if op is dot or not any(r in desc for r in op.results):
            continue
        if not is_elementwise(op) or tuple(op.results[0].type.shape) != D:
            raise NotFusible(f"the dot's result feeds '{op.name}', which is not elementwise at the "
                             "dot's shape (an epilogue computes each output element on its own)")
    for v in region.outputs:
        if v not in desc:
            raise NotFusible("an output fusion may only output the dot and its epilogue")
    for op in region.ops:
        if op is dot or op in anc_ops or any(r in desc for r in op.results):
            continue
        if op.name == "reduce":
            raise NotFusible("a reduction beside the dot that is not its operand prologue")
    row = None
    reduces = [op for op in anc_ops if op.name == "reduce"]
    if reduces:
        if not allow_row_prologue:
            raise NotFusible("the target takes no row-wise prologue (layer norm) in a dot's operand")
        sides = []
        for i, operand in enumerate(dot.operands[:2]):
            a = _ancestors(region, operand)
            if any(op.name == "reduce" for op in a):
                sides.append((i, a))
        if len(sides) != 1:
            raise NotFusible("both dot operands have row-wise prologues")
        i, a = sides[0]
        rowdep = set()
        for op in a:  # values of the prologue computed from its reductions
            if op.name == "reduce" or any(v in rowdep for v in op.operands):
                rowdep.update(op.results)
        if dot.operands[1 - i] in rowdep:
            raise NotFusible("both dot operands read the row-wise prologue")
        for op in region.ops:
            if op is not dot and op not in a and any(v in rowdep for v in op.operands):
                raise NotFusible(f"'{op.name}' outside the dot's operand reads a row-wise prologue value")
        operand = dot.operands[i]
        S, R = check_rows(region, a, [operand])
        contracting = tuple(sorted(dot.attrs.get(
            "lhs_contracting_dimensions" if i == 0 else "rhs_contracting_dimensions", ())))
        if tuple(operand.type.shape) != S or R != contracting:
            raise NotFusible("the row-wise prologue does not reduce over the dot's contracting "
                             "dimensions of that operand")
        row = i
        cheap_check = [op for op in anc_ops if op not in a]
    else:
        cheap_check = anc_ops
    for op in cheap_check:
        if op.name in EXPENSIVE:
            raise NotFusible(f"'{op.name}' in a dot operand would be recomputed while packing "
                             "(only cheap ops go into a dot's operand)")
    return FusedInfo("output", D, dot=dot, row_prologue=row)


def _analyze_multi(region: Region, allow_row_prologue: bool) -> FusedInfo:
    args = set(region.args)
    parts = []
    for op in region.ops:
        if any(v not in args for v in op.operands):
            raise NotFusible("parts of a multi fusion must be independent")
        info = analyze(op.regions[0], allow_row_prologue)
        if info.kind not in ("loop", "input"):
            raise NotFusible(f"a multi fusion holds loop and input kernels, not {info.kind}")
        if op.attrs.get("kind") != info.kind:
            raise NotFusible(f"nested fusion says kind {op.attrs.get('kind')} but is {info.kind}")
        parts.append(info)
    produced = [r for op in region.ops for r in op.results]
    if sorted(map(id, produced)) != sorted(map(id, region.outputs)) or len(region.outputs) != len(produced):
        raise NotFusible("a multi fusion outputs each result of its parts once")
    return FusedInfo("multi", (), parts=tuple(parts))


def verify_fusion(op: Operation, allow_row_prologue: bool = True) -> FusedInfo:
    """Check a fusion op against its declared kind; raises NotFusible."""
    info = analyze(op.regions[0], allow_row_prologue)
    if op.attrs.get("kind") != info.kind:
        raise NotFusible(f"fusion {op.attrs.get('name') or ''} says kind {op.attrs.get('kind')!r} "
                         f"but its region is a {info.kind} fusion")
    return info


# --------------------------------------------------------------------------------------------
# In-place updates
# --------------------------------------------------------------------------------------------

def _flow(region: Region, v: Value) -> List[Operation]:
    dep = {v}
    out = []
    for op in region.ops:
        if any(x in dep for x in op.operands):
            out.append(op)
            dep.update(op.results)
    return out


def inplace_pairs(op: Operation) -> List[Tuple[int, int]]:
    """(operand index, result index) pairs where the kernel may write the result over the
    operand's buffer: the operand is read only at the index being written (and, in an input
    fusion, by the row's reductions, which finish before the row is written; a
    dynamic_update_slice's operand outside its window; a while's operand, which becomes the
    loop's state). Types (shape, element size, layout) must match. The buffer assigner decides
    whether to use a pair (the operand dies at the op), and a loop's step whether its state may
    be written over (``lower.state_in_place``)."""
    pairs = []
    if op.name == "dynamic_update_slice":
        # the operand is read only outside the window, at the index written (XLA's in-place
        # dynamic-update-slice); the CPU then stores only the update (``cpu/update_slice.py``)
        return [(0, 0)] if _same_storage(op.operands[0], op.results[0]) else pairs
    if op.name == "while":
        # the loop's state lives in its result buffers from the first step on (the lowering copies
        # each operand there first): an operand that dies at the loop may already be that buffer,
        # no copy in (XLA's while aliases its operand and result buffers too)
        return [(i, i) for i, v in enumerate(op.operands) if _same_storage(v, op.results[i])]
    if op.name in ELEMENTWISE:
        for i, v in enumerate(op.operands):
            for j, r in enumerate(op.results):
                if _same_storage(v, r):
                    pairs.append((i, j))
        return pairs
    if op.name != "fusion":
        return pairs
    region = op.regions[0]
    try:
        info = analyze(region)
    except NotFusible:
        return pairs
    if info.kind == "multi":
        for part in region.ops:
            for i, a in enumerate(region.args):
                users = [p for p in region.ops if a in p.operands]
                if users != [part]:
                    continue
                pi = part.operands.index(a)
                for (ii, jj) in inplace_pairs(part):
                    if ii != pi:
                        continue
                    res = part.results[jj]
                    for j, out in enumerate(region.outputs):
                        if out is res and _same_storage(op.operands[i], op.results[j]):
                            pairs.append((i, j))
        return pairs
    prologue = set(map(id, _ancestors(region, info.dot.results[0]))) if info.dot is not None else set()
    row_shapes = set()
    if info.kind == "input":
        S, R = info.shape, info.reduce_dims
        row_shapes = {tuple(S[d] for d in range(len(S)) if d not in R),
                      tuple(1 if d in R else S[d] for d in range(len(S)))}
    for i, a in enumerate(region.args):
        shape = tuple(a.type.shape)
        if shape in row_shapes and shape != info.shape:
            # A per-row operand read only by per-row work at its own row: the row's output is
            # written after the row's reductions, reading the operand at that row first.
            if all(is_elementwise(u) and tuple(u.results[0].type.shape) == shape
                   for u in _flow(region, a)):
                for j, out in enumerate(region.outputs):
                    if tuple(out.type.shape) == shape and _same_storage(op.operands[i], op.results[j]):
                        pairs.append((i, j))
            continue
        if shape != info.shape:
            continue
        ok = True
        for u in _flow(region, a):
            if id(u) in prologue:
                ok = False  # read while the dot runs, before the output is complete
            elif is_elementwise(u):
                # Same index: a loop or epilogue element, or per-row work after the reductions.
                ok = tuple(u.results[0].type.shape) == info.shape or info.kind == "input"
            elif info.kind == "input" and u.name == "reduce":
                pass  # the row's reductions finish before the row is written
            elif info.kind == "input" and u.name in ("broadcast_in_dim", "reshape") and \
                    tuple(u.operands[0].type.shape) != info.shape:
                pass  # per-row values, reshaped or broadcast back along the row
            else:
                ok = False  # read at another index
            if not ok:
                break
        if not ok:
            continue
        for j, out in enumerate(region.outputs):
            if tuple(out.type.shape) == info.shape and _same_storage(op.operands[i], op.results[j]):
                pairs.append((i, j))
    return pairs


def _same_storage(a: Value, b: Value) -> bool:
    ta, tb = a.type, b.type
    return (ta.shape == tb.shape and ta.dtype.itemsize == tb.dtype.itemsize
            and ta.minor_to_major == tb.minor_to_major)
