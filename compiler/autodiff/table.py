"""The VJP table: one rule per op name, like the op table in ``hlo.ir.ops``.

A rule receives an ``Eqn`` (one forward op, seen from the backward pass) and returns one
cotangent per operand: a Tracer of the operand's shape and dtype, or None for zero. It may skip
operands whose ``needs`` flag is False (they do not depend on what is being differentiated), and
it never sees an op whose results all have zero cotangents. Rules emit ops through
``hlo.autodiff.prims``; those ops carry the forward op's source location.

Rule modules register with ``@vjp_rule("name", ...)``; ``hlo.autodiff`` imports them all.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

from hlo.ir import Operation, Value
from hlo.ir import ops as op_table

from ..tracing.tracer import Tracer

Rule = Callable[["Eqn"], List[Optional[Tracer]]]

RULES: Dict[str, Rule] = {}


def vjp_rule(*names: str):
    """Register the decorated function as the VJP rule of each op in ``names``."""
    def register(fn: Rule) -> Rule:
        for n in names:
            if n in RULES:
                raise ValueError(f"VJP rule for '{n}' is defined twice")
            RULES[n] = fn
        return fn
    return register


class Eqn:
    """One forward op in the backward pass.

    ``args``: primal operands (Tracers of the trace the backward pass writes to); ``outs``:
    primal results; ``cts``: cotangents of the results (None = zero); ``needs``: which operands
    want a cotangent. ``attrs`` are the op's attributes (with the op table's defaults filled in
    by ``attr``). ``primal_of`` maps any forward IR value the op reads (also from inside its
    regions) to its primal Tracer; control-flow rules put cotangents of values their regions
    read directly into ``free_cts``."""

    __slots__ = ("op", "args", "outs", "cts", "needs", "primal_of", "active", "free_cts")

    def __init__(self, op: Operation, args, outs, cts, needs, primal_of, active):
        self.op = op
        self.args: List[Tracer] = args
        self.outs: List[Tracer] = outs
        self.cts: List[Optional[Tracer]] = cts
        self.needs: List[bool] = needs
        self.primal_of: Callable[[Value], Tracer] = primal_of
        self.active = active
        self.free_cts: Dict[Value, Tracer] = {}

    @property
    def attrs(self):
        return self.op.attrs

    def attr(self, name: str):
        return op_table.get(self.op.name).attr(self.op.attrs, name)

    @property
    def ct(self) -> Tracer:
        """The cotangent of a single-result op (never None: such ops are skipped)."""
        return self.cts[0]
