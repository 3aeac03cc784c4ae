"""Horizontal fusion (pass ``horizontal-fusion``): independent small kernels are launched as
one, a ``multi`` fusion whose region holds each of them as a nested fusion (the per-parameter
update steps of a training step, small reductions beside each other).

Candidates are loop and input kernels whose outputs have at most
``Options.horizontal_max_elements`` elements. Members of a group are pairwise independent (no
path from one to another), so running them together cannot create a cycle; groups are formed
greedily in schedule order, each among the next ``WINDOW`` candidates, and bounded in width: a
group has at most ``Options.max_kernel_outputs`` outputs, and its concatenates at most
``Options.max_concat_operands`` operands, together (a kernel left out for that is logged). Dots
and kernels with their own structure stay alone.

A merge changes the reachability between kernels, so the search starts again after it, except
where every member of the group is a sink (no kernel reads it: a program's outputs): merging
sinks adds no path between other kernels, and the search goes on (a program with thousands of
independent outputs is grouped in one round).
"""
from __future__ import annotations

from hlo.ir.core import Operation, Region

from .base import register_pass
from .fusion import FusionPass, fusible_unit, unit_concat_operands
from .fusion_build import TopLevel, commit, preview
from .fusion_kinds import NotFusible, analyze
from .layout import is_bitcast
from .multi_output import Reach

# A group is sought among the next WINDOW candidates after its first kernel (in schedule order):
# independent small kernels worth one launch sit near each other, and a bounded search keeps
# the pass linear in the program's length.
WINDOW = 64


def _candidate(op: Operation, limit: int) -> bool:
    if op.name == "constant" or is_bitcast(op) or not fusible_unit(op):
        return False
    if op.name == "dot_general":
        return False
    if op.name == "fusion" and op.attrs.get("kind") not in ("loop", "input"):
        return False
    return all(r.type.size <= limit for r in op.results)


@register_pass("horizontal-fusion", "merge independent small kernels into one launch")
class HorizontalFusion(FusionPass):
    name = "horizontal-fusion"
    decision_prefix = "horizontal"

    def fuse(self, region: Region) -> bool:
        log, labels = self.log, self.labels
        limit = self.options.horizontal_max_elements
        max_out, max_cat = self.options.max_kernel_outputs, self.options.max_concat_operands
        cats = {}  # id -> (op, unit_concat_operands(op)), across rounds

        def cat(op: Operation) -> int:
            m = cats.get(id(op))
            if m is None:
                m = cats[id(op)] = (op, unit_concat_operands(op))
            return m[1]

        changed = False
        done = set()
        while True:  # a merge of non-sinks ends a round: the region's reachability changes
            reach = Reach(region)
            cands = [op for op in region.ops if _candidate(op, limit) and id(op) not in done]
            top = TopLevel(region, reach.ins, deferred=True)  # (region.ops: after sync())
            merged = False
            for k, seed in enumerate(cands):
                if id(seed) in done:
                    continue
                group = [seed]
                outs, cs = len(seed.results), cat(seed)
                wide = []
                for op in cands[k + 1:k + 1 + WINDOW]:
                    if id(op) not in done and all(reach.independent(op, g) for g in group):
                        if outs + len(op.results) > max_out or cs + cat(op) > max_cat:
                            wide.append(op)
                            continue
                        group.append(op)
                        outs, cs = outs + len(op.results), cs + cat(op)
                if wide:
                    log(f"left {len(wide)} independent kernel(s) out of the group of {labels(seed)}: "
                        f"the launch would have more than {max_out} outputs (max_kernel_outputs) or its "
                        f"concatenates more than {max_cat} operands (max_concat_operands)")
                if len(group) < 2:
                    done.add(id(seed))
                    continue
                cand = preview(top, group, "multi")
                try:
                    analyze(cand.region, self.allow_row)
                except NotFusible as e:
                    log(f"not merged: {', '.join(labels(g) for g in group)}: {e}")
                    done.update(id(g) for g in group)
                    continue
                name = labels.fresh("multi_fusion")
                sinks = all(not reach.users[reach.pos[id(g)]] for g in group)
                new = commit(top, group, cand, "multi", name)
                done.add(id(new))
                log(f"merged {len(group)} independent kernels into one launch -> {name}: "
                    + ", ".join(labels(g) for g in group))
                changed = merged = True
                if not sinks:
                    break
                done.update(id(g) for g in group)  # (gone; the ids stay unique: cands holds them)
            top.sync()
            if not merged:
                return changed
