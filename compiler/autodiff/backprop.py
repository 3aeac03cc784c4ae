"""Reverse mode over the traced IR: trace, inline the forward pass, walk it backwards.

``linearize(fn, primals)`` traces ``fn`` into a fresh region (the *forward region*, a private
record that is never run) whose arguments stand for the values being differentiated, then
copies its ops into the current trace with the arguments replaced by ``primals``: that copy is
the forward computation the program runs. The forward region stays untouched, so the backward
pass can tell an argument apart from the same array read through a closure (as in jax, only
the arguments are differentiated).

``backprop(ops, ...)`` walks ops in reverse, looks up each op's rule in the VJP table
(``hlo.autodiff.table``) and accumulates cotangents per IR value. Rules read primal values of
the copied forward pass and emit the backward ops into the current trace, so everything
``grad`` makes is ordinary traced IR: it composes with ``hlo.jit``, and ``grad(grad(f))``
differentiates the backward ops of the inner ``grad`` like any other ops.

Only *active* values carry cotangents: floating-point values that depend on a differentiated
argument. Ops marked by ``stop_gradient`` pass no cotangent.
"""
from __future__ import annotations

import weakref
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set

from hlo.ir import Operation, Region, Value
from hlo.ir.callbacks import OP_NAME as HOST_CALLBACK
from hlo.ir.clone import clone_op

from ..errors import UnsupportedError
from ..tracing.abstract import aval_of_type
from ..tracing.tracer import Trace, Tracer, current_trace, lift, trace_region
from . import prims
from .marks import MARKS, copy_mark
from .table import RULES, Eqn

# Ops whose result is the operand with no gradient flowing back (made by ``stop_gradient``).
STOP_GRADIENT_OPS: "weakref.WeakSet[Operation]" = weakref.WeakSet()


def _is_float_value(v: Value) -> bool:
    return v.type.dtype.is_float or v.type.dtype.is_complex


class Linearized:
    """A function traced and inlined for differentiation (see the module docstring)."""

    def __init__(self, region: Region, trace: Trace, values: Dict[Value, Value],
                 captured: Dict[Value, Tracer], inputs: List[Tracer], out_tree, out_avals):
        self.region = region
        self.trace = trace
        self._values = values  # forward-region value -> its copy in ``trace``
        self._captured = captured  # values of enclosing traces the forward region reads
        self._tracers: Dict[Value, Tracer] = {a: t for a, t in zip(region.args, inputs)}
        self.out_tree = out_tree
        self.out_avals = out_avals
        self.active = active_values(region.ops, [a for a in region.args if _is_float_value(a)])

    def primal_of(self, v: Value) -> Tracer:
        """The primal Tracer (in ``self.trace``) of a forward-region value."""
        t = self._tracers.get(v)
        if t is not None:
            return t
        t = self._captured.get(v)
        if t is None:
            w = self._values.get(v, v)
            t = Tracer(self.trace, w, aval_of_type(w.type))
        self._tracers[v] = t
        return t

    def outputs(self) -> List[Tracer]:
        """The function's results as Tracers of ``self.trace`` (with their weak types)."""
        out = []
        for v, a in zip(self.region.outputs, self.out_avals):
            t = self.primal_of(v)
            out.append(Tracer(t._trace, t._value, a) if t.aval != a else t)
        return out

    def backward(self, out_cts: Sequence[Optional[Tracer]]) -> List[Optional[Tracer]]:
        """Cotangents of the inputs (None for zero) given those of the outputs."""
        cts: Dict[Value, Tracer] = {}
        for v, ct in zip(self.region.outputs, out_cts):
            if ct is not None and v in self.active:
                cts[v] = prims.add_any(cts.get(v), ct)
        cts = backprop(self.region.ops, self.primal_of, self.active, cts)
        return [cts.get(a) for a in self.region.args]


def linearize(fn: Callable, primals: Sequence[Tracer], description: str) -> Linearized:
    """Trace ``fn(*primals)`` for differentiation with respect to ``primals`` (Tracers of the
    current trace) and inline its forward computation into the current trace."""
    trace = current_trace()
    traced = trace_region(fn, [p.aval for p in primals], name="forward", description=description)
    region = traced.region
    for t in traced.captured:  # the copy reads them from the current trace now
        lift(t)
    values: Dict[Value, Value] = {a: p._value for a, p in zip(region.args, primals)}
    for op in region.ops:
        new = clone_op(op, values)
        _append(trace, new)
        if op in STOP_GRADIENT_OPS:
            STOP_GRADIENT_OPS.add(new)
        copy_mark(op, new, values)
    captured = {t._value: t for t in traced.captured}
    return Linearized(region, trace, values, captured, list(primals), traced.out_tree,
                      traced.out_avals)


