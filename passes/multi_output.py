"""Multi-output fusion (pass ``multi-output-fusion``), after vertical fusion:

- siblings: kernels that read the same input and are independent are merged into one kernel
  that reads the input once and has several outputs (a mean and a variance; the gradients of a
  bias and of a scale). The merged region must be a valid loop or input fusion (same iteration
  space, same reduced dimensions);
- producer-consumer: a producer that vertical fusion left alone because other kernels also
  read it (a dot result needed by an activation and by the backward pass) is merged into one
  consumer, and the merged kernel also outputs the producer's value for the others.

Merges never create a cycle (no path between the two kernels through a third one) and are
logged with their reasons, as are refusals. No merge makes a kernel of more than
``Options.max_kernel_outputs`` outputs or whose concatenates take more than
``Options.max_concat_operands`` operands; a kernel at either bound is kept apart from its
siblings (one log line).

Each round finds the next merge from scratch (reachability changes with every merge), except
for siblings that no other kernel reads (a program's outputs): merging two such sinks adds no
path between any other kernels, so the round goes on pairing them, and a program with
thousands of outputs read from one input compiles in one round, not one round per output.
"""
from __future__ import annotations

from hlo.ir.core import Operation, Region

from .base import register_pass
from .fusion import FusionPass, fusible_unit, unit_concat_operands
from .fusion_build import TopLevel, commit, preview
from .fusion_kinds import NotFusible, analyze
from .layout import is_bitcast
from .util import OpGraph, nbytes


class Reach(OpGraph):
    """Reachability between the top-level ops of a region (bitsets over positions)."""

    def __init__(self, region: Region):
        super().__init__(region)
        n = len(self.ops)
        self.down = [0] * n  # ops reachable from i (excluding i)
        for i in range(n - 1, -1, -1):
            m = 0
            for u in self.users[i]:
                m |= (1 << u) | self.down[u]
            self.down[i] = m

    def reaches(self, a: Operation, b: Operation) -> bool:
        return bool(self.down[self.pos[id(a)]] >> self.pos[id(b)] & 1)

    def independent(self, a: Operation, b: Operation) -> bool:
        return not self.reaches(a, b) and not self.reaches(b, a)

    def path_through_other(self, p: Operation, c: Operation) -> bool:
        """Is there a path p -> x -> ... -> c with x not c (merging p and c would be a cycle)?"""
        ip, ic = self.pos[id(p)], self.pos[id(c)]
        for u in self.users[ip]:
            if u != ic and (self.down[u] >> ic & 1):
                return True
        return False


def _kernel(op: Operation) -> bool:
    return op.name != "constant" and not is_bitcast(op) and fusible_unit(op)


