"""IR helpers shared by the passes: op categories, use maps, value replacement, erasing ops,
stable topological re-ordering and structural keys of ops (for CSE and region comparison).

The IR keeps no use lists (see ``hlo.ir.core``); passes compute what they need here, once per
rewrite round, which keeps every mutation a plain list edit.
"""
from __future__ import annotations

import heapq
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np

from hlo.ir import ops
from hlo.ir.core import Function, Module, Operation, Region, Value
from hlo.ir.printer import value_names
from hlo.ir.types import TensorType

# --------------------------------------------------------------------------------------------
# Op categories
# --------------------------------------------------------------------------------------------

# Derived from the traits of the op table (``hlo.ir.ops.TRAITS`` says what each means).
# Each result element depends only on the operand elements at the same index.
ELEMENTWISE = ops.with_trait(ops.ELEMENTWISE)
COMMUTATIVE = ops.with_trait(ops.COMMUTATIVE)
# Per-element work worth not repeating (XLA's "expensive" ops).
EXPENSIVE = ops.with_trait(ops.EXPENSIVE)
TRANSCENDENTAL = ops.with_trait(ops.TRANSCENDENTAL)
# Data movement an elemental emitter can compute at any output index from operand elements.
MOVEMENT = ops.with_trait(ops.MOVEMENT)
# Ops that can sit in a loop fusion: computed element by element at any index.
LOOP_FUSIBLE = ELEMENTWISE | MOVEMENT | {"constant"}

# Ops that call back into the host: kept, unmerged, unfolded, in program order.
SIDE_EFFECT = ops.with_trait(ops.SIDE_EFFECT)
# Loops, branches and calls: their regions run as programs (kernels of their own).
CONTROL_FLOW = ops.with_trait(ops.CONTROL_FLOW)


def has_side_effect(op: Operation) -> bool:
    """``op`` calls back into the host, or an op in its regions does (a loop that prints)."""
    return any(o.name in SIDE_EFFECT for o in op.walk())


def side_effect_chain(ops_in_order: Sequence[Operation]) -> List[Tuple[int, int]]:
    """(earlier, later) positions of consecutive side-effecting ops: orders that keep them
    (schedules, topological sorts) add these as dependencies."""
    pos = [i for i, op in enumerate(ops_in_order) if has_side_effect(op)]
    return list(zip(pos, pos[1:]))


def is_elementwise(op: Operation) -> bool:
    if op.name == "bitcast_convert":
        return op.operand_types[0].shape == op.result_types[0].shape
    return op.name in ELEMENTWISE


def is_loop_fusible(op: Operation) -> bool:
    return op.name in LOOP_FUSIBLE or (op.name == "bitcast_convert" and is_elementwise(op))


def is_splat_constant(op: Operation) -> bool:
    """A constant whose elements are all equal (cheap to copy into any kernel)."""
    if op.name != "constant":
        return False
    v = op.attrs["value"]
    if v.size <= 1:
        return True
    flat = v.reshape(-1)
    bits = flat.view(np.uint8).reshape(flat.size, -1)
    return bool((bits == bits[0]).all())


def splat_value(op: Operation):
    """The scalar of a splat constant (as a 0-d numpy array), else None."""
    if not is_splat_constant(op):
        return None
    v = op.attrs["value"]
    return v.reshape(-1)[0] if v.size else None


def scalar_body_op(body: Region) -> Optional[str]:
    """The op name when a reduce body is ``return(op(arg0, arg1))`` (commutative op), else None."""
    if len(body.args) != 2 or len(body.ops) != 1 or len(body.outputs) != 1:
        return None
    op = body.ops[0]
    if op.name not in COMMUTATIVE or op.regions:
        return None
    a, b = body.args
    if set(map(id, op.operands)) != {id(a), id(b)} or body.outputs[0] is not op.results[0]:
        return None
    return op.name


