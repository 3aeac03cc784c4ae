"""The CPU's kernel emitter (``kernel_emitter.KernelEmitter``): the kernels of ``kernels.py``
(loop nests called as ``KernelCall`` steps, spread over the thread pool), matrix products of
``dot.py`` (the generated tiled GEMM or a BLAS), sort and scatter of ``sort_scatter.py``, and
big reductions split over threads."""
from __future__ import annotations

import numpy as np

from ..kernel_emitter import RUN_PARALLEL_DECLINED, KernelEmitter
from .dot import chunk_rows, lower_dot
from .dot_chunks import row_operand
from .kernels import (
    Codegen,
    emit_column_reduce,
    emit_loop_kernel,
    emit_row_kernel,
    emit_split_reduce,
    wants_split_reduce,
)
from .profile_records import product_kernels
from .sort_scatter import lower_scatter, lower_sort
from .update_slice import emit_update_in_place, in_place_update


class CpuCodegen(Codegen, KernelEmitter):
    # host callbacks and collectives run through the runtime's dispatcher (entry.py)
    DECLINED = dict(RUN_PARALLEL_DECLINED)

    def __init__(self, ctx, threads):
        super().__init__(ctx, threads)
        # id(step) -> the dot_general a product kernel computes (``profile.product_kernels``)
        self.products = {}

    def loop_kernel(self, roots, env, name, what):
        return emit_loop_kernel(self, roots, env, name=name, what=what)

    def row_kernel(self, k, reduces, outputs, env, in_shape, name, what):
        return emit_row_kernel(self, k, reduces, outputs, env, in_shape, name=name, what=what)

    def defer_row_operand(self, dot, v, k, reduces, in_shape, name, what):
        ro = row_operand(dot, v, k, in_shape, reduces, name, what)
        t = v.type
        rows = k and chunk_rows(int(np.prod(t.shape[:k])), int(np.prod(t.shape[k:])), t.dtype.itemsize, self.threads)
        return ro if ro is not None and rows else None

    def column_reduce(self, op, dests, env, what):
        return emit_column_reduce(self, op, dests, env, what=what)

    def big_reduce(self, lw, op, dests, env, what) -> bool:
        if not wants_split_reduce(op, self.threads):
            return False
        lw.steps.extend(emit_split_reduce(self, lw, op, dests, env, what=what))
        return True

    def update_in_place(self, op, dest, env, name, what):
        if not in_place_update(op, dest, env):
            return None
        return emit_update_in_place(self, op, dest, env, name, what)

    def dot(self, lw, op, dest, env, epilogue=None) -> bool:
        n = len(lw.steps)
        done = lower_dot(lw, op, dest, env, epilogue=epilogue)
        self.products.update(product_kernels(lw.steps[n:], op))
        return done

    def sort(self, lw, op, dests, env) -> None:
        lower_sort(lw, op, dests, env)

    def scatter(self, lw, op, dests, env) -> None:
        lower_scatter(lw, op, dests, env)
