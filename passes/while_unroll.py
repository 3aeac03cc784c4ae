"""Unrolling (pass ``while-unroll``): a ``while`` loop whose trip count is known before it runs
(``trip_count.known_trip_count``: a ``fori_loop`` with constant bounds, a ``scan``) becomes that
many copies of its body, one after the other, where the copies stay small:

- at most ``MAX_TRIP_COUNT`` steps, and
- steps x the body's ops (those of nested regions counted) at most ``MAX_UNROLLED_OPS``;
- its condition calls nothing back on the host (unrolled, the condition no longer runs);
- its body has a product or reads / writes at an index (``WORTH_IT``): what unrolling removes
  is the per-step machinery around those (a product's operand copied out of ``xs[i]``, the
  index's kernels). A body of elementwise ops only is kept: fusion would merge its steps into
  kernels as long as ``Options.max_fusion_cost`` allows (before that bound, 32 steps of five
  tanh-and-scale ops made one kernel that took 10 s to compile for cuda), while the CUDA
  runtime already puts a counted loop's steps into one graph.

Each copy reads the previous copy's results where the body read its arguments; the loop's
results are the last copy's (its initial values for a loop of no steps). The counter then is a
chain of constant additions that constant folding turns into constants, so ``xs[i]`` becomes a
slice at a constant offset (``algebraic.gather_of_constant``), the state needs no copy back
(every step's state is a value of its own), and fusion sees across steps.

On by default for cuda (``Options.while_unroll``), where every step of a loop otherwise launches
its counter's and its index's kernels and a copy of the state besides the body's own kernels
(an RNN cell of two products and tanh: 9 launches a step, 4 of them moving a few bytes); off
for cpu and the interpreter, where a step costs no launch. The decision log says which loops
were unrolled and why the others were not.
"""
from __future__ import annotations

from typing import Dict

from hlo.ir.core import Module, Operation, Region, Value

from .base import MainPass, register_pass
from .trip_count import known_trip_count
from .util import CONTROL_FLOW, finish_splice, has_side_effect, splice_copy

# XLA's while-loop unroller uses the same kind of bounds (64 steps, 800 instructions).
MAX_TRIP_COUNT = 64
MAX_UNROLLED_OPS = 1024
WORTH_IT = frozenset({"dot_general", "gather", "dynamic_slice", "dynamic_update_slice", "scatter"})


def body_size(region: Region) -> int:
    """The ops of ``region``, those in nested regions (loop bodies, reductions' bodies)
    included."""
    return sum(1 for _ in region.walk())


@register_pass("while-unroll", "unroll loops with a known trip count into straight-line copies of their body")
class WhileUnroll(MainPass):
    name = "while-unroll"
    decision_prefix = "while-unroll"

    def run_main(self, module: Module) -> bool:
        if not self.options.while_unroll_for(self.config.target):
            return False
        return self._region(module.main.body)

    def _region(self, region: Region) -> bool:
        changed = False
        out = []
        mapping: Dict[Value, Value] = {}
        for op in region.ops:
            if mapping and any(v in mapping for v in op.operands):
                op.operands = [mapping.get(v, v) for v in op.operands]
            if op.name in CONTROL_FLOW:
                for r in op.regions:   # inner loops first: the outer body's size counts them unrolled
                    changed |= self._region(r)
            if op.name == "while" and not self._refused(op):
                vals = self._unroll(op, region, out)
                mapping.update(zip(op.results, vals))
                changed = True
                continue
            out.append(op)
        if changed:   # (a body may return an earlier unrolled loop's result as it is: a chain)
            finish_splice(region, out, mapping)
        return changed

    def _refused(self, op: Operation) -> bool:
        """Whether ``op`` stays a loop; the reason goes to the decision log."""
        where = f"while at {op.loc}" if op.loc is not None else "while"
        n = known_trip_count(op)
        cond, body = op.regions
        why = ""
        if n is None:
            why = "its trip count is not known before it runs"
        elif n > MAX_TRIP_COUNT:
            why = f"{n} steps, more than {MAX_TRIP_COUNT}"
        elif n * body_size(body) > MAX_UNROLLED_OPS:
            why = f"{n} steps x {body_size(body)} ops, more than {MAX_UNROLLED_OPS}"
        elif any(has_side_effect(o) for o in cond.ops):
            why = "its condition calls back into the host"
        elif not any(o.name in WORTH_IT for o in body.walk()):
            why = ("its body has no product and no indexing, which unrolling would take out of "
                   "the steps (fused across steps, its ops would make one long kernel)")
        if why:
            self._say(f"kept {where}: {why}")
            return True
        self._say(f"unrolled {where}: {n} steps of {body_size(body)} ops")
        return False

    def _say(self, line: str) -> None:
        """Log ``line`` unless an earlier round of the simplify group has (a kept loop is
        looked at again every round)."""
        if f"{self.decision_prefix}: {line}" not in self.config.decisions:
            self.log(line)

    @staticmethod
    def _unroll(op: Operation, region: Region, out: list) -> list:
        """Append ``op``'s body ``known_trip_count(op)`` times to ``out``; the loop's results."""
        body = op.regions[1]
        vals = list(op.operands)
        for _ in range(known_trip_count(op)):
            vmap: Dict[Value, Value] = dict(zip(body.args, vals))
            splice_copy(body.ops, vmap, region, out, op.loc)
            vals = [vmap.get(v, v) for v in body.outputs]
        return vals
