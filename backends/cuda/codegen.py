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

from dataclasses import replace

import numpy as np

from ..kernel_emitter import KernelEmitter, Root, is_column_reduce
from .kernels import (
    SPLIT_MIN_ELEMENTS,
    GpuCodegen,
    column_parts,
    emit_loop_kernel,
    emit_reduce_kernel,
    emit_row_kernel,
    emit_split_column_reduce,
    emit_split_reduce,
    is_row_reduce,
    split_parts,
)
from .sort_scatter import lower_scatter, lower_sort


class CudaCodegen(GpuCodegen, KernelEmitter):
    threads = 1

    def __init__(self, ctx, device, matmul_precision=None):
        super().__init__(ctx, device)
        self.generated_dots = []  # why each generated dot kernel was not a library call
        self.gemm_epilogues = []  # each cuBLASLt call's text: its epilogue, or why none
        self._after_gemm = []
        self._product_out = None  # where ``_gemm``'s product went (its dest, or scratch)
        # the compile's ``Options.matmul_precision`` ("highest" / "tf32"; None: the default)
        self.matmul_precision = matmul_precision

    def loop_kernel(self, roots, env, name, what):
        return emit_loop_kernel(self, roots, env, name=name, what=what)

    def row_kernel(self, k, reduces, outputs, env, in_shape, name, what):
        return emit_row_kernel(self, k, reduces, outputs, env, in_shape, name=name, what=what)

    def row_kernel_fits(self, in_shape, k) -> bool:
        """Not where the rows are fewer than the multiprocessors and each holds at least
        ``kernels.SPLIT_MIN_ELEMENTS``: a row kernel gives a row one block, so a full reduction
        of a 2048 x 2048 array ran on one multiprocessor. Its reductions then split
        (``big_reduce``) and its outputs are a loop kernel."""
        rows = int(np.prod(in_shape[:k])) if k else 1
        inner = int(np.prod(in_shape[k:])) if k < len(in_shape) else 1
        return rows >= self.device.sm_count or inner < SPLIT_MIN_ELEMENTS

    def column_reduce(self, op, dests, env, what):
        roots = [Root(r, d, r.type) for r, d in zip(op.results, dests)]
        return emit_loop_kernel(self, roots, env, name="column_reduce", what=what)

    def big_reduce(self, lw, op, dests, env, what) -> bool:
        if not is_row_reduce(op):
            parts = column_parts(self, op) if is_column_reduce(op) else 1
            if parts > 1:   # few results, long columns: split (else ``column_reduce``)
                lw.steps.extend(emit_split_column_reduce(self, lw, op, dests, env, parts, what=what))
                return True
            return False
        parts = split_parts(self, op)
        if parts > 1:
            lw.steps.extend(emit_split_reduce(self, lw, op, dests, env, parts, what=what))
        else:
            lw.steps.append(emit_reduce_kernel(self, op, dests, env, what=what))
        return True

    def dot(self, lw, op, dest, env, epilogue=None) -> bool:
        """The product into ``dest`` through cuBLASLt, with as much of an output fusion's
        ``epilogue`` (its root) as cuBLASLt computes (``epilogue.match_epilogue``): True when
        that is all of it; otherwise the lowering's loop kernel computes the rest in place,
        reading the fused part from ``dest``. Why an epilogue, or part of one, is not fused is
        in the step's text (``what``) and the manifest's ``gemm_epilogues``."""
        where = f" at {op.loc}" if op.loc is not None else ""
        what = f"dot_general{where}"
        match = None
        if epilogue is not None:
            from .epilogue import match_epilogue
            match = match_epilogue(op.results[0], epilogue, env, _users(op.parent))
        step, reason, fused = self._gemm(lw, op, dest, env, what, match, epilogue is not None)
        if step is None:
            self.generated_dots.append(f"{what}: {reason}")
            step = emit_loop_kernel(self, [Root(op.results[0], dest, op.results[0].type)], env,
                                    name="dot", what=f"{what} (generated: {reason})")
            lw.steps.append(step)
            return False
        lw.steps.append(step)
        lw.steps.extend(self._after_gemm)
        self.gemm_epilogues.append(step.what)
        out = self._product_out
        if fused is None or fused.value is op.results[0]:
            if out is not dest:
                env[op.results[0]] = out  # the epilogue's kernel reads the product there
            return False
        if fused.at_root:
            return True
        env[fused.value] = out  # the rest of the epilogue reads it from the product's buffer
        return False

    def _gemm(self, lw, op, dest, env, what, match, epilogue=False):
        """``(LibraryCall, None, fused Match or None)`` for the product (``gemm.plan_dot``), or
        ``(None, why not, None)``. An operand that is a fused chain of transposes / reshapes
        moving no data is read straight from its buffer (``_buffer_view``); other operands
        that are fused producers (not in a buffer) are computed into scratch first. Where
        cuBLASLt cannot take the operands' or the result's layout but takes row-major ones,
        they are relaid out through scratch (a copy kernel each; the result's runs after the
        product: ``self._after_gemm``). Where a kernel computes the rest of an ``epilogue``
        after the product and the result's buffer is an argument or result of the call, the
        product goes to scratch (``self._product_out``) and that kernel writes the result: a
        result lands at a new address every call the caller keeps its results, and a cuBLASLt
        node of a CUDA graph whose address changes is captured again (``runtime/cuda/graph.py``),
        a kernel node only patched."""
        from .gemm import plan_dot
        lhs, rhs = op.operands
        res = op.results[0]
        prec = self.matmul_precision
        self._after_gemm = []
        notes = []
        views = {v: _buffer_view(v, env) for v in (lhs, rhs) if v not in env}
        types = {v: (views[v][1] if views.get(v) else v.type) for v in (lhs, rhs)}
        types[res] = res.type
        kw = {}
        if match is not None and (match.value is not res or match.epilogue != "DEFAULT"):
            kw = dict(epilogue=match.epilogue, alpha=match.alpha, beta=match.beta,
                      bias=match.bias.type if match.bias is not None else None, bias_dim=match.bias_dim,
                      c=match.c.type if match.c is not None else None)
        plan = plan_dot(types[lhs], types[rhs], res.type, op.attrs, precision=prec, **kw)
        if not plan and kw:
            notes.append(f"epilogue not fused: {plan.reason}")
            kw, match = {}, None
            plan = plan_dot(types[lhs], types[rhs], res.type, op.attrs, precision=prec)
        if not plan:
            rm = {v: _row_major(v.type) for v in (lhs, rhs, res)}
            again = plan_dot(rm[lhs], rm[rhs], rm[res], op.attrs, precision=prec)
            if not again:
                return None, plan.reason, None
            notes.append(f"relaid out to row-major: {plan.reason}")
            plan, types = again, rm
        refs = []
        for v in (lhs, rhs):
            ref = env.get(v)
            if ref is not None and _same_layout(types[v], v.type):
                pass
            elif views.get(v) and types[v] is views[v][1]:
                ref = views[v][0]
            else:
                src = "operand" if ref is None else "operand relaid out"
                ref = lw.scratch(v.type.nbytes)
                lw.steps.append(emit_loop_kernel(self, [Root(v, ref, types[v])], env, name="dot_operand",
                                                 what=f"{what}: {src}"))
            refs.append(ref)
        out = dest
        rest = epilogue and not (kw and match.at_root)
        if rest and dest.kind in ("input", "output") and _same_layout(types[res], res.type):
            out = lw.scratch(res.type.nbytes)
        self._product_out = out
        if not _same_layout(types[res], res.type):
            out = lw.scratch(res.type.nbytes)
            saved = res.type
            res.type, env[res] = types[res], out
            try:
                self._after_gemm.append(emit_loop_kernel(self, [Root(res, dest, saved)], env, name="dot_result",
                                                         what=f"{what}: result relaid out"))
            finally:
                res.type = saved
                del env[res]
        if kw:
            notes.insert(0, match.describe() + ("" if match.at_root else f"; the rest is a loop kernel: "
                                                 f"{match.rest_reason}"))
        elif match is not None:
            notes.insert(0, f"epilogue not fused: {match.rest_reason}")
        c = env[match.c] if kw and match.c is not None else None
        bias = None
        if kw and match.bias is not None:
            bias = env.get(match.bias)
            if bias is None:  # computed in the fusion from its parameters (epilogue._from_buffers)
                bias = lw.scratch(match.bias.type.nbytes)
                lw.steps.append(emit_loop_kernel(self, [Root(match.bias, bias, _row_major(match.bias.type))],
                                                 env, name="dot_bias", what=f"{what}: bias vector"))
        text = what + (f" ({'; '.join(notes)})" if notes else "")
        step = plan.library_call(refs[0], refs[1], out, c=c, bias=bias, what=text)
        return step, None, (match if kw else None)

    def sort(self, lw, op, dests, env) -> None:
        lower_sort(lw, op, dests, env)

    def scatter(self, lw, op, dests, env) -> None:
        lower_scatter(lw, op, dests, env)


