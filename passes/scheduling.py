"""Scheduling (pass ``schedule``): the order in which ``main``'s kernels run, chosen to keep
the peak of live memory low. ``main``'s top-level ops are re-ordered into that order.

Three valid orders are simulated and the one with the lowest peak is kept (ties keep the
earlier candidate): the current order, a greedy liveness-aware list schedule (at each step the
ready op that frees the most bytes net of what it allocates; ties go to the earliest op), and a
depth-first post-order from the outputs (XLA's DFS scheduler: finish one operand's subtree
before starting the next, biggest subtree first).

Donated arguments constrain the order: each is paired with an output of its size, and the op
writing that output runs after every other reader of the argument, so that the output can be
written into it (see ``donation_constraints``).

Memory model of the simulation: parameters and constants are not counted (they exist anyway);
every other value holds its bytes from the op that defines it to its last reader, returned
values to the end; bitcasts (``layout.is_bitcast``) allocate nothing and keep their operand's
buffer alive as long as they are read.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from hlo.ir.core import Module, Operation, Region, Value

from .base import MainPass, register_pass
from .layout import is_bitcast
from .util import OpGraph, nbytes


class _Graph(OpGraph):
    def __init__(self, region: Region, extra_deps: Dict[int, set] = None):
        super().__init__(region, extra_deps)
        # Storage roots: a bitcast's result is stored in its operand's buffer.
        self.root: Dict[Value, Value] = {}
        for op in self.ops:
            for r in op.results:
                if is_bitcast(op):
                    self.root[r] = self.root.get(op.operands[0], op.operands[0])
                else:
                    self.root[r] = r
        for a in region.args:
            self.root[a] = a
        self.returned = {self.root.get(v, v) for v in region.outputs}
        self.returned_in_order = list(region.outputs)
        # Bytes each op allocates (its non-bitcast results; params and constants are free).
        self.alloc = []
        for op in self.ops:
            if op.name == "constant" or is_bitcast(op):
                self.alloc.append(0)
            else:
                self.alloc.append(sum(nbytes(r.type) for r in op.results))
        # Readers of each storage root.
        self.readers: Dict[Value, List[int]] = {}
        for i in range(len(self.ops)):
            for v in self.ins[i]:
                self.readers.setdefault(self.root.get(v, v), []).append(i)
        self.counted = set()
        for op in self.ops:
            if op.name != "constant" and not is_bitcast(op):
                self.counted.update(op.results)

    def peak(self, order: Sequence[int]) -> int:
        remaining = {r: len(set(rs)) for r, rs in self.readers.items()}
        live = 0
        peak = 0
        seen_reader: Dict[Value, set] = {}
        for i in order:
            live += self.alloc[i]
            peak = max(peak, live)
            for v in {self.root.get(v, v) for v in self.ins[i]}:
                s = seen_reader.setdefault(v, set())
                if i in s:
                    continue
                s.add(i)
                remaining[v] -= 1
                if remaining[v] == 0 and v in self.counted and v not in self.returned:
                    live -= nbytes(v.type)
            # Results nobody reads are dead at once.
            for r in self.ops[i].results:
                if self.root.get(r) is r and r in self.counted and not self.readers.get(r) \
                        and r not in self.returned:
                    live -= nbytes(r.type)
        return peak

    def list_schedule(self) -> List[int]:
        n = len(self.ops)
        indeg = [len(d) for d in self.deps]
        remaining = {r: len(set(rs)) for r, rs in self.readers.items()}
        ready = [i for i in range(n) if indeg[i] == 0]
        order = []
        while ready:
            best, best_key = None, None
            for i in ready:
                freed = 0
                for v in {self.root.get(v, v) for v in self.ins[i]}:
                    if remaining.get(v) == 1 and v in self.counted and v not in self.returned:
                        freed += nbytes(v.type)
                key = (-(freed - self.alloc[i]), i)
                if best_key is None or key < best_key:
                    best, best_key = i, key
            ready.remove(best)
            order.append(best)
            for v in {self.root.get(v, v) for v in self.ins[best]}:
                if v in remaining:
                    remaining[v] -= 1
            for u in set(self.users[best]):
                indeg[u] -= 1
                if indeg[u] == 0:
                    ready.append(u)
        return order

    def dfs_schedule(self) -> List[int]:
        n = len(self.ops)
        size = [0] * n  # bytes of each op's subtree (approximate: counted once per path)
        for i in range(n):
            size[i] = self.alloc[i] + sum(size[j] for j in self.deps[i]) if self.deps[i] else self.alloc[i]
        done = [False] * n
        order: List[int] = []

        def visit(i):
            stack = [(i, False)]
            while stack:
                j, expanded = stack.pop()
                if done[j]:
                    continue
                if expanded:
                    done[j] = True
                    order.append(j)
                    continue
                stack.append((j, True))
                # Biggest subtree first: push it last so that it pops first.
                for d in sorted(self.deps[j], key=lambda d: (size[d], -d)):
                    if not done[d]:
                        stack.append((d, False))

        producer = {}
        for i, op in enumerate(self.ops):
            for r in op.results:
                producer[r] = i
        roots = []
        for v in self.returned_in_order:
            if v in producer:
                roots.append(producer[v])
        for i in roots:
            visit(i)
        for i in range(n):  # ops nothing returned depends on
            visit(i)
        return order


def donation_constraints(region: Region, donate: Sequence[int]) -> Tuple[Dict[int, set], List[str]]:
    """Ordering constraints that let donated arguments be reused for outputs: each donated
    argument is paired with an output of its size (preferring one computed directly from it),
    and that output's producer is ordered after every other reader of the argument, unless that
    would make a cycle. Returns {op position: positions it must follow} and notes."""
    ops = list(region.ops)
    pos = {id(op): i for i, op in enumerate(ops)}
    g = _Graph(region)
    n = len(ops)
    down = [0] * n  # positions reachable from each op
    for i in range(n - 1, -1, -1):
        m = 0
        for u in g.users[i]:
            m |= (1 << u) | down[u]
        down[i] = m
    extra: Dict[int, set] = {}
    notes: List[str] = []
    taken = set()
    outs = list(region.outputs)
    for k in donate:
        if not 0 <= k < len(region.args):
            continue
        arg = region.args[k]
        readers = set(g.readers.get(arg, []))
        cands = [i for i, v in enumerate(outs) if i not in taken and v.op is not None
                 and nbytes(v.type) == nbytes(arg.type) and id(v.op) in pos
                 and not is_bitcast(v.op) and v.op.name != "constant"]
        cands.sort(key=lambda i: (pos[id(outs[i].op)] not in readers, outs[i].type.shape != arg.type.shape))
        for i in cands:
            p = pos[id(outs[i].op)]
            if any(down[p] >> r & 1 for r in readers if r != p):
                continue  # a reader depends on the output: it cannot wait
            extra.setdefault(p, set()).update(r for r in readers if r != p)
            taken.add(i)
            notes.append(f"schedule: output {i} is written after the last read of donated argument {k}")
            break
    return extra, notes


def schedule_region(region: Region, donate: Sequence[int] = ()) -> Tuple[List[Operation], Dict[str, int]]:
    """Choose an order for ``region``'s ops; returns it and the simulated peak of each
    candidate (bytes)."""
    extra, _ = donation_constraints(region, donate) if donate else ({}, [])
    g = _Graph(region, extra)
    candidates = [("list", g.list_schedule()), ("dfs", g.dfs_schedule())]
    if not extra:
        candidates.insert(0, ("current", list(range(len(g.ops)))))
    peaks = {}
    best = None
    for name, order in candidates:
        p = g.peak(order)
        peaks[name] = p
        if best is None or p < best[0]:
            best = (p, name, order)
    return [g.ops[i] for i in best[2]], {**peaks, "chosen": best[1]}


@register_pass("schedule", "order kernels to minimize peak memory (greedy list scheduler vs DFS)")
class Schedule(MainPass):
    name = "schedule"

    def run_main(self, module: Module) -> bool:
        self.donate = tuple(self.options.donate_argnums)
        region = module.main.body
        notes = donation_constraints(region, self.donate)[1] if self.donate else []
        order, peaks = schedule_region(region, self.donate)
        changed = any(a is not b for a, b in zip(order, region.ops))
        region.ops = order
        chosen = peaks.pop("chosen")
        self.lines = [f"schedule: chose the {chosen} order; simulated peak bytes: " +
                      ", ".join(f"{k} {v}" for k, v in peaks.items())] + notes
        return changed
