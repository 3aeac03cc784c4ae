"""Ops that carry a rule of their own: ``custom_vjp``, ``custom_jvp`` and ``checkpoint``.

Each is traced as a ``case`` op with a constant index and one branch holding the primal
computation (it reads its arguments from the enclosing trace), and is *marked* here with an
object that knows its arguments and its rules. Transformations consult the mark before the
op's table rule: the backward pass (``backprop``) calls ``mark.vjp(eqn)``, the batching
interpreter calls ``mark.batch(...)``. When an op is copied (``linearize`` inlines a traced
forward pass), ``copy_mark`` marks the copy, its argument values mapped like its operands.
Once every transformation has run, the simplification passes inline the one-branch ``case``.
"""
from __future__ import annotations

import weakref
from typing import Callable, Dict, List

from hlo.ir import Operation, Value


class Mark:
    """The rule object of one marked op; ``args`` are the values its branch computes from.
    Each kind defines ``vjp(eqn)`` (``backprop`` calls it in place of the op's table rule)."""

    vjp: Callable

    def __init__(self, args: List[Value]):
        self.args = list(args)

    def remap(self, mapping: Dict[Value, Value]) -> "Mark":
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.args = [mapping.get(v, v) for v in self.args]
        return new


MARKS: "weakref.WeakKeyDictionary[Operation, Mark]" = weakref.WeakKeyDictionary()


def copy_mark(old: Operation, new: Operation, mapping: Dict[Value, Value]) -> None:
    mark = MARKS.get(old)
    if mark is not None:
        MARKS[new] = mark.remap(mapping)
