"""Canonicalization: one spelling for things that can be written several ways, so that CSE
and the algebraic simplifier's patterns see them alike.

- Commutative ops and ``compare`` take a compile-time constant as their second operand
  (``compare`` flips its direction when swapped).
- ``select(not(p), a, b)`` is ``select(p, b, a)``.
- Attributes equal to their defaults (unit strides, zero padding, empty dimension lists) are
  dropped.
- A ``broadcast_in_dim`` that adds no elements and keeps the dimension order is a ``reshape``.
"""
from __future__ import annotations

import numpy as np

from hlo.ir import ops as op_table
from hlo.ir.core import Module, Operation

from .base import Pass, register_pass
from .rewrite import IN_PLACE, Rewriter, apply_patterns
from .util import COMMUTATIVE

SWAP_DIRECTION = {"EQ": "EQ", "NE": "NE", "GE": "LE", "LE": "GE", "GT": "LT", "LT": "GT"}


def _constant_like(rw: Rewriter, v) -> bool:
    return rw.splat(v) is not None or rw.const_value(v) is not None


def constant_second(op: Operation, rw: Rewriter):
    a, b = op.operands
    if _constant_like(rw, a) and not _constant_like(rw, b):
        op.operands = [b, a]
        if op.name == "compare":
            op.attrs["comparison_direction"] = SWAP_DIRECTION[op.attrs["comparison_direction"]]
        return IN_PLACE
    return None


def select_of_not(op: Operation, rw: Rewriter):
    p, a, b = op.operands
    pp = p.op
    if pp is not None and pp.name == "not" and pp.operands[0].type.dtype.is_pred:
        return [rw.build("select", [pp.operands[0], b, a])]
    return None


def _is_unit(v, unit) -> bool:
    return isinstance(v, (tuple, list)) and all(
        (tuple(x) == unit if isinstance(x, (tuple, list)) else x == unit) for x in v)


# Attribute values that mean the same as leaving the attribute out.
_DEFAULT_SPELLINGS = {
    ("slice", "strides"): 1,
    ("reduce_window", "window_strides"): 1, ("reduce_window", "base_dilations"): 1,
    ("reduce_window", "window_dilations"): 1, ("reduce_window", "padding"): (0, 0),
    ("convolution", "window_strides"): 1, ("convolution", "lhs_dilation"): 1,
    ("convolution", "rhs_dilation"): 1, ("convolution", "padding"): (0, 0),
    ("convolution", "window_reversal"): False,
}


def drop_default_attrs(op: Operation, rw: Rewriter):
    d = op_table.OPS.get(op.name)
    if d is None:
        return None
    drop = []
    for k, v in op.attrs.items():
        spec = d.attrs.get(k)
        if spec is None or spec.required:
            continue
        unit = _DEFAULT_SPELLINGS.get((op.name, k))
        default = spec.default
        if isinstance(v, np.ndarray):
            continue
        if v == default or (default is None and unit is not None and _is_unit(v, unit)):
            drop.append(k)
    if not drop:
        return None
    for k in drop:
        del op.attrs[k]
    return IN_PLACE


def broadcast_as_reshape(op: Operation, rw: Rewriter):
    x = op.operands[0]
    r = op.results[0]
    dims = op.attrs["broadcast_dimensions"]
    if x.type.size == r.type.size and list(dims) == sorted(dims):
        return [rw.build("reshape", [x], result_types=[r.type])]
    return None


PATTERNS = {name: [constant_second] for name in sorted(COMMUTATIVE | {"compare"})}
PATTERNS["select"] = [select_of_not]
PATTERNS["broadcast_in_dim"] = [broadcast_as_reshape]
for _name in ("slice", "reduce_window", "convolution", "dot_general", "gather", "scatter"):
    PATTERNS.setdefault(_name, []).append(drop_default_attrs)


@register_pass("canonicalize", "canonical operand order and attribute spellings")
class Canonicalize(Pass):
    name = "canonicalize"

    def __init__(self, config=None):
        pass

    def run(self, module: Module) -> bool:
        return apply_patterns(module, PATTERNS)
