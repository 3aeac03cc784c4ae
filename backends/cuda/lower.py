"""Lowering a module to GPU launches: which kernel computes which buffer.

The walk over ``main`` (schedule order, the passes' buffer plan, nested step lists for
while/if/case/call, scratch buffers past the plan's part of the arena) is the CPU backend's
``Lowering``; this subclass decides the kernel of each op and fusion:

* a fusion whose reductions run over trailing dimensions and are read back per row (softmax,
  layer norm; ``index_trace.row_fusable``): one row kernel, a warp or a block per row;
* other heavy ops of a fusion are materialized into scratch first, each by its own kernel, then
  the fusion's roots by loop kernels (one per index space);
* a reduce that reduces its input's physically minor dimension: a cooperative reduce kernel;
  other reductions (column reductions) are loop kernels with the reduction loop per element;
* dot_general: cuBLASLt through the runtime (``gemm.plan``) where it takes the product, else a
  generated kernel (a loop kernel with the contraction per output element);
* sort, scatter: ``sort_scatter.py``; everything else: a loop kernel.
"""
from __future__ import annotations

from typing import Dict, List, Sequence

from hlo.ir.core import Operation, Value
from hlo.runtime.steps import BufRef
from ..cpu import index_trace
from ..cpu.kernels import Root
from ..cpu.lower import BITCAST_OPS, CONTROL, HEAVY, Lowering, _kname
from .kernels import emit_loop_kernel, emit_reduce_kernel, emit_row_kernel, is_row_reduce
from .sort_scatter import lower_scatter, lower_sort


class GpuLowering(Lowering):
    """``Lowering`` with GPU kernels (``cg`` is a ``kernels.GpuCodegen``)."""

    def _lower_op(self, op: Operation, dests: Sequence[BufRef], env: Dict[Value, BufRef]) -> None:
        name = op.name
        cg = self.cg
        where = f" at {op.loc}" if op.loc is not None else ""
        what = f"{name}{where}"
        if name in BITCAST_OPS and len(op.operands) == 1 and dests[0] == env.get(op.operands[0]):
            return
        if name == "fusion":
            return self.lower_fusion(op, dests, env)
        if name in CONTROL:
            return getattr(self, "_lower_" + name)(op, dests, env)
        if op.results[0].type.size == 0 and name not in ("sort", "scatter"):
            return
        if name == "dot_general" and self._library_dot(op, dests[0], env, what):
            return
        if name == "sort":
            return lower_sort(self, op, dests, env)
        if name == "scatter":
            return lower_scatter(self, op, dests, env)
        if name == "reduce" and is_row_reduce(op):
            self.steps.append(emit_reduce_kernel(cg, op, dests, env, what=what))
            return
        roots = [Root(r, d, r.type) for r, d in zip(op.results, dests)]
        self.steps.append(emit_loop_kernel(cg, roots, env, name=_kname(name), what=what))

    def _library_dot(self, op: Operation, dest: BufRef, env: Dict[Value, BufRef], what: str) -> bool:
        """A cuBLASLt call for ``op`` when the runtime's planner takes it."""
        plan = getattr(self, "gemm_plan", None)
        if plan is None:
            return False
        step, reason = plan(op, dest, env, what)
        if step is None:
            self.gemm_refusals.append(f"{what}: {reason}")
            return False
        self.steps.append(step)
        return True

    def _lower_fusion(self, op: Operation, dests: Sequence[BufRef], env: Dict[Value, BufRef]) -> None:
        cg = self.cg
        region = op.regions[0]
        fenv = dict(env)
        fenv.update(zip(region.args, [env[v] for v in op.operands]))
        label = op.attrs.get("name") or f"fusion.{op.attrs.get('kind', 'loop')}"
        where = f" at {op.loc}" if op.loc is not None else ""
        roots: Dict[Value, BufRef] = {}
        late_copies = []
        for o, d in zip(region.outputs, dests):
            if o in fenv or o in roots:
                late_copies.append((d, o))
            elif o.op.name == "constant":
                fenv[o] = cg.const_ref(o.op.attrs["value"])
                late_copies.append((d, o))
            else:
                roots[o] = d
        heavy = [x for x in region.ops if x.name in HEAVY]
        k = index_trace.row_fusable(region, heavy, list(roots)) if heavy else None
        if k is not None and roots:
            in_shape = heavy[0].operands[0].type.shape
            self.steps.append(emit_row_kernel(cg, k, [h.results[0] for h in heavy], list(roots.items()),
                                              fenv, in_shape, name=_kname(label),
                                              what=f"{label}{where} (row kernel)"))
        else:
            for h in heavy:
                hd = [roots[r] if r in roots else self.scratch(r.type.nbytes) for r in h.results]
                self.lower_op(h, hd, fenv)
                for r, d in zip(h.results, hd):
                    fenv[r] = d
            groups: Dict[tuple, List[Root]] = {}
            for o, d in roots.items():
                if o in fenv:
                    continue  # a heavy root: already written
                key = (o.type.shape, tuple(o.type.minor_to_major))
                groups.setdefault(key, []).append(Root(o, d, o.type))
            for g in groups.values():
                if g[0].dest_type.size == 0:
                    continue
                self.steps.append(emit_loop_kernel(cg, g, fenv, name=_kname(label), what=f"{label}{where}"))
        for d, o in late_copies:
            if fenv[o] != d:
                self.steps.append(self.copy_step(d, fenv[o], o.type.nbytes))
