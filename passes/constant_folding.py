"""Constant folding: an op whose operands are all constants is evaluated once, at compile
time, by the reference interpreter (so folding has exactly the run-time semantics), and
replaced by a constant.

Limits: no result with more than ``Options.constant_fold_limit`` elements is made unless it is
a splat (printed and stored as one value); ``broadcast_in_dim`` and ``iota`` are folded only up
to ``SMALL`` elements, because in a fusion they cost nothing while a big constant costs memory;
control flow (``while``, ``if``, ``case``, ``call``), host callbacks and collectives (their
values depend on the other processes of a parallel run) are left to run."""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from hlo.ir import ops
from hlo.ir.clone import clone_op
from hlo.ir.core import Function, Module, Operation, Region, Value

from .base import Pass, register_pass
from .options import PassConfig
from .util import free_values, replace_values

SMALL = 64
NOT_FOLDED = ops.with_trait(ops.CONTROL_FLOW, ops.BARRIER, ops.KERNEL, ops.SIDE_EFFECT,
                            ops.COLLECTIVE) | {"constant"}


def evaluate(op: Operation, operand_values) -> Optional[list]:
    """Run ``op`` on constant operands with the interpreter; None when it cannot."""
    from hlo.ir.interp import InterpreterError
    from hlo.ir.interpreter import run

    m = Module("fold")
    fn = Function("main", [])
    m.add(fn)
    vals = []
    for v in operand_values:
        c = Operation("constant", [], {"value": v}, [_type_of(v)])
        fn.body.append(c)
        vals.append(c.result)
    vmap: Dict[Value, Value] = dict(zip(op.operands, vals))
    new = clone_op(op, vmap)
    for r in new.results:
        r.type = r.type.without_layout()
    fn.body.append(new)
    fn.body.outputs = list(new.results)
    try:
        return run(m, [], verify=False)
    except (InterpreterError, ArithmeticError, ValueError, NotImplementedError):
        return None


def _type_of(v: np.ndarray):
    from hlo.ir.types import TensorType, element_type
    return TensorType(v.shape, element_type(v.dtype))


def _is_splat(a: np.ndarray) -> bool:
    if a.size <= 1:
        return True
    flat = a.reshape(-1)
    bits = flat.view(np.uint8).reshape(flat.size, -1)
    return bool((bits == bits[0]).all())


class ConstantFolder:
    def __init__(self, limit: int):
        self.limit = limit

    def foldable(self, op: Operation, consts: Dict[Value, np.ndarray]) -> bool:
        if op.name in NOT_FOLDED or not op.results:
            return False
        if not all(v in consts for v in op.operands) or free_values(op):
            return False
        size = sum(r.type.size for r in op.results)
        if op.name in ("broadcast_in_dim", "iota") and size > SMALL:
            return False
        return True

    def fold_region(self, region: Region, consts: Dict[Value, np.ndarray]) -> bool:
        changed = False
        mapping: Dict[Value, Value] = {}
        out = []
        for op in region.ops:
            if mapping and any(v in mapping for v in op.operands):
                op.operands = [mapping.get(v, v) for v in op.operands]
            for sub in op.regions:
                changed |= self.fold_region(sub, consts)
            if op.name == "constant":
                consts[op.result] = op.attrs["value"]
                out.append(op)
                continue
            if self.foldable(op, consts):
                res = evaluate(op, [consts[v] for v in op.operands])
                if res is not None and all(
                        a.size <= self.limit or _is_splat(a) for a in res):
                    for r, a in zip(op.results, res):
                        a = np.ascontiguousarray(a.astype(r.type.np_dtype, copy=False)).reshape(r.type.shape)
                        c = Operation("constant", [], {"value": a}, [r.type], loc=op.loc)
                        c.parent = region
                        out.append(c)
                        consts[c.result] = a
                        mapping[r] = c.result
                    changed = True
                    continue
            out.append(op)
        if changed:
            region.ops = out
            replace_values(region, mapping)
        return changed


@register_pass("constant-folding", "evaluate ops on constants at compile time (size-limited)")
class ConstantFolding(Pass):
    name = "constant-folding"

    def __init__(self, config: PassConfig = None):
        config = config or PassConfig()
        self.folder = ConstantFolder(config.options.constant_fold_limit)

    def run(self, module: Module) -> bool:
        changed = False
        for fn in module.functions.values():
            changed |= self.folder.fold_region(fn.body, {})
        return changed
