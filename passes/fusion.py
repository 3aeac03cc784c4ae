"""Vertical fusion (pass ``fusion``): producers are fused into their consumers, XLA-style.

Consumers are visited from the end of ``main`` to its start; each tries its producers, latest
first, and a merge is kept when the merged region is a valid fusion (``fusion_kinds``):

- loop fusion of elementwise and data-movement chains;
- input fusion of producers into reductions (softmax's exp into its sum, layer norm's square
  into its variance) and of reductions into the per-row work that reads them back (the whole of
  a softmax or a layer norm becomes one row kernel);
- output fusion of a dot with its epilogue (bias, activation, residual) and cheap operand
  prologues (transposes, slices); on targets that allow it, a layer norm into the dot's operand.

A producer that other ops also read is copied into the consumer only when that is cheap: its
per-element work is within ``Options.duplication_limit`` units (a cheap op is 1, an expensive one
``EXPENSIVE_COST``), it holds no dot or reduction, and the copy reads no more bytes than the
producer's result would have. Expensive producers are not fused where the consumer broadcasts
them (each element would be recomputed many times). Every merge and every refusal is logged
with its reason in the decision log (``Optimized.decisions``, the dump's
``fusion-decisions.txt``).

At the end every remaining loop-fusible op or reduction that is not free (constants, and
reshapes/transposes that layout assignment made bitcasts) is wrapped in a fusion of its own, so
backends see kernels only as ``fusion`` ops, ``dot_general`` ops, or opaque ops (gather,
scatter, sort, while, ...).
"""
from __future__ import annotations

from typing import List, Optional, Set

from hlo.ir import ops as op_table
from hlo.ir.core import Module, Operation, Region, Value

from .base import MainPass, register_pass
from .fusion_build import TopLevel, absorb, commit, preview
from .fusion_kinds import NotFusible, analyze
from .layout import is_bitcast
from .options import PassConfig
from .util import (
    EXPENSIVE,
    MOVEMENT,
    Labels,
    control_bodies,
    free_values,
    inputs_of,
    is_loop_fusible,
    is_scalar_body,
    is_splat_constant,
    nbytes,
)

EXPENSIVE_COST = 16
# An input kernel may do at most this many times the work of its ops (see recompute_factor).
RECOMPUTE_LIMIT = 3.0
_WINDOWS = op_table.with_trait(op_table.WINDOW_OF_OPERAND)


def op_cost(op: Operation) -> int:
    """Per-element work of one op in cost units."""
    if op.name in EXPENSIVE:
        return EXPENSIVE_COST
    if op.name in MOVEMENT or op.name == "constant":
        return 0
    return 1


def unit_ops(u: Operation) -> List[Operation]:
    """The ops a unit computes: a fusion's region ops, or the op itself."""
    if u.name == "fusion":
        return list(u.regions[0].walk())
    return [u]


def unit_cost(u: Operation) -> int:
    return sum(op_cost(op) for op in unit_ops(u))


def unit_concat_operands(u: Operation) -> int:
    """The operands of the concatenates a unit computes, together (``max_concat_operands``)."""
    return sum(len(op.operands) for op in unit_ops(u) if op.name == "concatenate")


def fusible_unit(op: Operation) -> bool:
    """An op the fusion passes may merge: loop-fusible ops, reductions, dots, and fusions that
    are not multi."""
    if op.name == "fusion":
        return op.attrs.get("kind") != "multi"
    if op.name == "reduce":
        return is_scalar_body(op.regions[0]) and bool(op.attrs["dimensions"]) and not free_values(op)
    return op.name == "dot_general" or is_loop_fusible(op)


def has_expensive_before_reduce(u: Operation) -> bool:
    """The unit holds an expensive op that no reduction precedes (so it is per element, not per
    row)."""
    ops = unit_ops(u)
    red: Set[Value] = set()
    for op in ops:
        if op.name == "reduce" or any(v in red for v in op.operands):
            red.update(op.results)
            continue
        if op.name in EXPENSIVE:
            return True
    return False


def consumer_broadcasts(c: Operation, values: List[Value]) -> bool:
    """Does ``c`` read any of ``values`` through a broadcast that makes more elements (or as a
    dot operand)?"""
    if c.name == "broadcast_in_dim":
        return c.operands[0] in values and c.results[0].type.size > c.operands[0].type.size
    if c.name == "dot_general":
        return any(v in values for v in c.operands)
    if c.name != "fusion":
        return False
    body = c.regions[0]
    args = {a for a, v in zip(body.args, c.operands) if v in values}
    reach = set(args)
    for op in body.ops:
        if not any(v in reach for v in op.operands):
            continue
        if op.name == "broadcast_in_dim" and op.results[0].type.size > op.operands[0].type.size:
            return True
        if op.name == "dot_general":
            return True
        if op.name in MOVEMENT:
            reach.update(op.results)
    return False


