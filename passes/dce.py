"""Dead code elimination: ops whose results nothing reads are removed (every op of the IR is
pure but the side-effecting ones, host callbacks and the loops and branches that hold one,
which stay), in every region, innermost first; private functions nothing calls are removed
too."""
from __future__ import annotations

from typing import Dict

from hlo.ir.core import Module, Region, Value

from .base import Pass, register_pass
from .util import has_side_effect, inputs_of


def dce_region(region: Region) -> bool:
    changed = False
    for op in region.ops:
        for r in op.regions:
            changed |= dce_region(r)
    counts: Dict[Value, int] = {}
    for v in region.outputs:
        counts[v] = counts.get(v, 0) + 1
    ins = {}
    for op in region.ops:
        ins[id(op)] = inputs_of(op)
        for v in ins[id(op)]:
            counts[v] = counts.get(v, 0) + 1
    keep = []
    for op in reversed(region.ops):
        if op.results and all(counts.get(r, 0) == 0 for r in op.results) \
                and not has_side_effect(op):
            changed = True
            for v in ins[id(op)]:
                counts[v] -= 1
            continue
        keep.append(op)
    if changed:
        keep.reverse()
        region.ops = keep
    return changed


def remove_unused_functions(module: Module, entry: str = "main") -> bool:
    if entry not in module:
        return False
    live = {entry}
    work = [entry]
    while work:
        fn = module[work.pop()]
        for op in fn.walk():
            if op.name == "call" and op.attrs["callee"] not in live:
                live.add(op.attrs["callee"])
                work.append(op.attrs["callee"])
    dead = [n for n, f in module.functions.items() if n not in live and f.visibility == "private"]
    for n in dead:
        module.remove(n)
    return bool(dead)


@register_pass("dce", "dead code elimination (unused ops and private functions)")
class DeadCodeElimination(Pass):
    name = "dce"

    def __init__(self, config=None):
        pass

    def run(self, module: Module) -> bool:
        changed = False
        for fn in module.functions.values():
            changed |= dce_region(fn.body)
        changed |= remove_unused_functions(module)
        return changed