def _is_print(op: Operation) -> bool:
    return op.name == HOST_CALLBACK and not op.results


def recompute(trace: Trace, op: Operation, values: Dict[Value, Value]) -> Optional[Operation]:
    """Append a copy of the forward op ``op`` that the backward pass recomputes (``values``
    maps what it reads to the copies). Host callbacks without results (``hlo.debug.print``)
    are left out, in its regions too: they run once, in the forward pass, as in jax."""
    if _is_print(op):
        return None
    new = clone_op(op, values)
    for o in list(new.walk()):
        for r in o.regions:
            r.ops = [x for x in r.ops if not _is_print(x)]
    _append(trace, new)
    return new


def _append(trace: Trace, op: Operation) -> None:
    b = trace.builder
    if b.index is None:
        trace.region.append(op)
    else:
        trace.region.insert(b.index, op)
        b.index += 1


def free_values(regions: Iterable[Region]) -> List[Value]:
    """Values that ops inside ``regions`` read but that are defined outside them, in order."""
    seen: Set[Value] = set()
    out: List[Value] = []
    defined: Set[Value] = set()

    def use(v):
        if v not in defined and v not in seen:
            seen.add(v)
            out.append(v)

    def visit(r: Region):
        defined.update(r.args)
        for op in r.ops:
            for v in op.operands:
                use(v)
            for sub in op.regions:
                visit(sub)
            defined.update(op.results)
        for v in r.outputs:
            use(v)

    for r in regions:
        visit(r)
    return out


def reads(op: Operation) -> List[Value]:
    """Everything ``op`` depends on: its operands, then values its regions read directly."""
    if not op.regions:
        return op.operands
    return list(op.operands) + [v for v in free_values(op.regions) if v not in op.operands]


def active_values(ops: Sequence[Operation], seeds: Iterable[Value]) -> Set[Value]:
    """Floating-point values of ``ops`` that depend on ``seeds`` (which are included)."""
    active = set(seeds)
    for op in ops:
        if op in STOP_GRADIENT_OPS:
            continue
        if any(v in active for v in reads(op)):
            active.update(r for r in op.results if _is_float_value(r))
    return active


def backprop(ops: Sequence[Operation], primal_of: Callable[[Value], Tracer], active: Set[Value],
             cts: Dict[Value, Tracer]) -> Dict[Value, Tracer]:
    """Propagate the cotangents ``cts`` (of values of ``ops``) back through ``ops``; returns
    the cotangents that reached values not produced by ``ops`` (arguments, free values)."""
    for op in reversed(ops):
        if not any(r in cts for r in op.results):
            continue
        out_cts = [cts.pop(r, None) for r in op.results]
        if op in STOP_GRADIENT_OPS:
            continue
        mark = MARKS.get(op)  # custom_vjp / custom_jvp / checkpoint: the op's own rule
        rule = mark.vjp if mark is not None else RULES.get(op.name)
        if rule is None:
            raise not_differentiable(op)
        needs = [v in active for v in op.operands]
        eqn = Eqn(op, [primal_of(v) for v in op.operands], [primal_of(r) for r in op.results],
                  out_cts, needs, primal_of, active)
        with prims.at(op.loc):
            in_cts = rule(eqn)
            if len(in_cts) != len(op.operands):
                raise prims.AutodiffInternalError(
                    f"the VJP rule of '{op.name}' returned {len(in_cts)} cotangents for "
                    f"{len(op.operands)} operands", location=None)
            pairs = list(zip(op.operands, in_cts)) + list(eqn.free_cts.items())
            for v, ct in pairs:
                if ct is None or v not in active:
                    continue
                if ct.shape != v.type.shape or ct.dtype != v.type.np_dtype:
                    raise prims.AutodiffInternalError(
                        f"the VJP rule of '{op.name}' returned a {ct.aval.str_short()} cotangent "
                        f"for a {v.type} value", location=None)
                cts[v] = prims.add_any(cts.get(v), ct)
    return cts


def not_differentiable(op: Operation, why: str = "") -> UnsupportedError:
    """The error for an op with no VJP rule (or an unsupported form of one), naming its line."""
    kw = {"location": op.loc} if op.loc is not None else {}
    return UnsupportedError(
        f"'{op.name}' is not differentiable yet{why}: hlo.grad needs the gradient of its result. "
        "If no gradient should flow through it, wrap its inputs in hlo.autodiff.stop_gradient", **kw)