@register_pass("multi-output-fusion", "sibling and producer-consumer multi-output fusion")
class MultiOutputFusion(FusionPass):
    name = "multi-output-fusion"
    decision_prefix = "multi-output"

    def fuse(self, region: Region) -> bool:
        self.failed = {}
        self.concat_operands = {}  # id -> (op, unit_concat_operands(op)), kept for merges
        changed = False
        while self._producer_consumer(region) or self._siblings(region):
            changed = True
        return changed

    def _concats(self, u: Operation) -> int:
        m = self.concat_operands.get(id(u))
        if m is None:
            m = self.concat_operands[id(u)] = (u, unit_concat_operands(u))
        return m[1]

    def _saturated(self, u: Operation) -> str:
        """Why ``u`` takes no sibling (it is at a width bound), or ''."""
        o = self.options
        if len(u.results) >= o.max_kernel_outputs:
            return f"it has {len(u.results)} outputs (max_kernel_outputs {o.max_kernel_outputs})"
        if self._concats(u) >= o.max_concat_operands:
            return (f"its concatenates take {self._concats(u)} operands (max_concat_operands "
                    f"{o.max_concat_operands})")
        return ""

    def _merge(self, top: TopLevel, a: Operation, b: Operation, why: str):
        """The merged kernel of ``a`` and ``b``, or None (the refusal is logged)."""
        L = self.labels
        o = self.options
        key = (id(a), id(b))
        if key in self.failed:
            return None  # the same two kernels cannot form a valid fusion (kept: ids stay unique)
        cat = self._concats(a) + self._concats(b)
        if cat > o.max_concat_operands:
            self.log(f"not merged: {L(a)} and {L(b)} ({why}): their concatenates would take {cat} "
                     f"operands, more than {o.max_concat_operands} (max_concat_operands)")
            self.failed[key] = (a, b)
            return None
        cand = preview(top, [a, b], "loop")
        if len(cand.replaced) > o.max_kernel_outputs:
            self.log(f"not merged: {L(a)} and {L(b)} ({why}): the kernel would have "
                     f"{len(cand.replaced)} outputs, more than {o.max_kernel_outputs} "
                     "(max_kernel_outputs): LLVM's time on a kernel grows faster than its outputs")
            self.failed[key] = (a, b)
            return None
        try:
            info = analyze(cand.region, self.allow_row)
        except NotFusible as e:
            self.log(f"not merged: {L(a)} and {L(b)} ({why}): {e}")
            self.failed[key] = (a, b)
            return None
        name = L.fresh(f"{info.kind}_fusion")
        new = commit(top, [a, b], cand, info.kind, name)
        self.concat_operands[id(new)] = (new, cat)
        self.log(f"merged {L(a)} and {L(b)} ({why}) -> {name} ({info.kind} fusion, "
                 f"{len(new.results)} outputs)")
        L.set(new, name)
        return new

    def _producer_consumer(self, region: Region) -> bool:
        reach = Reach(region)
        # deferred: a merge moves positions only, and region.ops is rebuilt once at the end (a
        # sort of the whole region per merge had made thousands of merges quadratic)
        top = TopLevel(region, reach.ins, deferred=True)
        try:
            return self._producer_consumer_in(region, reach, top)
        finally:
            top.sync()

    def _producer_consumer_in(self, region: Region, reach: Reach, top: TopLevel) -> bool:
        users = top.users
        for p in list(region.ops):
            if not _kernel(p):
                continue
            consumers = []
            for r in p.results:
                for u in users.get(r, ()):
                    if u not in consumers:
                        consumers.append(u)
            if len(consumers) < 2 and not any(r in top.returned for r in p.results):
                continue
            for c in consumers:
                if not _kernel(c):
                    continue
                if reach.path_through_other(p, c):
                    self.log(f"not merged: {self.labels(p)} into {self.labels(c)}: another reader "
                             "of the producer feeds the consumer (merging would make a cycle)")
                    continue
                if self._merge(top, p, c, "producer and consumer; the producer's value is "
                                             "also an output for its other readers") is not None:
                    return True
        return False

    def _siblings(self, region: Region) -> bool:
        """Merge the first pair of independent siblings that forms a valid kernel; go on (in
        the same order) while the merges are of sinks (kernels no other kernel reads), whose
        merging leaves the reachability between all other kernels as it was. True when
        something merged."""
        reach = Reach(region)
        top = TopLevel(region, reach.ins, deferred=True)  # (as in _producer_consumer)
        try:
            return self._siblings_in(reach, top)
        finally:
            top.sync()

    def _siblings_in(self, reach: Reach, top: TopLevel) -> bool:
        users = top.users
        made_sinks = set()  # ids of the sinks this call made

        def sink(op: Operation) -> bool:
            i = reach.pos.get(id(op))
            return not reach.users[i] if i is not None else id(op) in made_sinks

        merged = False
        for v in list(users):
            if nbytes(v.type) == 0:
                continue
            # dots and output fusions are never merged with a sibling: leave them out before
            # pairing (a weight read by every layer's dot would otherwise cost its square)
            readers = [u for u in users[v] if _kernel(u) and u.name != "dot_general" and not (
                u.name == "fusion" and u.attrs.get("kind") == "output")]
            start = 0  # readers[:start] are merged or saturated
            while len(readers) - start >= 2:
                hit = None
                i = start
                while i < len(readers) and hit is None:
                    a = readers[i]
                    why = self._saturated(a)
                    if why:
                        self.log(f"kept apart from its siblings reading the same {v.type}: "
                                 f"{self.labels(a)}: {why}")
                        if i == start:
                            start += 1
                            i += 1
                        else:
                            del readers[i]
                        continue
                    for j in range(i + 1, len(readers)):
                        b = readers[j]
                        sinks = sink(a) and sink(b)  # two sinks never reach each other
                        if not sinks:
                            if id(a) not in reach.pos or id(b) not in reach.pos:
                                return True  # a kernel this call made: reachability is stale
                            if not reach.independent(a, b):
                                continue
                        new = self._merge(top, a, b, f"siblings reading the same {v.type}")
                        if new is not None:
                            if not sinks:
                                return True
                            merged = True
                            made_sinks.add(id(new))
                            hit = (i, j, new)
                            break
                    i += 1
                if hit is None:
                    break
                # The merged kernel sits where the later of the two was (readers stay in the
                # region's order, the order a fresh round would list them in).
                i, j, new = hit
                readers[j] = new
                if i == start:
                    start += 1
                else:
                    del readers[i]
        return merged
