"""A small pattern-rewrite engine for local simplifications (canonicalization, algebraic
simplification): a table maps op names to pattern functions.

A pattern is ``fn(op, rw)``. It returns a list of replacement values (one per result of
``op``), ``IN_PLACE`` after editing ``op`` itself (operand order, attributes), or None when it
does not apply. New ops are built with ``rw.build(...)``, which inserts them just before ``op``
(verified by the builder as they are made). The engine applies the table to every region until
nothing changes, then removes what became dead.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from hlo.ir.builder import Builder
from hlo.ir.core import Module, Operation, Region, Value
from hlo.ir.types import TensorType

from .dce import dce_region
from .util import replace_values

IN_PLACE = object()
Pattern = Callable[[Operation, "Rewriter"], object]


class Rewriter:
    def __init__(self, region: Region):
        self.region = region
        self.current: Optional[Operation] = None
        self.index = -1  # where ``current`` is in ``region.ops`` (kept by the engine)
        self.version = 0  # bumped by the engine whenever it edits the region
        self._counts = None  # (stamp, reader counts) for num_users

    def changed(self) -> None:
        self.version += 1

    # -- building --------------------------------------------------------------------------
    def build(self, name: str, operands: Sequence[Value], attrs=None, result_types=None,
              regions=()) -> Value:
        """Build a single-result op just before the op being rewritten; return its result."""
        return self.build_op(name, operands, attrs, result_types, regions).result

    def build_op(self, name, operands, attrs=None, result_types=None, regions=()) -> Operation:
        ops = self.region.ops
        idx = self.index
        if not (0 <= idx < len(ops) and ops[idx] is self.current):
            idx = self.index = ops.index(self.current)
        if result_types is not None:
            result_types = [t.without_layout() for t in result_types]
        b = Builder(self.region, self.current.loc, index=idx)
        op = b.op(name, list(operands), dict(attrs or {}), result_types, regions)
        if ops[idx + 1] is self.current:  # the new op went in just before it
            self.index = idx + 1
        return op

    def constant(self, value: np.ndarray) -> Value:
        from hlo.ir.types import element_type
        t = TensorType(value.shape, element_type(value.dtype))
        return self.build("constant", [], {"value": value}, [t])

    def splat_like(self, scalar, t: TensorType) -> Value:
        """A constant of type ``t`` with every element ``scalar``."""
        return self.constant(np.full(t.shape, scalar, dtype=t.np_dtype))

    # -- matching --------------------------------------------------------------------------
    @staticmethod
    def producer(v: Value) -> Optional[Operation]:
        return v.op

    @staticmethod
    def const_value(v: Value) -> Optional[np.ndarray]:
        op = v.op
        if op is not None and op.name == "constant":
            return op.attrs["value"]
        return None

    @staticmethod
    def splat(v: Value):
        """The scalar every element of ``v`` equals when that is known at compile time: a splat
        constant, or a broadcast of one. None otherwise."""
        op = v.op
        while op is not None and op.name in ("broadcast_in_dim", "reshape"):
            op = op.operands[0].op
        if op is None or op.name != "constant":
            return None
        a = op.attrs["value"]
        if a.size == 0:
            return None
        flat = a.reshape(-1)
        bits = flat.view(np.uint8).reshape(flat.size, -1)
        if not (bits == bits[0]).all():
            return None
        return flat[0]

    def num_users(self, v: Value) -> int:
        """How many ops of the region (or its outputs) read ``v`` right now. The counts of all
        values are computed at once and kept until the region changes."""
        from .util import inputs_of
        stamp = (self.version, len(self.region.ops))
        if self._counts is None or self._counts[0] != stamp:
            counts: Dict[Value, int] = {}
            for op in self.region.ops:
                for x in inputs_of(op):
                    counts[x] = counts.get(x, 0) + 1
            for o in self.region.outputs:
                counts[o] = counts.get(o, 0) + 1
            self._counts = (stamp, counts)
        return self._counts[1].get(v, 0)

    def is_splat_of(self, v: Value, x) -> bool:
        s = self.splat(v)
        return s is not None and bool(s == x)


def apply_patterns(module: Module, table: Dict[str, List[Pattern]], max_rounds: int = 16) -> bool:
    changed = False
    for fn in module.functions.values():
        changed |= apply_to_region(fn.body, table, max_rounds)
    return changed


def apply_to_region(region: Region, table: Dict[str, List[Pattern]], max_rounds: int = 16) -> bool:
    changed_any = False
    for _ in range(max_rounds):
        changed = _one_round(region, table)
        if not changed:
            break
        changed_any = True
        dce_region(region)
    return changed_any


class _Resolved:
    """The replacements made so far, each followed to its end (a replacement may itself have
    been replaced), as ``replace_values`` reads a mapping: looked up per value, never copied,
    so a round costs no more per nested region than the region itself."""

    def __init__(self, mapping: Dict[Value, Value]):
        self.mapping = mapping

    def __bool__(self) -> bool:
        return bool(self.mapping)

    def __contains__(self, v) -> bool:
        return v in self.mapping

    def get(self, v, default=None):
        if v not in self.mapping:
            return default
        while v in self.mapping:
            v = self.mapping[v]
        return v


def _one_round(region: Region, table) -> bool:
    changed = False
    rw = Rewriter(region)
    mapping: Dict[Value, Value] = {}
    resolved = _Resolved(mapping)

    snapshot = list(region.ops)
    n = len(snapshot)
    for i, op in enumerate(snapshot):
        if mapping and any(v in mapping for v in op.operands):
            op.operands = [resolved.get(v, v) for v in op.operands]
            rw.changed()
        for sub in op.regions:
            if mapping:
                replace_values(sub, resolved)
                rw.changed()
            if _region_fixpoint(sub, table):
                changed = True
                rw.changed()
        pats = table.get(op.name)
        if not pats:
            continue
        rw.current = op
        rw.index = i + (len(region.ops) - n)  # ops are only inserted during a round
        for pat in pats:
            out = pat(op, rw)
            if out is None:
                continue
            changed = True
            rw.changed()
            if out is IN_PLACE:
                continue
            if len(out) != len(op.results):
                raise RuntimeError(f"pattern {pat.__name__} gave {len(out)} values for '{op.name}' "
                                   f"with {len(op.results)} results")
            for r, v in zip(op.results, out):
                if r.type.without_layout() != v.type.without_layout():
                    raise RuntimeError(f"pattern {pat.__name__} replaced {r.type} by {v.type}")
                mapping[r] = v
            break
    if mapping:
        replace_values(region, resolved)
    return changed


def _region_fixpoint(region: Region, table) -> bool:
    return apply_to_region(region, table)
