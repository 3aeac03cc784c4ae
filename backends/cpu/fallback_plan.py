"""A minimal buffer plan, used ONLY when ``hlo.passes.pipeline`` is not available.

Same interface as the passes' ``BufferAssignment`` (``arena_size``, ``alignment``,
``slice_for(value) -> Slice(kind, index, offset, size)``): parameters live in the caller's
input buffers, values returned by ``main`` in the output buffers, everything else gets its own
64-byte aligned arena slice (no reuse: this plan exists so the backend runs unfused,
unoptimized modules, not to be good).
"""
from __future__ import annotations

from collections import namedtuple
from typing import Dict

from hlo.ir.core import Module, Value

Slice = namedtuple("Slice", "kind index offset size")


class FallbackBufferPlan:
    alignment = 64

    def __init__(self, module: Module):
        main = module.main
        self._slices: Dict[Value, Slice] = {}
        for i, a in enumerate(main.args):
            self._slices[a] = Slice("param", i, 0, a.type.nbytes)
        for i, v in enumerate(main.body.outputs):
            if v not in self._slices and v.op is not None and v.op.name != "constant":
                self._slices[v] = Slice("output", i, 0, v.type.nbytes)
        off = 0
        for op in main.body.ops:
            for r in op.results:
                if r in self._slices:
                    continue
                if op.name == "constant":
                    self._slices[r] = Slice("constant", 0, 0, r.type.nbytes)
                    continue
                self._slices[r] = Slice("temp", 0, off, r.type.nbytes)
                off += (r.type.nbytes + 63) // 64 * 64
        self.arena_size = off

    def slice_for(self, value: Value) -> Slice:
        return self._slices[value]


class Unoptimized:
    """Stands in for the passes' ``Optimized`` result: the module as given plus the fallback
    plan (every top-level op is its own kernel)."""

    def __init__(self, module: Module):
        self.module = module
        self.buffers = FallbackBufferPlan(module)
        self.schedule = None
        self.pass_times = {}
