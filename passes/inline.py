"""Inlining: every ``call`` is replaced by a copy of its callee's body, so that the whole
program is one function that the other passes see at once (the verifier guarantees there is no
recursion). Private functions left without callers are removed. An ``if`` or ``case`` whose
predicate or index is a constant is replaced by the branch it takes (the frontend traces
``custom_vjp``, ``custom_jvp`` and ``checkpoint`` functions as one-branch ``case`` ops)."""
from __future__ import annotations

from typing import Dict, Optional

from hlo.ir.core import Module, Region, Value

from .base import Pass, register_pass
from .dce import remove_unused_functions
from .util import finish_splice, splice_copy


def _inline_region(region: Region, module: Module) -> bool:
    changed = False
    out = []
    mapping: Dict[Value, Value] = {}
    for op in region.ops:
        if mapping and any(v in mapping for v in op.operands):
            op.operands = [mapping.get(v, v) for v in op.operands]
        for r in op.regions:
            changed |= _inline_region(r, module)
        if op.name == "call" and op.attrs.get("callee") in module:
            callee = module[op.attrs["callee"]]
            vmap: Dict[Value, Value] = dict(zip(callee.args, op.operands))
            # (calls inside the callee are inlined when this region is visited again)
            splice_copy(callee.body.ops, vmap, region, out, op.loc)
            for res, v in zip(op.results, callee.body.outputs):
                mapping[res] = vmap.get(v, v)
            changed = True
            continue
        branch = _constant_branch(op)
        if branch is not None:
            vmap = {}
            splice_copy(branch.ops, vmap, region, out)
            for res, v in zip(op.results, branch.outputs):
                mapping[res] = vmap.get(v, v)
            changed = True
            continue
        out.append(op)
    if changed:
        finish_splice(region, out, mapping)
    return changed


def _constant_branch(op) -> Optional[Region]:
    """The branch an ``if`` / ``case`` with a constant selector takes (``case`` sends an index
    out of range to its last branch), or None."""
    if op.name not in ("if", "case") or op.operands[0].is_arg:
        return None
    src = op.operands[0].owner
    if src.name != "constant":
        return None
    k = int(src.attrs["value"])
    if op.name == "if":
        return op.regions[0] if k else op.regions[1]
    return op.regions[k] if 0 <= k < len(op.regions) else op.regions[-1]


@register_pass("inline", "inline calls; drop private functions nothing calls")
class Inline(Pass):
    name = "inline"

    def __init__(self, config=None):
        pass

    def run(self, module: Module) -> bool:
        changed = False
        for fn in module.functions.values():
            while _inline_region(fn.body, module):
                changed = True
        changed |= remove_unused_functions(module)
        return changed
