"""Building fusion ops: ``preview(region, units, kind)`` builds the fused region of a set of
top-level ops (plain ops or fusion ops), and ``commit(...)`` replaces them by one ``fusion`` op
whose region computes them all.

- Values the units read from outside become the fusion's parameters (each value once, in
  order of first use); results that something outside the set reads (or the function returns)
  become its outputs, in unit order.
- Member fusions of kind loop/input/output are inlined into the new region; for kind "multi"
  every unit stays a nested fusion (plain ops are wrapped first).
- Units listed in ``duplicate`` are copied into the region but also kept where they are, for
  their other users (how a cheap producer is fused into several consumers).
- Values inside a fused region carry no layout (they live in registers); the fusion's results
  keep the layouts of the values they replace.

``preview`` does not touch the function, so a pass can check a candidate
(``fusion_kinds.analyze``) before committing to it.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Set

from hlo.ir.clone import clone_op
from hlo.ir.core import Operation, Region, Value

from .util import inputs_of, replace_top_values, stable_toposort, top_users


class Candidate:
    """A fused region built from ``units`` (not yet in the function)."""

    def __init__(self, region: Region, operands: List[Value], replaced: List[Value]):
        self.region = region
        self.operands = operands  # outer values, one per region argument
        self.replaced = replaced  # outer values that the fusion's results replace, in order


def _strip(region: Region) -> None:
    for op in region.walk():
        for r in op.results:
            r.type = r.type.without_layout()
    for r in [region] + [rr for op in region.walk() for rr in op.regions]:
        for a in r.args:
            a.type = a.type.without_layout()


def preview(region: Region, units: Sequence[Operation], kind: str,
            duplicate: Iterable[Operation] = (), users: Dict[Value, List[Operation]] = None,
            outputs: Optional[Set[Value]] = None) -> Candidate:
    """Build the fused region of ``units`` (top-level ops of ``region``)."""
    units = _in_order(region, units)
    unit_ids = {id(u) for u in units}
    dup_ids = {id(u) for u in duplicate}
    users = users if users is not None else top_users(region)
    returned = set(region.outputs) if outputs is None else outputs

    fused = Region([], name="fused")
    vmap: Dict[Value, Value] = {}
    operands: List[Value] = []

    def inner(v: Value) -> Value:
        if v not in vmap:
            vmap[v] = fused.add_arg(v.type.without_layout())
            operands.append(v)
        return vmap[v]

    for u in units:
        if kind == "multi":
            part = u if u.name == "fusion" else _wrap_single(u)
            m = {v: inner(v) for v in inputs_of(part)}
            new = clone_op(part, m)
            fused.append(new)
            for r, nr in zip(part.results, new.results):
                vmap[r] = nr
            if part is not u:
                for r, nr in zip(u.results, new.results):
                    vmap[r] = nr
            continue
        if u.name == "fusion":
            body = u.regions[0]
            if u.attrs.get("kind") == "multi":
                raise ValueError("a multi fusion cannot be inlined into another fusion")
            m = {a: inner(v) for a, v in zip(body.args, u.operands)}
            for op in body.ops:
                fused.append(clone_op(op, m))
            for r, out in zip(u.results, body.outputs):
                vmap[r] = m.get(out, out)
            continue
        for v in inputs_of(u):
            inner(v)
        new = clone_op(u, vmap)
        fused.append(new)

    replaced: List[Value] = []
    for u in units:
        if id(u) in dup_ids:
            continue
        for r in u.results:
            outside = [x for x in users.get(r, ()) if id(x) not in unit_ids]
            if outside or r in returned:
                replaced.append(r)
                fused.outputs.append(vmap[r])
    _strip(fused)
    return Candidate(fused, operands, replaced)


def _in_order(region: Region, units: Sequence[Operation]) -> List[Operation]:
    """``units`` with every producer before its readers (their order in ``region``)."""
    if len(units) <= 8:
        out: List[Operation] = []
        left = list(units)
        while left:
            made = {r for u in left for r in u.results}
            nxt = next(u for u in left if not any(v in made for v in inputs_of(u)))
            out.append(nxt)
            left.remove(nxt)
        return out
    order = {id(op): i for i, op in enumerate(region.ops)}
    return sorted(units, key=lambda op: order[id(op)])


def _wrap_single(op: Operation) -> Operation:
    """A standalone fusion op around one plain op (used for parts of a multi fusion)."""
    from .fusion_kinds import analyze
    region = Region([], name="fused")
    m = {}
    operands = []
    for v in inputs_of(op):
        m[v] = region.add_arg(v.type.without_layout())
        operands.append(v)
    new = clone_op(op, m)
    region.append(new)
    region.outputs = list(new.results)
    _strip(region)
    kind = analyze(region).kind
    f = Operation("fusion", operands, {"kind": kind, "name": f"{kind}_{op.name}"},
                  [r.type for r in op.results], [region], op.loc)
    return f


def commit(region: Region, units: Sequence[Operation], cand: Candidate, kind: str, name: str,
           duplicate: Iterable[Operation] = (), users: Dict[Value, List[Operation]] = None) -> Operation:
    """Put the candidate's fusion op into ``region`` in place of ``units``. ``users`` (the
    top-level use map, if the caller keeps one) is updated to match."""
    units = _in_order(region, units)
    dup_ids = {id(u) for u in duplicate}
    loc = units[-1].loc
    attrs = {"kind": kind}
    if name:
        attrs["name"] = name
    fusion = Operation("fusion", list(cand.operands), attrs, [v.type for v in cand.replaced],
                       [cand.region], loc)
    mapping = dict(zip(cand.replaced, fusion.results))
    removed = {id(u) for u in units if id(u) not in dup_ids}
    unit_ids = {id(u) for u in units}
    last = max(i for i, op in enumerate(region.ops) if id(op) in unit_ids)
    new_ops = []
    for i, op in enumerate(region.ops):
        if id(op) not in removed:
            new_ops.append(op)
        if i == last:
            new_ops.append(fusion)
    fusion.parent = region
    region.ops = new_ops
    replace_top_values(region, mapping)
    # The fusion sits where its last unit was: after all its inputs. A reader of an earlier
    # unit's result that sat between the units now comes too early; re-sort only then.
    if users is not None:
        _update_users(users, [u for u in units if id(u) in removed], fusion, mapping)
        pos = {id(op): i for i, op in enumerate(new_ops)}
        early = any(pos.get(id(x), last) < pos[id(fusion)] for r in fusion.results
                    for x in users.get(r, ()))
    else:
        at = new_ops.index(fusion)
        produced = set(fusion.results)
        early = any(v in produced for op in new_ops[:at] for v in inputs_of(op))
    if early:
        stable_toposort(region)
    return fusion


def _update_users(users, removed: List[Operation], fusion: Operation, mapping) -> None:
    gone = set(map(id, removed))
    for u in removed:
        for v in inputs_of(u):
            lst = users.get(v)
            if lst:
                users[v] = [x for x in lst if id(x) not in gone]
    for old, new in mapping.items():
        users[new] = [x for x in users.pop(old, []) if id(x) not in gone]
    for v in inputs_of(fusion):
        users.setdefault(v, []).append(fusion)
