"""The interpreter's op handler table and its error type.

A handler implements one op: ``handler(interp, op, ins, env) -> list of numpy arrays``, where
``ins`` are the operand values (numpy arrays), ``env`` is the scope the op runs in (regions it
evaluates may read values of enclosing scopes) and ``interp`` evaluates regions and calls.
Handlers never modify their inputs: values are immutable, and arrays may be shared views.
"""
from __future__ import annotations

from typing import Callable, Dict

from .. import ops as op_table
from ..errors import IRError


class InterpreterError(IRError):
    """The interpreter cannot run a program: wrong arguments, an op it does not implement, or
    an op that fails at run time. Messages name the op, its operand types and location."""


HANDLERS: Dict[str, Callable] = {}

# Ops whose handlers work unchanged when every value is a batch of scalars (see
# ``Interpreter.eval_region_batched``): the elementwise ops (by trait: their handlers only look
# at element types, never at shapes) and the handlers registered with ``batchable=True``; a
# few more get batch-specific handlers there.
ELEMENTWISE: set = set(op_table.with_trait(op_table.ELEMENTWISE))


def handler(*names: str, batchable: bool = False):
    def deco(fn):
        for n in names:
            if n in HANDLERS:
                raise ValueError(f"two interpreter handlers for '{n}'")
            HANDLERS[n] = fn
            if batchable:
                ELEMENTWISE.add(n)
        return fn
    return deco


def attr(op, name):
    """An attribute of ``op`` or its default from the op table."""
    from .. import ops as op_table
    if name in op.attrs:
        return op.attrs[name]
    return op_table.OPS[op.name].attr(op.attrs, name)
