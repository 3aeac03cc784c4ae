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

Both work on a ``TopLevel``: the function's top-level ops with each value's readers and each
op's position, which ``commit`` keeps current. A merge then costs in proportion to the ops it
touches (the units, the readers of their results), not to the size of the function, so the
fusion passes stay near linear on programs of thousands of ops. A ``TopLevel(...,
deferred=True)`` goes further: the positions are the order, and ``region.ops`` is rebuilt
from them only when ``sync()`` is called (editing a Python list in place costs a scan of the
list per merge: quadratic over a pass that merges thousands of times).
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Sequence, Set

from hlo.ir.clone import clone_op
from hlo.ir.core import Operation, Region, Value

from .util import inputs_of, replace_values, stable_toposort


class TopLevel:
    """The top level of a function while the fusion passes rewrite it: ``region.ops`` in order,
    ``users`` (each value's top-level readers, in ``util.top_users``' order, as the keys of a
    dict), ``pos`` (an increasing
    position key per live op) and ``returned`` (the values the region outputs)."""

    def __init__(self, region: Region, ins: Sequence[List[Value]] = None, deferred: bool = False):
        """``ins``: each op's ``inputs_of``, in region order, where the caller has them.
        ``deferred``: ``commit`` leaves ``region.ops`` as it was and only updates the positions;
        the caller reads the region's ops after ``sync()``."""
        self.region = region
        self.deferred = deferred
        self.stale = False  # region.ops lags behind the positions (deferred mode)
        # Each value's readers, in order, as the keys of a dict: iterated like a list, but a
        # merge drops a reader without scanning them all (a splat constant that CSE left
        # shared by every block of a long program has thousands).
        self.users: Dict[Value, Dict[Operation, None]] = {}
        if ins is None:
            ins = [inputs_of(op) for op in region.ops]
        for op, vs in zip(region.ops, ins):
            for v in vs:
                self.users.setdefault(v, {})[op] = None
        self.returned: Set[Value] = set(region.outputs)
        # Where each returned value stands in ``region.outputs`` (a merge rewires a returned
        # value without scanning a program's thousands of outputs).
        self.out_index: Dict[Value, List[int]] = {}
        for i, v in enumerate(region.outputs):
            self.out_index.setdefault(v, []).append(i)
        # Fused regions built here, which carry no layouts (ids; the regions are kept alive).
        self.stripped: Dict[int, Region] = {}
        self.renumber()

    def renumber(self) -> None:
        self.sync()
        self.pos: Dict[int, int] = {id(op): i for i, op in enumerate(self.region.ops)}
        self.by_id: Dict[int, Operation] = {id(op): op for op in self.region.ops}

    def sync(self) -> None:
        """Make ``region.ops`` the live ops in position order (deferred mode; a no-op when
        it is current). The positions only ever move forward in the old order, so this is
        one pass of a sort over nearly sorted keys."""
        if self.stale:
            pos = self.pos
            self.region.ops = sorted(self.by_id.values(), key=lambda op: pos[id(op)])
            self.stale = False

    def alive(self, op: Operation) -> bool:
        """Still in the function (merged units are gone)."""
        return id(op) in self.pos

    def producers(self, op: Operation) -> List[Operation]:
        """The top-level ops whose results ``op`` reads, latest first."""
        seen: Dict[int, Operation] = {}
        for v in inputs_of(op):
            p = v.op
            if p is not None and id(p) in self.pos:
                seen[id(p)] = p
        return sorted(seen.values(), key=lambda p: -self.pos[id(p)])


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
    for reg in [region] + [rr for op in region.walk() for rr in op.regions]:
        for a in reg.args:
            a.type = a.type.without_layout()


def preview(top: TopLevel, units: Sequence[Operation], kind: str,
            duplicate: Iterable[Operation] = ()) -> Candidate:
    """Build the fused region of ``units`` (top-level ops of ``top``'s region)."""
    units = _in_order(top, units)
    unit_ids = {id(u) for u in units}
    dup_ids = {id(u) for u in duplicate}
    users = top.users
    returned = top.returned

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