def is_scalar_body(body: Region) -> bool:
    """A reduce body made only of elementwise ops on scalars, reading nothing from outside."""
    defined = set(body.args)
    for op in body.ops:
        if op.regions or not (is_elementwise(op) or op.name == "constant"):
            return False
        if any(v not in defined for v in op.operands):
            return False
        if any(r.type.rank != 0 for r in op.results):
            return False
        defined.update(op.results)
    return all(v in defined for v in body.outputs)


# --------------------------------------------------------------------------------------------
# Uses and replacement
# --------------------------------------------------------------------------------------------

def free_values(op: Operation) -> List[Value]:
    """Values read inside ``op``'s regions that are defined outside ``op`` (in order). A fusion
    region reads only its parameters (``fusion_kinds`` checks it), so it has none."""
    if not op.regions or op.name == "fusion":
        return []
    inside = op.defined_inside()
    seen: Dict[Value, None] = {}
    for r in op.regions:
        for inner in r.walk():
            for v in inner.operands:
                if v not in inside:
                    seen.setdefault(v)
        for rr in _regions_of(op):
            for v in rr.outputs:
                if v not in inside:
                    seen.setdefault(v)
    return list(seen)


def _regions_of(op: Operation) -> Iterator[Region]:
    for r in op.regions:
        yield r
        for inner in r.walk():
            yield from inner.regions


def inputs_of(op: Operation) -> List[Value]:
    """Everything ``op`` reads from its scope: its operands, then free values of its regions."""
    ins = list(dict.fromkeys(op.operands))
    for v in free_values(op):
        if v not in ins:
            ins.append(v)
    return ins


def top_users(region: Region) -> Dict[Value, List[Operation]]:
    """Map each value to the ops of ``region`` (top level only) that read it, directly or from
    inside their regions. Each user is listed once per value."""
    out: Dict[Value, List[Operation]] = {}
    for op in region.ops:
        for v in inputs_of(op):
            out.setdefault(v, []).append(op)
    return out


def replace_values(region: Region, mapping: Dict[Value, Value]) -> None:
    """Replace uses of each key by its value in ``region``, its nested regions and outputs."""
    if not mapping:
        return
    for op in region.walk():
        if any(v in mapping for v in op.operands):
            op.operands = [mapping.get(v, v) for v in op.operands]
    for r in _all_regions(region):
        if any(v in mapping for v in r.outputs):
            r.outputs = [mapping.get(v, v) for v in r.outputs]


def splice_copy(ops_to_copy: Sequence[Operation], vmap: Dict[Value, Value], region: Region,
                out: List[Operation], loc=None) -> None:
    """Append copies of ``ops_to_copy`` to ``out`` (the new op list of ``region``): values
    defined outside them map through ``vmap`` (which the copies' results join); copies without
    a location get ``loc``. Inlining a call and unrolling a loop put a region's ops in place of
    the op that ran it."""
    from hlo.ir.clone import clone_op
    for inner in ops_to_copy:
        new = clone_op(inner, vmap)
        if new.loc is None and loc is not None:
            new.loc = loc
        new.parent = region
        out.append(new)


def finish_splice(region: Region, out: List[Operation], mapping: Dict[Value, Value]) -> None:
    """``region``'s ops become ``out`` and every use of a key of ``mapping`` (results of the ops
    spliced away) reads its value, through chains (a result mapped to another spliced op's
    result)."""
    region.ops = out
    for op in out:
        op.parent = region
    if mapping:
        def final(v):
            while v in mapping:
                v = mapping[v]
            return v
        replace_values(region, {k: final(k) for k in mapping})


def _all_regions(region: Region) -> Iterator[Region]:
    yield region
    for op in region.walk():
        yield from op.regions


def all_regions(fn_or_region) -> Iterator[Region]:
    """A region (or a function's body) and every region nested in it."""
    region = fn_or_region.body if isinstance(fn_or_region, Function) else fn_or_region
    return _all_regions(region)


def module_regions(module: Module) -> Iterator[Region]:
    for fn in module.functions.values():
        yield from all_regions(fn)


