"""Wide concatenates split (pass ``concat-split``), before layout assignment and fusion:

    y = concatenate(x0, x1, ..., x9999)          (10,000 operands, e.g. ``hnp.stack`` of scalars)
 -> g0 = concatenate(x0, ..., x63), ..., g156 = concatenate(x9984, ..., x9999)
    h0 = concatenate(g0, ..., g63), ..., h2 = concatenate(g128, ..., g156)
    y = concatenate(h0, h1, h2)

A concatenate with more than ``Options.max_concat_operands`` operands becomes a tree of
concatenates of at most that many operands each (the original op stays the root, so its
readers are untouched). Every element of a concatenate's kernel selects among all its operands
(the elemental emitter's select chain, which evaluates each operand's fused producers), so a
kernel built around a concatenate of N operands does N times the work of a copy per element
and is one LLVM function of N operands' code: the work and LLVM's time on it grow with the
square of N. Bounded fan-in keeps both in proportion to N (the tree adds one copy of the data a
level: 3 levels for 10,000 operands). Vertical fusion keeps the levels apart
(``Options.max_concat_operands`` bounds the concatenate operands of a kernel), so each group is a
kernel of its own with its operands' producers fused into it. Each split is logged.

The pass runs after simplification, which would flatten the tree again
(``algebraic.concatenate_simplify``).
"""
from __future__ import annotations

from typing import List

from hlo.ir.core import Module, Operation, Region, Value

from .base import MainPass, register_pass
from .util import control_bodies


def _concat(values: List[Value], dim: int, loc) -> Operation:
    t = values[0].type
    shape = list(t.shape)
    shape[dim] = sum(v.type.shape[dim] for v in values)
    return Operation("concatenate", values, {"dimension": dim}, [t.with_shape(shape)], (), loc)


@register_pass("concat-split", "split concatenates of more than max_concat_operands operands into a tree")
class ConcatSplit(MainPass):
    name = "concat-split"
    decision_prefix = "concat-split"

    def run_main(self, module: Module) -> bool:
        limit = max(2, self.options.max_concat_operands)
        changed = False
        for region in list(control_bodies(module.main.body)):
            changed |= self._split(region, limit)
        return changed

    def _split(self, region: Region, limit: int) -> bool:
        if not any(op.name == "concatenate" and len(op.operands) > limit for op in region.ops):
            return False
        ops: List[Operation] = []
        for op in region.ops:
            if op.name == "concatenate" and len(op.operands) > limit:
                dim = op.attrs["dimension"]
                level = list(op.operands)
                made = 0
                while len(level) > limit:
                    nxt = []
                    for i in range(0, len(level), limit):
                        group = level[i:i + limit]
                        if len(group) == 1:
                            nxt.append(group[0])
                            continue
                        g = _concat(group, dim, op.loc)
                        g.parent = region
                        ops.append(g)
                        made += 1
                        nxt.append(g.results[0])
                    level = nxt
                self.log(f"split a concatenate of {len(op.operands)} operands ({op.results[0].type}) "
                         f"into {made + 1} of at most {limit} operands each (max_concat_operands): "
                         "each element of a concatenate's kernel evaluates all its operands, so "
                         "its work and LLVM's time grow with the square of its width")
                op.operands = level
            ops.append(op)
        region.ops = ops
        return True