def absorb(top: TopLevel, p: Operation, c: Operation, duplicate: bool) -> Candidate:
    """The candidate of fusing the plain op ``p`` (no regions) into the fusion ``c`` that reads
    it, built by moving ``c``'s region rather than copying it: ``p`` is copied in front of
    ``c``'s ops, the parameters that carried ``p``'s results become the copy's results, and the
    parameters are re-listed in the order ``preview`` would give them, so the result is the
    one ``preview(top, [p, c], "loop", [p] if duplicate else [])`` builds. The work is in
    proportion to ``p`` and the parameter list, not to the size of the kernel, so growing a
    long kernel one producer at a time stays linear. ``c`` must then be committed: its region
    is no longer its own."""
    body = c.regions[0]
    first: Dict[Value, Value] = {}   # outer value -> c's parameter for it
    sub: Dict[Value, Value] = {}     # parameters that repeat an outer value -> the first one
    for a, v in zip(body.args, c.operands):
        if v in first:
            sub[a] = first[v]
        else:
            first[v] = a
    args: List[Value] = []
    operands: List[Value] = []
    arg_of: Dict[Value, Value] = {}

    def param(v: Value) -> Value:
        a = arg_of.get(v)
        if a is None:
            a = first.get(v) or Value(v.type.without_layout(), body, 0)
            a.index = len(args)
            arg_of[v] = a
            args.append(a)
            operands.append(v)
        return a

    pm = {v: param(v) for v in inputs_of(p)}
    copy = clone_op(p, pm)
    for i, r in enumerate(p.results):
        t = copy.results[i].type.without_layout()
        a = first.get(r)
        if a is not None:  # c's parameter for this result is now the copy's result
            a.owner, a.index, a.type = copy, i, t
            copy.results[i] = a
            pm[r] = a
        else:
            copy.results[i].type = t
    for v in c.operands:
        if v not in pm:
            param(v)
    body.args = args
    if sub:
        replace_values(body, sub)
    body.ops.insert(0, copy)
    copy.parent = body
    if id(body) not in top.stripped:
        _strip(body)
    units = {id(p), id(c)}
    replaced: List[Value] = []
    outs: List[Value] = []
    if not duplicate:
        for r in p.results:
            if any(id(x) not in units for x in top.users.get(r, ())) or r in top.returned:
                replaced.append(r)
                outs.append(pm[r])
    for r, out in zip(c.results, body.outputs):
        if any(id(x) not in units for x in top.users.get(r, ())) or r in top.returned:
            replaced.append(r)
            outs.append(out)
    body.outputs = outs
    body.name = "fused"
    body.output_loc = None
    return Candidate(body, operands, replaced)


def _in_order(top: TopLevel, units: Sequence[Operation]) -> List[Operation]:
    """``units`` with every producer before its readers (their order in the function)."""
    if len(units) <= 8:
        out: List[Operation] = []
        left = list(units)
        while left:
            made = {r for u in left for r in u.results}
            nxt = next(u for u in left if not any(v in made for v in inputs_of(u)))
            out.append(nxt)
            left.remove(nxt)
        return out
    return sorted(units, key=lambda op: top.pos[id(op)])


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


def commit(top: TopLevel, units: Sequence[Operation], cand: Candidate, kind: str, name: str,
           duplicate: Iterable[Operation] = ()) -> Operation:
    """Put the candidate's fusion op into the function in place of ``units`` (the fusion sits
    where the last unit was) and rewire the readers of the values it replaces; ``top`` is
    updated to match."""
    region = top.region
    units = _in_order(top, units)
    dup_ids = {id(u) for u in duplicate}
    attrs = {"kind": kind}
    if name:
        attrs["name"] = name
    fusion = Operation("fusion", list(cand.operands), attrs, [v.type for v in cand.replaced],
                       [cand.region], units[-1].loc)
    fusion.parent = region
    top.stripped[id(cand.region)] = cand.region
    mapping = dict(zip(cand.replaced, fusion.results))
    removed = [u for u in units if id(u) not in dup_ids]
    gone = set(map(id, removed))
    pos = top.pos
    last = max(units, key=lambda u: pos[id(u)])
    at = pos[id(last)]
    if id(last) in gone:  # the fusion takes the last unit's place (and position)
        for u in removed:
            del pos[id(u)]
            del top.by_id[id(u)]
        pos[id(fusion)] = at
        top.by_id[id(fusion)] = fusion
        top.stale = True
        if not top.deferred:
            top.sync()
    else:  # the last unit stays (duplicated): the fusion goes after it, and positions shift
        top.sync()
        ops = region.ops
        ops.insert(ops.index(last) + 1, fusion)
        region.ops = [op for op in ops if id(op) not in gone]
        top.renumber()
    _rewire(top, mapping, gone)
    _update_users(top.users, removed, fusion, mapping)
    # A reader of an earlier unit's result that sat between the units now comes before the
    # fusion: re-sort (rare; keeps the current order wherever it is valid).
    at = top.pos[id(fusion)]
    if any(top.pos[id(x)] < at for r in fusion.results for x in top.users.get(r, ())):
        top.sync()
        stable_toposort(region)
        top.renumber()
    return fusion


def _rewire(top: TopLevel, mapping: Dict[Value, Value], gone: Set[int]) -> None:
    """Replace each key of ``mapping`` by its value in its top-level readers (and the region's
    outputs). Fusion regions read only their parameters, so only the operands of a fusion
    reader change; other readers with regions (while, if) may read the value inside."""
    region = top.region
    for old, new in mapping.items():
        for u in top.users.get(old, ()):
            if id(u) in gone:
                continue
            u.operands = [new if v is old else v for v in u.operands]
            if u.regions and u.name != "fusion":
                for r in u.regions:
                    replace_values(r, {old: new})
        if old in top.returned:
            at = top.out_index.pop(old)
            for i in at:
                region.outputs[i] = new
            top.out_index.setdefault(new, []).extend(at)
            top.returned.discard(old)
            top.returned.add(new)


def _update_users(users, removed: List[Operation], fusion: Operation, mapping) -> None:
    """Drop the removed units from the readers, move the readers of each replaced value to its
    fusion result, and list the fusion as a reader of its inputs (in-place edits, so a value
    with many readers costs little per merge)."""
    for u in removed:
        for v in inputs_of(u):
            readers = users.get(v)
            if readers:
                readers.pop(u, None)
    for old, new in mapping.items():
        users[new] = users.pop(old, {})
    for v in inputs_of(fusion):
        users.setdefault(v, {})[fusion] = None