def control_bodies(region: Region) -> Iterator[Region]:
    """``region`` and the bodies of its control flow (loops' conditions and bodies,
    conditionals' branches), recursively, in program order: where ops run as kernels of their own
    (a reduction's or a sort's body is a scalar computation, a fusion's a kernel already)."""
    yield region
    for op in region.ops:
        if op.name in CONTROL_FLOW:
            for r in op.regions:
                yield from control_bodies(r)


def erase_ops(region: Region, ops: Iterable[Operation]) -> None:
    dead = set(map(id, ops))
    if dead:
        region.ops = [op for op in region.ops if id(op) not in dead]


def strip_layout(t: TensorType) -> TensorType:
    return t.without_layout()


class OpGraph:
    """A region's top-level ops as a dependency graph over their positions: ``ops``, ``pos``
    (op id -> position), ``ins`` (each op's ``inputs_of``), ``deps`` (positions of the ops each
    op reads, plus ``extra_deps``) and ``users`` (positions of the ops reading each op)."""

    def __init__(self, region: Region, extra_deps: Optional[Dict[int, Set[int]]] = None):
        self.ops = list(region.ops)
        self.pos = {id(op): i for i, op in enumerate(self.ops)}
        producer: Dict[Value, int] = {}
        for i, op in enumerate(self.ops):
            for r in op.results:
                producer[r] = i
        self.ins: List[List[Value]] = [inputs_of(op) for op in self.ops]
        self.deps: List[Set[int]] = [{producer[v] for v in ins if v in producer} for ins in self.ins]
        for a, b in side_effect_chain(self.ops):
            self.deps[b].add(a)
        for i, d in (extra_deps or {}).items():
            self.deps[i] |= d
        self.users: List[List[int]] = [[] for _ in self.ops]
        for i, d in enumerate(self.deps):
            for j in d:
                self.users[j].append(i)


# --------------------------------------------------------------------------------------------
# Ordering
# --------------------------------------------------------------------------------------------

def stable_toposort(region: Region) -> None:
    """Re-order ``region``'s ops so that every op follows the ops it reads, keeping the current
    order wherever it is already valid (Kahn's algorithm, earliest current position first).
    Raises RuntimeError on a cycle (a bug in the pass that made it)."""
    ops = region.ops
    pos = {id(op): i for i, op in enumerate(ops)}
    producer: Dict[Value, Operation] = {}
    for op in ops:
        for r in op.results:
            producer[r] = op
    deps: Dict[int, Set[int]] = {}
    users: Dict[int, List[int]] = {}
    for op in ops:
        d = set()
        for v in inputs_of(op):
            p = producer.get(v)
            if p is not None and p is not op:
                d.add(id(p))
        deps[id(op)] = d
    for a, b in side_effect_chain(ops):
        deps[id(ops[b])].add(id(ops[a]))
    for k, d in deps.items():
        for p in d:
            users.setdefault(p, []).append(k)
    by_id = {id(op): op for op in ops}
    indeg = {k: len(v) for k, v in deps.items()}
    heap = [pos[k] for k, n in indeg.items() if n == 0]
    heapq.heapify(heap)
    out: List[Operation] = []
    while heap:
        i = heapq.heappop(heap)
        op = ops[i]
        out.append(op)
        for u in users.get(id(op), ()):
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(heap, pos[u])
    if len(out) != len(ops):
        stuck = [by_id[k].name for k, n in indeg.items() if n > 0][:5]
        raise RuntimeError(f"cycle among ops of region '{region.name}': {', '.join(stuck)}")
    region.ops = out


# --------------------------------------------------------------------------------------------
# Structural keys
# --------------------------------------------------------------------------------------------

def attr_key(v):
    """A hashable key for an attribute value (arrays by dtype, shape and bytes)."""
    if isinstance(v, np.ndarray):
        return ("array", str(v.dtype), v.shape, np.ascontiguousarray(v).tobytes())
    if isinstance(v, (list, tuple)):
        return tuple(attr_key(x) for x in v)
    if isinstance(v, float) and v != v:
        return ("nan",)
    return v