def accessed_bytes(unit: Operation, v: Value) -> int:
    """Bytes of input ``v`` that ``unit`` touches: what its slices read when it only slices
    ``v``, else all of it."""
    full = nbytes(v.type)
    if unit.name in _WINDOWS and unit.operands[0] is v:
        return min(full, nbytes(unit.results[0].type))
    if unit.name != "fusion":
        return full
    body = unit.regions[0]
    args = [a for a, x in zip(body.args, unit.operands) if x is v]
    total = 0
    for op in body.walk():
        for a in args:
            if a in op.operands:
                if op.name in _WINDOWS and op.operands[0] is a:
                    total += nbytes(op.results[0].type)
                else:
                    return full
    return min(full, total) if args else full


def bytes_delta(p: Operation, c: Operation):
    """(extra, saved): bytes of ``p``'s inputs that ``c`` would newly read if ``p`` were fused
    into it, and bytes of ``p``'s results that ``c`` would then no longer read."""
    c_inputs = set(inputs_of(c))
    extra = sum(accessed_bytes(p, v) for v in inputs_of(p) if v not in c_inputs)
    saved = sum(accessed_bytes(c, r) for r in p.results if r in c_inputs)
    return extra, saved


def recompute_factor(region: Region) -> float:
    """How many times its ops' work a fused region does when emitted: each reduction (and each
    output) is computed once, from the elementwise ops before it, which are evaluated again for
    every reduction and output that reads them, as the elemental emitter does. A chain of
    reductions read back by the elements of the next step (``x = f(x - x.sum())`` repeated) does
    quadratic work in its length; a softmax or layer norm about 1-2 times its ops' work."""
    produced = {r: op for op in region.ops for r in op.results}

    def cone(roots) -> Set[int]:
        seen: Set[int] = set()
        stack = [produced[v] for v in roots if v in produced]
        while stack:
            op = stack.pop()
            if id(op) in seen:
                continue
            seen.add(id(op))
            if op.name != "reduce":  # a reduction's result is computed once; stop there
                stack.extend(produced[v] for v in op.operands if v in produced)
        return seen

    work = {id(op): op_cost(op) * max(op.results[0].type.size if op.name != "reduce"
                                      else op.operands[0].type.size, 1)
            for op in region.ops if op.results}
    direct = sum(work.values())
    if not direct:
        return 1.0
    emitted = 0
    for op in region.ops:
        if op.name == "reduce":
            emitted += work[id(op)] + sum(work[i] for i in cone(op.operands))
    emitted += sum(work[i] for i in cone([v for v in region.outputs
                                           if v not in produced or produced[v].name != "reduce"]))
    return emitted / direct


class FusionPass(MainPass):
    """What the fusion passes share: the decision log (``MainPass``), whether the target takes
    a row-wise prologue in a dot's operand, and the kernel names (``self.labels``) that the
    log uses. Subclasses implement ``fuse(region)`` on ``main``'s body."""

    def __init__(self, config: PassConfig = None):
        super().__init__(config)
        self.allow_row = self.options.row_prologue_for(self.config.target)

    def run_main(self, module: Module) -> bool:
        self.labels = Labels.for_module(module)
        changed = False
        for region in control_bodies(module.main.body):
            changed |= self.fuse(region)
        return changed

    def fuse(self, region: Region) -> bool:
        raise NotImplementedError(f"pass {type(self).__name__} does not implement fuse()")


