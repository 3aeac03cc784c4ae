"""The batching interpreter: replays a traced per-example region into the current trace,
batched.

``batch_ops(ops, env, size)`` walks ``ops`` in order. An op that reads no batched value is
copied as it is; any other is rewritten by its rule (``table.RULES``) or, for ops marked by
``custom_vjp`` / ``custom_jvp`` / ``checkpoint``, by its mark. ``Env`` maps each value of the
per-example program to ``(Tracer, batched)``; a value defined outside the region being
replayed (an enclosing trace's value, read through a closure) is unbatched.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from hlo.ir import Operation, Value
from hlo.ir.clone import clone_op

from ..autodiff import prims as P
from ..autodiff.backprop import _append, free_values
from ..autodiff.marks import MARKS, copy_mark
from ..errors import UnsupportedError
from ..tracing.abstract import aval_of_type
from ..tracing.tracer import Tracer, _stack, current_trace, lift
from .table import MARK_RULES, RULES, BatchContext


class Env:
    """Per-example value -> (Tracer of the batched program, batched?)."""

    def __init__(self, parent: Optional["Env"] = None):
        self.parent = parent
        self.vals: Dict[Value, Tuple[Tracer, bool]] = {}

    def get(self, v: Value) -> Tuple[Tracer, bool]:
        e = self
        while e is not None:
            r = e.vals.get(v)
            if r is not None:
                return r
            e = e.parent
        return outer_tracer(v), False

    def set(self, v: Value, t: Tracer, b: bool) -> None:
        self.vals[v] = (t, b)


def outer_tracer(v: Value) -> Tracer:
    """A Tracer of the (enclosing) trace that defines ``v``, lifted into the current one."""
    region = v.owner if v.is_arg else v.owner.parent
    for tr in reversed(_stack()):
        if tr.region is region:
            return lift(Tracer(tr, v, aval_of_type(v.type)))
    raise UnsupportedError("hlo.vmap: the function reads a traced value that belongs to no "
                           "enclosing trace (a leaked tracer?)")


def copy_unbatched(op: Operation, env: Env) -> List[Tracer]:
    """Copy ``op`` (which reads no batched value) into the current trace."""
    trace = current_trace()
    mapping = {}
    for v in list(op.operands) + (free_values(op.regions) if op.regions else []):
        mapping[v] = env.get(v)[0]._value
    new = clone_op(op, mapping)
    _append(trace, new)
    copy_mark(op, new, mapping)
    return [Tracer(trace, r, aval_of_type(r.type)) for r in new.results]


def reads_batched(op: Operation, env: Env) -> bool:
    if any(env.get(v)[1] for v in op.operands):
        return True
    return bool(op.regions) and any(env.get(v)[1] for v in free_values(op.regions))


def batch_ops(ops: Sequence[Operation], env: Env, size: int) -> None:
    ctx = BatchContext(size, env)
    for op in ops:
        mark = MARKS.get(op)
        if not reads_batched(op, env):
            outs = copy_unbatched(op, env)
            for r, t in zip(op.results, outs):
                env.set(r, t, False)
            continue
        ins = [env.get(v) for v in op.operands]
        with P.at(op.loc):
            if mark is not None:
                outs, bat = MARK_RULES[type(mark)](ctx, op)
            else:
                rule = RULES.get(op.name)
                if rule is None:
                    kw = {"location": op.loc} if op.loc is not None else {}
                    raise UnsupportedError(f"hlo.vmap cannot batch '{op.name}'", **kw)
                outs, bat = rule(ctx, op, [t for t, _ in ins], [b for _, b in ins])
        for r, t, b in zip(op.results, outs, bat):
            env.set(r, t, b)


def batch_region_inline(region, env: Env, size: int, args: Sequence[Tuple[Tracer, bool]] = ()):
    """Replay ``region`` (its arguments bound to ``args``) into the current trace; returns its
    outputs as (Tracer, batched) pairs."""
    inner = Env(env)
    for a, (t, b) in zip(region.args, args):
        inner.set(a, t, b)
    batch_ops(region.ops, inner, size)
    return [inner.get(v) for v in region.outputs]