def region_key(r: Region, outer: Dict[Value, object]) -> tuple:
    """A structural key of a region: equal keys mean the regions compute the same thing.
    ``outer`` maps values from enclosing scopes to their keys."""
    names: Dict[Value, object] = dict(outer)
    for i, a in enumerate(r.args):
        names[a] = ("arg", i)
    parts: List[tuple] = [tuple(("arg", i, str(a.type.without_layout())) for i, a in enumerate(r.args))]
    for k, op in enumerate(r.ops):
        parts.append(op_key(op, names))
        for j, res in enumerate(op.results):
            names[res] = ("v", k, j)
    parts.append(tuple(names.get(v, ("ext", id(v))) for v in r.outputs))
    return tuple(parts)


def op_key(op: Operation, names: Dict[Value, object]) -> tuple:
    """A structural key of one op given keys of its operands."""
    return (op.name,
            tuple(names.get(v, ("ext", id(v))) for v in op.operands),
            tuple(sorted((k, attr_key(v)) for k, v in op.attrs.items())),
            tuple(str(t) for t in op.result_types),
            tuple(region_key(r, names) for r in op.regions))


def nbytes(t: TensorType) -> int:
    return t.size * t.dtype.itemsize


def op_kind(op: Operation) -> str:
    """What an op is called in decisions: a fusion by its ``name`` attribute, else its op name."""
    if op.name == "fusion" and op.attrs.get("name"):
        return op.attrs["name"]
    return op.name


def value_label(v: Value, names: Dict[Value, str]) -> str:
    """``%3 tanh (model.py:12)``: a value as the printed IR names it (``names``:
    ``hlo.ir.printer.value_names``), what computes it and the user's line it came from;
    ``%arg0`` for an argument."""
    name = names.get(v, "%?")
    op = v.op
    if op is None:
        return name
    return name + " " + op_kind(op) + (f" ({op.loc})" if op.loc is not None else "")


class Labels:
    """Readable names for ops during one pass run, for decision logs. An op of the IR the
    pass read is named as the printed IR names its first result, with its kind and the user's
    line (``%3 tanh (model.py:12)``; ``Labels.for_module``); an op the pass made is called
    ``exponential.3``, a fusion it made by its ``name`` attribute (``loop_fusion.0``)."""

    def __init__(self, names: Optional[Dict[Value, str]] = None):
        self.counter: Dict[str, int] = {}
        self.labels: Dict[int, Tuple[Operation, str]] = {}  # keeps the op alive: ids stay unique
        self.taken: Set[str] = set()
        self.names: Dict[Value, str] = names or {}

    def __call__(self, op: Operation) -> str:
        hit = self.labels.get(id(op))
        if hit is not None and hit[0] is op:
            return hit[1]
        if op.results and op.results[0] in self.names:
            label = value_label(op.results[0], self.names)
        elif op.name == "fusion" and op.attrs.get("name"):
            label = op.attrs["name"]
        else:
            n = self.counter.get(op.name, 0)
            self.counter[op.name] = n + 1
            label = f"{op.name}.{n}"
        self.labels[id(op)] = (op, label)
        return label

    @classmethod
    def for_module(cls, module) -> "Labels":
        """Labels that name ``module``'s ops as its printed text does (``@main``'s) and avoid
        the names of fusions already in it."""
        lab = cls(value_names(module.main) if "main" in module else None)
        for op in module.walk():
            if op.name == "fusion" and op.attrs.get("name"):
                lab.taken.add(op.attrs["name"])
        return lab

    def fresh(self, base: str) -> str:
        while True:
            n = self.counter.get(base, 0)
            self.counter[base] = n + 1
            name = f"{base}.{n}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    def set(self, op: Operation, label: str) -> None:
        self.labels[id(op)] = (op, label)