@register_pass("fusion", "vertical fusion: loop, input (reduction) and output (dot epilogue) fusion")
class VerticalFusion(FusionPass):
    name = "fusion"
    decision_prefix = "fusion"
    # Grow a loop kernel by one loop-fusible producer in place (``fusion_build.absorb``) rather
    # than building and analyzing the merged region (``preview``); both give the same IR.
    grow_in_place = True

    def fuse(self, region: Region) -> bool:
        self.top = TopLevel(region, deferred=True)
        self.declined = {}
        # Each unit's (cost, concatenate operands), kept for the fusions this pass makes (the
        # sums of their units'), so a merge does not walk the kernel it grows: id -> (op, both).
        self.measured = {}
        changed = False
        progress = True
        while progress:
            progress = False
            self.top.sync()
            for c in reversed(list(region.ops)):
                if not self.top.alive(c):
                    continue
                if not fusible_unit(c) or c.name == "constant":
                    continue
                while True:
                    new = self._fuse_into(c)
                    if new is None:
                        break
                    c = new
                    progress = changed = True
        self.top.sync()
        changed |= self._wrap_singles(region)
        self.top.sync()
        return changed

    # -- one consumer -------------------------------------------------------------------------
    def _measure(self, u: Operation):
        """(``unit_cost(u)``, ``unit_concat_operands(u)``); constants cost nothing."""
        m = self.measured.get(id(u))
        if m is None:
            m = (u, (0, 0) if u.name == "constant" else (unit_cost(u), unit_concat_operands(u)))
            self.measured[id(u)] = m
        return m[1]

    def _outputs_after(self, p: Operation, c: Operation, duplicate: bool) -> int:
        """How many outputs the kernel of ``p`` fused into ``c`` would have (``preview``'s
        rule: the results something else reads or the function returns)."""
        top = self.top
        units = (p, c)
        n = 0
        for u in units:
            if u is p and duplicate:
                continue
            for r in u.results:
                if r in top.returned or any(x is not p and x is not c for x in top.users.get(r, ())):
                    n += 1
        return n

    def _fuse_into(self, c: Operation) -> Optional[Operation]:
        for p in self.top.producers(c):
            new = self._try(p, c)
            if new is not None:
                return new
        return None

    def _try(self, p: Operation, c: Operation) -> Optional[Operation]:
        L = self.labels
        top = self.top
        if p.name == "constant":
            # A constant is copied into each reader (never a kernel's output), so a refusal
            # depends on the two alone; listing its other readers per consumer (a splat that
            # CSE shares among thousands of kernels) would cost their count each time.
            other = next((u for u in top.users.get(p.results[0], ()) if u is not c), None)
            others = [other] if other is not None else []
            key = (id(p), id(c))
        else:
            others = [u for r in p.results for u in top.users.get(r, ()) if u is not c]
            # A refusal depends only on the producer, the consumer and who else reads the producer.
            key = (id(p), id(c), frozenset(map(id, others)))
        if key in self.declined:
            return None

        def decline(why: str):
            self.log(f"not fused: {L(p)} -> {L(c)}: {why}")
            self.declined[key] = (p, c, others)  # holds the ops: their ids stay unique
            return None

        if p.name == "constant":
            if not is_splat_constant(p):
                return decline("a constant that is not a splat stays in the constants table")
        elif not fusible_unit(p):
            return decline(f"the producer is a '{p.name}', which runs as its own kernel")
        (p_cost, p_cat), (c_cost, c_cat) = self._measure(p), self._measure(c)
        cost = p_cost + c_cost
        if cost > self.options.max_fusion_cost:
            return decline(f"the kernel would do {cost} units of work an element, more than "
                           f"{self.options.max_fusion_cost} (max_fusion_cost): compile time grows "
                           f"faster than a kernel's size")
        if p_cat + c_cat > self.options.max_concat_operands:
            return decline(f"the kernel's concatenates would take {p_cat + c_cat} operands, more "
                           f"than {self.options.max_concat_operands} (max_concat_operands): each "
                           "element of such a kernel evaluates every operand")
        shared = bool(others) or any(r in top.returned for r in p.results)
        n_out = self._outputs_after(p, c, shared)
        if n_out > self.options.max_kernel_outputs:
            return decline(f"the kernel would have {n_out} outputs, more than "
                           f"{self.options.max_kernel_outputs} (max_kernel_outputs): LLVM's time "
                           "on a kernel grows faster than its outputs")
        into_dot = p.name != "constant" and self._feeds_dot_operand(c, p)
        dup = []
        if shared:
            if p.name != "constant":
                why = self._why_not_duplicate(p, c)
                if why:
                    return decline(why)
                if into_dot and p.name not in MOVEMENT:
                    # a dot's kernel writes an operand computed in its fusion to a scratch copy
                    # first (movement it reads in place): a copy of the producer in each of its
                    # consumers would be one such pass each, where the producer's own kernel
                    # makes one (the train step's relu(h), read by two products, had been
                    # computed and copied twice)
                    return decline("the producer has other consumers and would be computed "
                                   "into a dot's operand, which the dot's kernel writes to a "
                                   "copy first: one pass per consumer instead of one")
            dup = [p]
        if into_dot and not shared:
            extra, saved = bytes_delta(p, c)
            if extra > saved:
                return decline(f"the consumer is a dot whose kernel cannot take this producer (its "
                               f"operand would read {extra} bytes of the producer's inputs instead "
                               f"of {saved} bytes of its result)")
        if p.name != "constant" and has_expensive_before_reduce(p) and \
                consumer_broadcasts(c, list(p.results)):
            return decline("the consumer reads each element of the producer many times (broadcast "
                           "or dot operand), which would recompute its expensive work")
        if self.grow_in_place and c.name == "fusion" and c.attrs.get("kind") == "loop" and \
                not p.regions and is_loop_fusible(p):
            # A loop kernel that takes one more loop-fusible op stays a loop kernel with the
            # same outputs: grow it in place (no copy, no re-analysis).
            cand = absorb(top, p, c, bool(dup))
            kind = "loop"
        else:
            cand = preview(top, [p, c], "loop", dup)
            try:
                kind = analyze(cand.region, self.allow_row).kind
            except NotFusible as e:
                if into_dot:
                    return decline(f"the consumer is a dot whose kernel cannot take this producer ({e})")
                return decline(str(e))
            if kind == "input":
                factor = recompute_factor(cand.region)
                if factor > RECOMPUTE_LIMIT:
                    return decline(f"the kernel would do {factor:.1f} times the work of its ops "
                                   f"(limit {RECOMPUTE_LIMIT:g}): each reduction in it evaluates "
                                   "the elementwise ops before it again")
        fresh = not (c.name == "fusion" and c.attrs.get("kind") == kind and c.attrs.get("name"))
        name = L.fresh(f"{kind}_fusion") if fresh else c.attrs["name"]
        new = commit(top, [p, c], cand, kind, name, dup)
        self.measured[id(new)] = (new, (cost, p_cat + c_cat))
        how = "copied into" if dup else "into"
        what = {"loop": "loop fusion", "input": "input fusion (reduction)",
                "output": "output fusion (dot with prologue/epilogue)"}[kind]
        if p.name != "constant" or (fresh and c.name != "fusion"):
            # (a splat constant is logged only where it starts a kernel: the line names the
            # op that the new kernel's name stands for from then on)
            self.log(f"fused {L(p)} {how} {L(c)} -> {name} ({what})")
        L.set(new, name)
        return new

    def _feeds_dot_operand(self, c: Operation, p: Operation) -> bool:
        if c.name == "dot_general":
            return any(v in c.operands for v in p.results)
        if c.name != "fusion" or c.attrs.get("kind") in ("loop", "input"):
            return False  # (loop and input kernels hold no dot: the verifier checks kinds)
        body = c.regions[0]
        dot = next((op for op in body.ops if op.name == "dot_general"), None)
        if dot is None:
            return False
        args = {a for a, v in zip(body.args, c.operands) if v in p.results}
        want = set(dot.operands)
        for op in reversed(body.ops):
            if any(r in want for r in op.results):
                want.update(op.operands)
        return bool(args & want)

    def _why_not_duplicate(self, p: Operation, c: Operation) -> str:
        ops = unit_ops(p)
        if any(op.name == "dot_general" for op in ops):
            return "the producer is a dot that other ops also read; a dot is never computed twice"
        if any(op.name == "reduce" for op in ops):
            return "the producer holds a reduction that other ops also read; duplicating it " \
                   "would repeat the reduction"
        cost = self._measure(p)[0]
        if cost > self.options.duplication_limit:
            return (f"other ops also read the producer, and copying it would repeat {cost} units "
                    f"of work per element (limit {self.options.duplication_limit})")
        extra, saved = bytes_delta(p, c)
        if extra > saved:
            return (f"copying the producer into the consumer would increase bytes moved (it would "
                    f"read {extra} bytes of the producer's inputs instead of {saved} bytes of its "
                    "result)")
        return ""

    # -- single ops -------------------------------------------------------------------------
    def _wrap_singles(self, region: Region) -> bool:
        changed = False
        for op in list(region.ops):
            if op.name in ("constant", "fusion", "dot_general") or not fusible_unit(op):
                continue
            if is_bitcast(op):
                continue
            cand = preview(self.top, [op], "loop")
            try:
                kind = analyze(cand.region, self.allow_row).kind
            except NotFusible:
                continue
            name = self.labels.fresh(f"{kind}_fusion")
            commit(self.top, [op], cand, kind, name)
            changed = True
        return changed
