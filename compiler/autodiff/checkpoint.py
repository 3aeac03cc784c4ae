"""``hlo.checkpoint`` (alias ``hlo.remat``): the backward pass recomputes what the forward
pass did not keep.

A call inside a trace emits the function as a marked one-branch ``case`` (``marks``). Its VJP
(``RematMark.vjp``) emits, in the backward pass, an ``optimization_barrier`` over the values
the function reads *and the output cotangents*, recomputes the function's ops from the
barrier's results and runs their VJP rules on the recomputed values. The barrier is what keeps
the recomputation: CSE cannot merge ops that read its results with the forward pass's ops
(which read the originals), and since it waits for the cotangents, the recomputation is
scheduled in the backward pass, so the forward pass's intermediates die early. That is how the
buffer plan (``Compiled.memory_analysis()``) shows the saving.

``policy`` chooses intermediates to keep instead of recomputing: a callable on an IR
``Operation`` returning True for ops whose results are saved (they become extra results of the
marked op). ``checkpoint_policies`` has jax's common ones.
"""
from __future__ import annotations

import functools
from typing import Callable, Dict, Optional

import numpy as np

from hlo.ir import Operation, Value

from ..base.boundary import api_boundary
from ..tracing.abstract import aval_of_type
from ..tracing.tracer import Tracer, current_trace, emit, is_tracing, trace_region
from ..tree_util import tree_unflatten
from . import prims as P
from .backprop import active_values, backprop, free_values, recompute
from .marks import MARKS, Mark


class checkpoint_policies:
    """Policies for ``hlo.checkpoint(f, policy=...)`` (jax.checkpoint_policies' common ones),
    called with each IR op of the checkpointed function: True keeps its results."""

    @staticmethod
    def everything_saveable(op: Operation) -> bool:
        return True

    @staticmethod
    def nothing_saveable(op: Operation) -> bool:
        return False

    @staticmethod
    def dots_saveable(op: Operation) -> bool:
        return op.name in ("dot_general", "convolution")

    @staticmethod
    def dots_with_no_batch_dims_saveable(op: Operation) -> bool:
        return op.name == "dot_general" and not op.attrs.get("lhs_batching_dimensions")

    checkpoint_dots = dots_saveable
    checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable


def checkpoint(fun: Callable, *, prevent_cse: bool = True, policy: Optional[Callable] = None,
               static_argnums=()) -> Callable:
    """``fun`` whose intermediates the backward pass recomputes (jax.checkpoint)."""
    if not callable(fun):
        raise TypeError(f"hlo.checkpoint expects a callable, got {type(fun).__name__}")
    if policy is not None and not callable(policy):
        raise TypeError(f"hlo.checkpoint: policy must be a callable on an IR op, got {policy!r}")

    @api_boundary
    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        __tracebackhide__ = True
        if not is_tracing():
            return fun(*args, **kwargs)  # nothing to differentiate: the function itself
        tr = trace_region(lambda: fun(*args, **kwargs), [], name="branch0",
                          description=f"the checkpointed function {getattr(fun, '__name__', '')}")
        region = tr.region
        n_out = len(region.outputs)
        saved = []
        if policy is not None:
            for op in region.ops:
                if policy(op):
                    saved += [r for r in op.results if r not in region.outputs]
            region.outputs = region.outputs + saved
        outs = emit("case", [np.int32(0)], regions=[region])
        MARKS[outs[0]._value.owner] = RematMark(free_values([region]), n_out, saved)
        outs = [Tracer(t._trace, t._value, a) for t, a in zip(outs, tr.out_avals)]
        return tree_unflatten(tr.out_tree, outs)

    wrapper.__wrapped__ = fun  # type: ignore[attr-defined]  # (a function's attribute)
    return wrapper


remat = checkpoint


class RematMark(Mark):
    """``saved``: branch values kept as extra results (the values the branch reads are found
    when the backward pass runs: the op may have been copied or batched since)."""

    def __init__(self, args, n_out: int, saved):
        super().__init__(args)
        self.n_out = n_out
        self.saved = list(saved)

    def vjp(self, e):
        op = e.op
        region = op.regions[0]
        cts = [ct for ct in e.cts[:self.n_out] if ct is not None]
        reads = free_values([region])
        primals = [e.primal_of(v) for v in reads]
        fenced = P.emit("optimization_barrier", primals + cts)
        trace = current_trace()
        values: Dict[Value, Value] = {v: t._value for v, t in zip(reads, fenced)}
        keep = {v: e.outs[self.n_out + k] for k, v in enumerate(self.saved)}
        for inner in region.ops:
            if inner.results and all(r in keep for r in inner.results):
                values.update((r, keep[r]._value) for r in inner.results)
                continue
            recompute(trace, inner, values)
        tracers: Dict[Value, Tracer] = {}

        def primal_of(v: Value) -> Tracer:
            t = tracers.get(v)
            if t is None:
                t = keep.get(v)
                if t is None:
                    w = values.get(v)
                    t = e.primal_of(v) if w is None else Tracer(trace, w, aval_of_type(w.type))
                tracers[v] = t
            return t

        active = active_values(region.ops, [v for v in reads if v in e.active])
        out_cts = {}
        fenced_cts = iter(fenced[len(primals):])
        for v, ct in zip(region.outputs, e.cts[:self.n_out]):
            if ct is not None:
                c = next(fenced_cts)
                if v in active:
                    out_cts[v] = P.add_any(out_cts.get(v), c)
        got = backprop(region.ops, primal_of, active, out_cts)
        for v in reads:
            ct = got.get(v)
            if ct is not None and v in e.active:
                e.free_cts[v] = P.add_any(e.free_cts.get(v), ct)
        return [None]

    def remap(self, mapping):
        new = super().remap(mapping)
        new.saved = [mapping.get(v, v) for v in self.saved]
        return new
