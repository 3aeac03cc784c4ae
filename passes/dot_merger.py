"""Dot merger (pass ``dot-merger``, XLA's ``DotMerger``): matrix products that read the same
left-hand side become one product whose right-hand side is their right-hand sides side by
side, followed by a slice per original product.

    q = x @ wq + bq;  k = x @ wk + bk;  v = x @ wv + bv
 -> y = x @ concatenate(wq, wk, wv) + concatenate(bq, bk, bv);  q, k, v = slices of y

A small product gives cuBLASLt only small tiles (an attention layer's Q, K and V projections:
three 1024x512 @ 512x512 products at about half the efficiency of one 1024x512 @ 512x1536), so
the pass is on by default only where such a library runs the products (``Options.dot_merger``:
target ``cuda``; the CPU's generated GEMM prefers the separate products).

Products merge when they read the same LHS value with the same batch and contracting dimensions
and their RHS operands have the same element type and the same shape except along their last
free dimension, which the concatenation extends; their results have one element type, and each
result has at most ``Options.dot_merger_max_elements`` elements (a larger product fills the GPU
alone). A bias added right after a product (``add(dot, broadcast_in_dim(b))`` with ``b`` a
vector along the merged dimension, the form cuBLASLt fuses as its BIAS epilogue) stays right
after the merged product: the biases are concatenated too, and products with and without one
never merge together. A product whose value (with its bias) feeds an elementwise op is left
alone (cuBLASLt would take that op into its epilogue; after a merge it would run on its own).
Members are pairwise independent (no RHS or bias computed from another member's product), so
the merge creates no cycle. Every merge and every refusal is in the decision log, with its
reason.

The pass runs before layout assignment; the slices then fuse into their readers (an
attention's reshape-to-heads and transpose become one operand copy reading the strided slice).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from hlo.ir.builder import Builder
from hlo.ir.core import Module, Operation, Region, Value
from hlo.ir.types import TensorType

from .base import MainPass, register_pass
from .multi_output import Reach
from .util import ELEMENTWISE, Labels, erase_ops, replace_values, stable_toposort, top_users

_DIMS = ("lhs_batching_dimensions", "lhs_contracting_dimensions",
         "rhs_batching_dimensions", "rhs_contracting_dimensions")


@dataclass
class _Member:
    """One product the pass may merge: the dot, its RHS's concatenated dimension and the result
    dimension it becomes, and its bias add where it has one."""

    dot: Operation
    rhs_dim: int
    out_dim: int
    add: Optional[Operation] = None
    bcast: Optional[Operation] = None

    @property
    def rhs(self) -> Value:
        return self.dot.operands[1]

    @property
    def bias(self) -> Optional[Value]:
        return self.bcast.operands[0] if self.bcast is not None else None

    @property
    def value(self) -> Value:
        """What the merged program computes a slice for: the product, or product + bias."""
        return (self.add or self.dot).results[0]

    @property
    def last(self) -> Operation:
        return self.add or self.dot


def _free_dims(dot: Operation) -> List[int]:
    rhs = dot.operands[1].type
    bound = set(dot.attrs.get("rhs_batching_dimensions", ())) | \
        set(dot.attrs.get("rhs_contracting_dimensions", ()))
    return [d for d in range(rhs.rank) if d not in bound]


def _out_dim(dot: Operation, rhs_free: List[int], rhs_dim: int) -> int:
    lhs = dot.operands[0].type
    nb = len(dot.attrs.get("lhs_batching_dimensions", ()))
    lhs_free = lhs.rank - nb - len(dot.attrs.get("lhs_contracting_dimensions", ()))
    return nb + lhs_free + rhs_free.index(rhs_dim)


def _bias_add(dot: Operation, out_dim: int, users: Dict[Value, List[Operation]],
              returned) -> Optional[tuple]:
    """(add, broadcast) when the product's only reader adds a vector broadcast along
    ``out_dim`` to it (cuBLASLt's BIAS epilogue), else None."""
    v = dot.results[0]
    readers = users.get(v, [])
    if len(readers) != 1 or v in returned or readers[0].name != "add":
        return None
    add = readers[0]
    other = add.operands[1] if add.operands[0] is v else add.operands[0]
    if other is v or other.op is None or other.op.name != "broadcast_in_dim":
        return None
    b = other.op
    if b.operands[0].type.rank != 1 or list(b.attrs["broadcast_dimensions"]) != [out_dim]:
        return None
    return add, b


def _mismatch(a: _Member, b: _Member) -> str:
    """Why ``b`` cannot join a merge with ``a`` (same LHS value), or "" when it can."""
    da, db = a.dot, b.dot
    for k in _DIMS:
        if tuple(da.attrs.get(k, ())) != tuple(db.attrs.get(k, ())):
            return f"their {k.replace('_', ' ')} differ"
    # (the RHS element types are the shared LHS's, and a bias has its product's type)
    if da.results[0].type.dtype != db.results[0].type.dtype:
        return "their result element types differ"
    ra, rb = a.rhs.type, b.rhs.type
    if ra.rank != rb.rank or any(x != y for i, (x, y) in enumerate(zip(ra.shape, rb.shape))
                                 if i != a.rhs_dim):
        return (f"their RHS shapes {list(ra.shape)} and {list(rb.shape)} differ outside the "
                f"last free dimension ({a.rhs_dim}), the one a concatenation extends")
    if (a.add is None) != (b.add is None):
        return "one has a bias epilogue and the other not (merging would unfuse the bias)"
    return ""


@register_pass("dot-merger", "merge matrix products that share their LHS into one product + slices")
class DotMerger(MainPass):
    name = "dot-merger"
    decision_prefix = "dot-merger"

    def run_main(self, module: Module) -> bool:
        self.labels = Labels.for_module(module)
        return self.merge(module.main.body)

    def merge(self, region: Region) -> bool:
        L = self.labels
        by_lhs: Dict[Value, List[Operation]] = {}
        for op in region.ops:
            if op.name == "dot_general":
                by_lhs.setdefault(op.operands[0], []).append(op)
        buckets = [dots for dots in by_lhs.values() if len(dots) > 1]
        if not buckets:
            return False
        for op in region.ops:  # labels in program order: dot_general.0 is the first product
            if op.name == "dot_general":
                L(op)
        target = self.config.target
        if not self.options.dot_merger_for(target):
            for dots in buckets:
                self.log(f"not merged: {', '.join(L(d) for d in dots)} (same LHS): off on target "
                         f"{target} (Options.dot_merger; its products run best separately)")
            return False
        if any(d.results[0].type.layout is not None for ds in buckets for d in ds):
            self.log("not run: the module has layouts (the pass runs before layout assignment)")
            return False
        changed = False
        for dots in buckets:
            for group in self._groups(region, dots):
                self._rewrite(region, group)
                stable_toposort(region)  # the next bucket's reachability needs program order
                changed = True
        return changed

    # -- which products merge ------------------------------------------------------------------
    def _groups(self, region: Region, dots: List[Operation]) -> List[List[_Member]]:
        L, limit = self.labels, self.options.dot_merger_max_elements
        users = top_users(region)
        returned = set(region.outputs)
        reach = Reach(region)
        members: List[_Member] = []
        for d in dots:
            n = d.results[0].type.size
            if n > limit:
                self.log(f"not merged: {L(d)}: its product has {n} elements (limit "
                         f"{limit} a product): large enough to fill the device on its own")
                continue
            free = _free_dims(d)
            if not free:
                self.log(f"not merged: {L(d)}: its RHS has no free dimension to extend")
                continue
            out_dim = _out_dim(d, free, free[-1])
            m = _Member(d, free[-1], out_dim)
            hit = _bias_add(d, out_dim, users, returned)
            if hit is not None:
                m.add, m.bcast = hit
            elementwise = [u for u in users.get(m.value, []) if u.name in ELEMENTWISE]
            if elementwise:
                self.log(f"not merged: {L(d)}: its product{' + bias' if m.add else ''} feeds "
                         f"elementwise '{elementwise[0].name}', which the product's epilogue "
                         "computes; after a merge it would run as a kernel of its own")
                continue
            members.append(m)
        groups: List[List[_Member]] = []
        refusals: Dict[int, str] = {}
        for m in members:
            for g in groups:
                why = _mismatch(g[0], m) or self._dependence(reach, g, m)
                if not why:
                    g.append(m)
                    break
                refusals.setdefault(id(m), f"with {L(g[0].dot)}: {why}")
            else:
                groups.append([m])
        for g in groups:
            if len(g) == 1 and id(g[0]) in refusals:
                self.log(f"not merged: {L(g[0].dot)} {refusals[id(g[0])]}")
        return [g for g in groups if len(g) > 1]

    def _dependence(self, reach: Reach, group: List[_Member], m: _Member) -> str:
        L = self.labels
        for g in group:
            if reach.reaches(g.dot, m.last) or reach.reaches(m.dot, g.last):
                a, b = (g, m) if reach.reaches(g.dot, m.last) else (m, g)
                return (f"the RHS or bias of {L(b.dot)} is computed from {L(a.dot)}'s product "
                        "(merging would make the product depend on itself)")
        return ""

    # -- the rewrite ---------------------------------------------------------------------------
    def _rewrite(self, region: Region, group: List[_Member]) -> None:
        L = self.labels
        first = group[0]
        d0, k = first.dot, first.rhs_dim
        at = max(region.ops.index(m.last) for m in group) + 1
        b = Builder(region, d0.loc, index=at)
        rhs = b.value("concatenate", [m.rhs for m in group], attrs={"dimension": k})
        out_t = d0.results[0].type
        shape = list(out_t.shape)
        shape[first.out_dim] = sum(m.dot.results[0].type.shape[first.out_dim] for m in group)
        attrs = {a: d0.attrs[a] for a in _DIMS if a in d0.attrs}
        merged = b.value("dot_general", [d0.operands[0], rhs], attrs=attrs,
                         result_types=[TensorType(shape, out_t.dtype)])
        y = merged
        if first.add is not None:
            bias = b.value("concatenate", [m.bias for m in group], attrs={"dimension": 0})
            bb = b.value("broadcast_in_dim", [bias], attrs={"broadcast_dimensions": [first.out_dim]},
                         result_types=[merged.type])
            y = b.value("add", [merged, bb])
        mapping: Dict[Value, Value] = {}
        off = 0
        for m in group:
            n = m.value.type.shape[first.out_dim]
            start, limit = [0] * len(shape), list(shape)
            start[first.out_dim], limit[first.out_dim] = off, off + n
            off += n
            s = b.op("slice", [y], attrs={"start_indices": start, "limit_indices": limit,
                                          "strides": [1] * len(shape)}, loc=m.dot.loc)
            mapping[m.value] = s.result
        replace_values(region, mapping)
        dead = [m.dot for m in group] + [m.add for m in group if m.add is not None]
        erase_ops(region, dead)
        users = top_users(region)
        erase_ops(region, [m.bcast for m in group if m.bcast is not None
                           and not users.get(m.bcast.results[0]) and m.bcast.results[0] not in region.outputs])
        what = f"one product of {merged.type}" + (" + bias (BIAS epilogue kept)" if first.add else "")
        self.log(f"merged {len(group)} products reading the same LHS: "
                 f"{', '.join(L(m.dot) for m in group)} -> {what}, then a slice each")
