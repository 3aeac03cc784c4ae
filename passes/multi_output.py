"""Multi-output fusion (pass ``multi-output-fusion``), after vertical fusion:

- siblings: kernels that read the same input and are independent are merged into one kernel
  that reads the input once and has several outputs (a mean and a variance; the gradients of a
  bias and of a scale). The merged region must be a valid loop or input fusion (same iteration
  space, same reduced dimensions);
- producer-consumer: a producer that vertical fusion left alone because other kernels also
  read it (a dot result needed by an activation and by the backward pass) is merged into one
  consumer, and the merged kernel also outputs the producer's value for the others.

Merges never create a cycle (no path between the two kernels through a third one) and are
logged with their reasons, as are refusals.
"""
from __future__ import annotations

from hlo.ir.core import Operation, Region

from .base import register_pass
from .fusion import FusionPass, fusible_unit
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
        changed = False
        while self._producer_consumer(region) or self._siblings(region):
            changed = True
        return changed

    def _merge(self, top: TopLevel, a: Operation, b: Operation, why: str) -> bool:
        L = self.labels
        key = (id(a), id(b))
        if key in self.failed:
            return False  # the same two kernels cannot form a valid fusion (kept: ids stay unique)
        cand = preview(top, [a, b], "loop")
        try:
            info = analyze(cand.region, self.allow_row)
        except NotFusible as e:
            self.log(f"not merged: {L(a)} and {L(b)} ({why}): {e}")
            self.failed[key] = (a, b)
            return False
        name = L.fresh(f"{info.kind}_fusion")
        new = commit(top, [a, b], cand, info.kind, name)
        self.log(f"merged {L(a)} and {L(b)} ({why}) -> {name} ({info.kind} fusion, "
                 f"{len(new.results)} outputs)")
        L.set(new, name)
        return True

    def _producer_consumer(self, region: Region) -> bool:
        reach = Reach(region)
        top = TopLevel(region, reach.ins)
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
                                             "also an output for its other readers"):
                    return True
        return False

    def _siblings(self, region: Region) -> bool:
        reach = Reach(region)
        top = TopLevel(region, reach.ins)
        users = top.users
        for v in list(users):
            # dots and output fusions are never merged with a sibling: leave them out before
            # pairing (a weight read by every layer's dot would otherwise cost its square)
            readers = [u for u in users[v] if _kernel(u) and u.name != "dot_general" and not (
                u.name == "fusion" and u.attrs.get("kind") == "output")]
            if len(readers) < 2 or nbytes(v.type) == 0:
                continue
            for i in range(len(readers)):
                for j in range(i + 1, len(readers)):
                    a, b = readers[i], readers[j]
                    if not reach.independent(a, b):
                        continue
                    if self._merge(top, a, b, f"siblings reading the same {v.type}"):
                        return True
        return False
