"""VJP rules of control flow: ``if``, ``case`` and ``while``.

Branches take no arguments; they read enclosing values directly. The VJP is the same kind of op
on the same predicate or index, whose branch ``k`` recomputes branch ``k`` of the forward op and
runs the backward pass through it, returning the cotangents of every active value the forward
branches read (zeros from branches that do not read it). Only the branch that ran in the
forward pass runs in the backward pass.

``while`` loops whose trip count ``n`` is a compile-time constant (``fori_loop`` with static
bounds, ``scan``: a counter that starts at a constant, steps by 1 and is compared with a
constant) get two loops: a taping loop runs the iterations again and stores each one's incoming
carry in ``[n, ...]`` arrays (except carries the backward pass never reads, such as scan's
stacked outputs), then a backward loop walks the iterations from last to first, recomputing
each body from its taped carry and running the body's VJP, with the carry's cotangent and the
cotangents of values the body reads from outside as its state. Other loops (``while_loop`` with
a data-dependent condition) are a clear error naming the loop's line. (``call`` has no rule:
traced programs do not contain it.)
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from hlo.ir import Operation, Region, Value

from ..errors import UnsupportedError
from ..tracing.abstract import aval_of_type
from ..tracing.tracer import Tracer, current_trace, lift, trace_region
from . import prims as P
from .backprop import STOP_GRADIENT_OPS, active_values, backprop, free_values, not_differentiable, recompute
from .table import Eqn, vjp_rule


@vjp_rule("if", "case")
def _branches(e: Eqn):
    free = [v for v in free_values(e.op.regions) if v in e.active]
    if not free:
        return [None]
    regions = [_backward_branch(e, r, free) for r in e.op.regions]
    cts = P.emit(e.op.name, [e.args[0]], regions=regions)
    for v, ct in zip(free, cts):
        e.free_cts[v] = ct
    return [None]


def _backward_branch(e: Eqn, region: Region, free: List[Value]) -> Region:
    def body():
        trace = current_trace()
        values: Dict[Value, Value] = {}
        for v in free_values([region]):
            values[v] = lift(e.primal_of(v))._value  # read from the enclosing trace
        outer = set(values)
        for op in region.ops:
            recompute(trace, op, values)
        tracers: Dict[Value, Tracer] = {}

        def primal_of(v: Value) -> Tracer:
            if v in outer or v not in values:
                return e.primal_of(v)
            t = tracers.get(v)
            if t is None:
                t = tracers[v] = Tracer(trace, values[v], aval_of_type(v.type))
            return t

        active = active_values(region.ops, [v for v in free if v in outer])
        cts: Dict[Value, Tracer] = {}
        for v, ct in zip(region.outputs, e.cts):
            if ct is not None and v in active:
                cts[v] = P.add_any(cts.get(v), ct)
        got = backprop(region.ops, primal_of, active, cts)
        return [got[v] if v in got else P.zeros(v.type.shape, v.type.np_dtype) for v in free]

    return trace_region(body, [], name=region.name,
                        description=f"the backward pass of '{e.op.name}' ({region.name})").region


# --------------------------------------------------------------------------------------------
# while
# --------------------------------------------------------------------------------------------

def _constant_int(v: Value) -> Optional[int]:
    op = v.op
    if op is None or op.name != "constant" or v.type.rank != 0 or not v.type.dtype.is_int:
        return None
    return int(np.asarray(op.attrs["value"]))


def static_trip_count(op: Operation) -> Optional[int]:
    """The number of iterations of a ``while`` whose condition is ``counter < C`` (or ``<=``)
    for a counter that starts at a constant and whose body adds 1; None for any other loop."""
    cond, body = op.regions
    test = cond.outputs[0].op if len(cond.outputs) == 1 else None
    if test is None or test.name != "compare":
        return None
    direction = test.attrs["comparison_direction"]
    counter, bound = test.operands
    if direction not in ("LT", "LE") or counter.owner is not cond or not counter.is_arg:
        return None
    k = counter.index
    c_bound, c_init = _constant_int(bound), _constant_int(op.operands[k])
    step = body.outputs[k].op
    if c_bound is None or c_init is None or step is None or step.name != "add":
        return None
    a, b = step.operands
    arg = body.args[k]
    if not ((a is arg and _constant_int(b) == 1) or (b is arg and _constant_int(a) == 1)):
        return None
    return max(0, c_bound - c_init + (1 if direction == "LE" else 0))


def _untaped(body: Region) -> List[bool]:
    """Per carry: True when the backward pass never reads its value, so the tape can skip it:
    the carry is unused by the body's ops, or only the target of a ``dynamic_update_slice``
    whose result is only returned (scan's stacked outputs): that VJP needs the target's shape
    only."""
    users: Dict[Value, List[Operation]] = {}
    for op in body.ops:
        reads = list(op.operands) + (free_values(op.regions) if op.regions else [])
        for v in dict.fromkeys(reads):
            users.setdefault(v, []).append(op)
    out = []
    for a in body.args:
        ok = True
        for op in users.get(a, []):
            ok = ok and (op.name == "dynamic_update_slice" and op.operands[0] is a
                         and a not in op.operands[1:] and op.result not in users)
        out.append(ok)
    return out


def _clone_body(body: Region, carry: List[Tracer], outer: Dict[Value, Tracer]) -> Dict[Value, Value]:
    """Copy ``body``'s ops into the current trace, reading ``carry`` and the primal values
    ``outer`` of what it reads from outside; returns the map from body values to the copies."""
    trace = current_trace()
    values = {v: lift(t)._value for v, t in outer.items()}
    values.update((a, lift(c)._value) for a, c in zip(body.args, carry))
    for op in body.ops:
        new = recompute(trace, op, values)
        if new is not None and op in STOP_GRADIENT_OPS:
            STOP_GRADIENT_OPS.add(new)
    return values


def _tracer(v: Value) -> Tracer:
    return Tracer(current_trace(), v, aval_of_type(v.type))


@vjp_rule("while")
def _while(e: Eqn):
    """Reverse mode through a loop with a static trip count ``n``: a forward loop recomputes the
    iterations and records each one's carry on a tape (``[n, ...]`` arrays), then a backward
    loop runs the iterations' VJPs from the last to the first, reading the tape."""
    n = static_trip_count(e.op)
    if n is None:
        raise not_differentiable(e.op, " (a loop whose trip count is not a compile-time constant; "
                                       "fori_loop with static bounds and scan are differentiable)")
    if n == 0:
        return list(e.cts)
    body = e.op.regions[1]
    outer = {v: e.primal_of(v) for v in free_values([body])}
    carry_types = [a.type for a in body.args]
    taped = [not u for u in _untaped(body)]
    tapes = _record(body, e.args, taped, outer, n)
    floats = [k for k, t in enumerate(carry_types) if t.dtype.is_float or t.dtype.is_complex]
    free = [v for v in outer if v in e.active]
    ct0 = [e.cts[k] if e.cts[k] is not None else P.zeros(carry_types[k].shape, carry_types[k].np_dtype)
           for k in floats]
    free0 = [P.zeros(v.type.shape, v.type.np_dtype) for v in free]
    i32 = np.int32

    def cond(j, *rest):
        return P.compare(j, P.const(n, i32), "LT")

    def step(j, *state):
        cts_in, acc = list(state[:len(floats)]), list(state[len(floats):])
        t = P.sub(P.const(n - 1, i32), j)
        carry = []
        tape_it = iter(tapes)
        for k, ty in enumerate(carry_types):
            if taped[k]:
                row = P.dynamic_slice(next(tape_it), [t] + [P.const(0, i32)] * ty.rank, (1,) + ty.shape)
                carry.append(P.reshape(row, ty.shape))
            else:  # never read by the backward pass: any value of the right type will do
                carry.append(P.zeros(ty.shape, ty.np_dtype))
        values = _clone_body(body, carry, outer)
        tracers: Dict[Value, Tracer] = {}

        def primal_of(v: Value) -> Tracer:
            if v in outer:
                return outer[v]
            if v not in tracers:
                tracers[v] = _tracer(values[v])
            return tracers[v]

        active = active_values(body.ops, [body.args[k] for k in floats] + free)
        cts: Dict[Value, Tracer] = {}
        for k, ct in zip(floats, cts_in):
            v = body.outputs[k]
            if v in active:
                cts[v] = P.add_any(cts.get(v), ct)
        got = backprop(body.ops, primal_of, active, cts)
        new_cts = [got.get(body.args[k]) for k in floats]
        new_cts = [c if c is not None else P.zeros_like(old) for c, old in zip(new_cts, cts_in)]
        new_acc = [_accumulate(a, got.get(v)) for a, v in zip(acc, free)]
        return [P.add(j, P.const(1, i32))] + new_cts + new_acc

    avals = [aval_of_type(P.ir_type((), i32))] + [c.aval for c in ct0] + [z.aval for z in free0]
    regions = [trace_region(cond, avals, name="cond", description="the backward loop's condition").region,
               trace_region(step, avals, name="body", description="the backward loop's body").region]
    res = P.emit("while", [P.const(0, i32)] + ct0 + free0, regions=regions)
    out: List[Optional[Tracer]] = [None] * len(e.args)
    for k, ct in zip(floats, res[1:1 + len(floats)]):
        out[k] = ct if e.needs[k] else None
    for v, ct in zip(free, res[1 + len(floats):]):
        e.free_cts[v] = ct
    return out


def _is_zero_splat(v: Value) -> bool:
    op = v.op
    if op is not None and op.name == "broadcast_in_dim":
        op = op.operands[0].op
    return op is not None and op.name == "constant" and not np.any(op.attrs["value"])


def _accumulate(acc: Tracer, ct: Optional[Tracer]) -> Tracer:
    """``acc + ct``. When ``ct`` is zeros with one window written (the VJP of scan's
    ``xs[i]``), only that window of ``acc`` is updated, so a loop does O(window) work per
    iteration instead of O(acc)."""
    if ct is None:
        return acc
    op = ct._value.op
    if op is not None and op.name == "dynamic_update_slice" and _is_zero_splat(op.operands[0]):
        update, starts = _tracer(op.operands[1]), [_tracer(i) for i in op.operands[2:]]
        window = P.dynamic_slice(acc, starts, update.shape)
        return P.dynamic_update_slice(acc, P.add(window, update), starts)
    return P.add(acc, ct)


def _record(body: Region, init: List[Tracer], taped: List[bool], outer: Dict[Value, Tracer],
            n: int) -> List[Tracer]:
    """A loop that runs the ``n`` iterations again, keeping each iteration's incoming carry
    (the taped ones) in ``[n, ...]`` arrays; returns those arrays."""
    i32 = np.int32
    tape0 = [P.zeros((n,) + x.shape, x.dtype) for x, t in zip(init, taped) if t]

    def cond(j, *rest):
        return P.compare(j, P.const(n, i32), "LT")

    def step(j, *state):
        carry, tapes = list(state[:len(init)]), list(state[len(init):])
        tape_it = iter(range(len(tapes)))
        for x, t in zip(carry, taped):
            if t:
                i = next(tape_it)
                starts = [j] + [P.const(0, i32)] * x.ndim
                tapes[i] = P.dynamic_update_slice(tapes[i], P.reshape(x, (1,) + x.shape), starts)
        values = _clone_body(body, carry, outer)
        new = [_tracer(values[v]) for v in body.outputs]
        return [P.add(j, P.const(1, i32))] + new + tapes

    avals = [aval_of_type(P.ir_type((), i32))] + [x.aval for x in init] + [t.aval for t in tape0]
    regions = [trace_region(cond, avals, name="cond", description="the taping loop's condition").region,
               trace_region(step, avals, name="body", description="the taping loop's body").region]
    res = P.emit("while", [P.const(0, i32)] + list(init) + tape0, regions=regions)
    return res[1 + len(init):]


# --------------------------------------------------------------------------------------------
# host_callback
# --------------------------------------------------------------------------------------------

@vjp_rule("host_callback")
def _host_callback(e: Eqn):
    # Called only when a result carries a cotangent: a pure_callback's value is differentiated.
    # (A debug print has no results: it stays in the forward pass and prints the primals.)
    kw = {"location": e.op.loc} if e.op.loc is not None else {}
    raise UnsupportedError(
        f"{e.attr('what') or 'a host callback'} has no derivative: pure callbacks do not support "
        "JVP or VJP (as in jax). Define one with hlo.custom_vjp around the call, or wrap its "
        "inputs in hlo.autodiff.stop_gradient", **kw)
