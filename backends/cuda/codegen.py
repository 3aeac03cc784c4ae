"""The CUDA kernel emitter (``kernel_emitter.KernelEmitter``) that the shared lowering
(``backends/lower.py``) drives: the GPU kernels of ``kernels.py`` and ``sort_scatter.py``, each
one ``Launch`` step, and matrix products through the runtime's cuBLASLt where it takes them.

* loop kernels: a thread per output element (``emit_loop_kernel``);
* row kernels (softmax, layer norm): a warp or a block per row (``emit_row_kernel``);
* reductions of the physically minor dimension (row and full reductions): a warp or a block per
  output element (``big_reduce`` -> ``emit_reduce_kernel``); column reductions: a thread per
  output element looping over the reduced rows (coalesced across the warp);
* dot_general: ``gemm.plan`` -> a ``LibraryCall`` of cuBLASLt, or, where it refuses (integer
  products, layouts it cannot express), a generated kernel: a loop kernel whose element runs the
  contraction (the refusal's reason is kept in the manifest's ``generated_dots``);
* sort, scatter: ``sort_scatter.py``.
"""
from __future__ import annotations

from ..kernel_emitter import KernelEmitter, Root
from .kernels import GpuCodegen, emit_loop_kernel, emit_reduce_kernel, emit_row_kernel, is_row_reduce
from .sort_scatter import lower_scatter, lower_sort


class CudaCodegen(GpuCodegen, KernelEmitter):
    threads = 1

    def __init__(self, ctx, device):
        super().__init__(ctx, device)
        self.generated_dots = []  # why each generated dot kernel was not a library call

    def loop_kernel(self, roots, env, name, what):
        return emit_loop_kernel(self, roots, env, name=name, what=what)

    def row_kernel(self, k, reduces, outputs, env, in_shape, name, what):
        return emit_row_kernel(self, k, reduces, outputs, env, in_shape, name=name, what=what)

    def column_reduce(self, op, dests, env, what):
        roots = [Root(r, d, r.type) for r, d in zip(op.results, dests)]
        return emit_loop_kernel(self, roots, env, name="column_reduce", what=what)

    def big_reduce(self, lw, op, dests, env, what) -> bool:
        if not is_row_reduce(op):
            return False
        lw.steps.append(emit_reduce_kernel(self, op, dests, env, what=what))
        return True

    def dot(self, lw, op, dest, env, epilogue=None) -> bool:
        where = f" at {op.loc}" if op.loc is not None else ""
        what = f"dot_general{where}"
        step, reason = self._gemm(lw, op, dest, env, what)
        if step is None:
            self.generated_dots.append(f"{what}: {reason}")
            step = emit_loop_kernel(self, [Root(op.results[0], dest, op.results[0].type)], env,
                                    name="dot", what=f"{what} (generated: {reason})")
        lw.steps.append(step)
        return False  # the epilogue, if any, runs as its own loop kernel

    def _gemm(self, lw, op, dest, env, what):
        """A cuBLASLt call for the product (``gemm.plan_dot``), or (None, why not). Operands that
        are fused producers (not in a buffer) are computed into scratch first."""
        from .gemm import plan_dot
        lhs, rhs = op.operands
        plan = plan_dot(lhs.type, rhs.type, op.results[0].type, op.attrs)
        if not plan:
            return None, plan.reason
        refs = []
        for v in (lhs, rhs):
            ref = env.get(v)
            if ref is None:
                ref = lw.scratch(v.type.nbytes)
                lw.steps.append(emit_loop_kernel(self, [Root(v, ref, v.type)], env, name="dot_operand",
                                                 what=f"{what}: operand"))
            refs.append(ref)
        return plan.library_call(refs[0], refs[1], dest, what=what), None

    def sort(self, lw, op, dests, env) -> None:
        lower_sort(lw, op, dests, env)

    def scatter(self, lw, op, dests, env) -> None:
        lower_scatter(lw, op, dests, env)