def _row_major(t):
    return t.with_layout(t.default_layout) if t.rank else t


def _same_layout(a, b) -> bool:
    return tuple(a.minor_to_major) == tuple(b.minor_to_major)


def _buffer_view(v, env):
    """``(buffer, type)`` when ``v`` is a chain of transposes, reshapes and slices of a value in
    a buffer that moves no data (``layout.bitcast_result_type``; a slice that is one contiguous
    range of its operand, ``_contiguous_slice``, reads the buffer from an offset): the product
    reads that buffer as ``type``. None otherwise. An unrolled loop's ``xs[i] @ u`` reads
    ``xs`` in place this way."""
    from hlo.passes.layout import bitcast_result_type
    chain = []
    x = v
    while x not in env and x.op is not None and x.op.name in ("transpose", "reshape", "slice"):
        chain.append(x.op)
        x = x.op.operands[0]
    if x not in env or not chain:
        return None
    ref, t = env[x], x.type
    for o in reversed(chain):
        if o.name == "slice":
            got = _contiguous_slice(o, t)
            if got is None:
                return None
            skip, t = got
            ref = replace(ref, offset=ref.offset + skip * t.dtype.itemsize, size=t.nbytes)
            continue
        t = bitcast_result_type(o, t)
        if t is None:
            return None
    return ref, t


def _contiguous_slice(op, t):
    """``(elements skipped, result type in t's layout)`` when the slice ``op`` of a value
    stored as ``t`` is one contiguous range of it: unit strides, every dimension more minor
    than the first one it cuts taken whole, every one more major taken at one index. None
    otherwise."""
    st, li = list(op.attrs["start_indices"]), list(op.attrs["limit_indices"])
    if any(s != 1 for s in (op.attrs.get("strides") or [1] * len(st))):
        return None
    order = list(t.minor_to_major)
    cut = next((i for i, d in enumerate(order) if li[d] - st[d] != t.shape[d]), len(order))
    if any(li[d] - st[d] != 1 for d in order[cut + 1:]):
        return None
    skip, stride = 0, 1
    for d in order:
        skip += st[d] * stride
        stride *= t.shape[d]
    return skip, op.results[0].type.with_layout(t.minor_to_major)


def _users(region) -> dict:
    """Each value's reader ops in ``region``; a region output is also read by the region's
    parent (marked with ``None``, which is in no epilogue)."""
    from hlo.ir.core import uses
    out = uses(region) if region is not None else {}
    for o in (region.outputs if region is not None else ()):
        out.setdefault(o, []).append(None)
    return out
