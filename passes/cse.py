"""Common subexpression elimination: two ops with the same name, operands, attributes, result
types and (structurally equal) regions compute the same values, so the later one is replaced by
the earlier. Values of an enclosing region are available inside nested regions (an expression
computed before a while loop is reused in its body), not the other way round; fused regions
and reduction bodies see only themselves. Side-effecting ops (host callbacks, and loops or
branches holding one) are never merged. Constants compare
by their exact bytes, so 0.0 and -0.0, or two NaN payloads, stay apart. Ops whose regions
hold more than ``KEY_MAX_OPS`` ops are not merged (keying them would cost the square of a deep
nest's size)."""
from __future__ import annotations

from typing import Dict, List, Tuple

from hlo.ir import ops
from hlo.ir.core import Module, Region, Value

from .base import Pass, register_pass
from .util import has_side_effect, op_key, replace_values

OPEN_REGIONS = ops.with_trait(ops.OPEN_REGIONS)


class _Scope:
    def __init__(self, parent=None):
        self.table: Dict[tuple, List[Value]] = {}
        self.parent = parent

    def lookup(self, key):
        s = self
        while s is not None:
            hit = s.table.get(key)
            if hit is not None:
                return hit
            s = s.parent
        return None


def _resolve(v: Value, canon: Dict[Value, Value]) -> Value:
    while v in canon:
        v = canon[v]
    return v


# An op with regions is keyed (and so merged) only when its regions hold at most this many ops
# in all: its key spells out its regions, so keying every op of a deep nest (control flow
# inside control flow) would cost the square of the nest's size.
KEY_MAX_OPS = 256


def _cse_region(region: Region, scope: _Scope, canon: Dict[Value, Value]) -> Tuple[bool, int]:
    """(whether anything changed, the number of ops in ``region`` at any depth)."""
    changed = False
    keep = []
    names: Dict[Value, object] = {}
    size = 0
    for op in region.ops:
        if any(v in canon for v in op.operands):
            op.operands = [_resolve(v, canon) for v in op.operands]
        op_size = 1
        for r in op.regions:
            if canon:
                # Rewrite reads of replaced outer values first, so the key sees canonical values.
                for inner in r.walk():
                    if any(v in canon for v in inner.operands):
                        inner.operands = [_resolve(v, canon) for v in inner.operands]
            # Only bodies that may read enclosing values (while, if, case) see the outer
            # expressions; other regions (fusions, reduce bodies) stay isolated.
            inner_scope = _Scope(scope) if op.name in OPEN_REGIONS else _Scope()
            inner_changed, inner_size = _cse_region(r, inner_scope, canon)
            changed |= inner_changed
            op_size += inner_size
        size += op_size
        if not op.results or op_size > KEY_MAX_OPS or has_side_effect(op):
            keep.append(op)
            continue
        # Operands are named by identity, so equal keys mean equal operands.
        key = op_key(op, names)
        hit = scope.lookup(key)
        if hit is not None and len(hit) == len(op.results):
            for a, b in zip(op.results, hit):
                canon[a] = b
            changed = True
            continue
        scope.table[key] = list(op.results)
        keep.append(op)
    if changed:
        region.ops = keep
        region.outputs = [_resolve(v, canon) for v in region.outputs]
    return changed, size


def cse_region(region: Region) -> bool:
    canon: Dict[Value, Value] = {}
    changed, _ = _cse_region(region, _Scope(), canon)
    if canon:
        resolved = {k: _resolve(k, canon) for k in canon}
        replace_values(region, resolved)
    return changed


@register_pass("cse", "common subexpression elimination")
class CommonSubexpressionElimination(Pass):
    name = "cse"

    def __init__(self, config=None):
        pass

    def run(self, module: Module) -> bool:
        changed = False
        for fn in module.functions.values():
            changed |= cse_region(fn.body)
        return changed
