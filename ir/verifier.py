"""The verifier: checks every op against its definition in the op table, SSA scoping,
region signatures, and calls between functions."""
from __future__ import annotations

from typing import Optional, Set

from . import ops as op_table
from .core import Function, Module, Operation, Region, Value
from .dim_expr import InconclusiveDimensionError, SymbolicDimError
from .errors import VerifyError
from .ops import OpError


def describe(op: Operation) -> str:
    """``'add' (operands f32[4], f32[5]) at model.py:12`` — how errors name an op."""
    where = f" at {op.loc}" if op.loc is not None else ""
    types = ", ".join(str(t) for t in op.operand_types)
    return f"'{op.name}' (operands: {types or 'none'}){where}"


def op_error(op: Operation, message: str) -> VerifyError:
    return VerifyError(f"{describe(op)}: {message}", op)


def verify_op_local(op: Operation) -> None:
    """Check one op's own rules (not its scoping): operand and region counts, attributes,
    result types. Normalizes attribute values in place."""
    try:
        d = op_table.get(op.name)
    except OpError as e:
        raise op_error(op, str(e)) from None
    try:
        if d.num_operands is not None and len(op.operands) != d.num_operands:
            raise OpError(f"expects {d.num_operands} operand(s), got {len(op.operands)}")
        if len(d.regions) == 1 and d.regions[0].startswith("*"):
            if not op.regions:
                raise OpError(f"needs at least one {d.regions[0][1:]} region")
        elif len(op.regions) != len(d.regions):
            raise OpError(f"expects {len(d.regions)} region(s), got {len(op.regions)}")
        op.attrs = d.normalize_attrs(op.attrs)
        inferred = d.infer(op.operand_types, op.attrs, op.regions)
        got = [t.without_layout() for t in op.result_types]
        if inferred is not None:
            want = [t.without_layout() for t in inferred]
            if d.result_dtype_free:
                ok = len(got) == len(want) and all(g.shape == w.shape for g, w in zip(got, want))
            else:
                ok = got == want
            if not ok:
                raise OpError(f"result type(s) {', '.join(map(str, got)) or 'none'} do not match the "
                              f"inferred {', '.join(map(str, want)) or 'none'}")
        elif not op.results and op.name != "call" and not d.has(op_table.SIDE_EFFECT):
            raise OpError("has no result")
        if d.verify is not None:
            d.verify(op.operand_types, op.attrs, op.regions, op.result_types)
    except OpError as e:
        raise op_error(op, str(e)) from None
    except (InconclusiveDimensionError, SymbolicDimError) as e:  # symbolic shapes (dim_expr.py)
        raise op_error(op, f"symbolic dimensions: {e}") from None


def _verify_region(region: Region, visible: Set[Value], module: Optional[Module],
                   outer: tuple = ()) -> None:
    """Check ``region``: its ops see ``visible`` (the enclosing scope at the op that owns the
    region, as it grows), then the sets in ``outer`` (scopes further out). Scopes are chained,
    not copied, so a function with many nested regions is checked in linear time."""
    scope = set(region.args)
    chain = (visible,) + outer if visible else outer
    for op in region.ops:
        if op.parent is not region:
            raise op_error(op, "op's parent link is stale")
        for i, v in enumerate(op.operands):
            if v not in scope and not any(v in s for s in chain):
                raise op_error(op, f"operand #{i} ({v.type}) is not defined before this op in its scope")
        verify_op_local(op)
        for r in op.regions:
            if r.parent_op is not op:
                raise op_error(op, f"region '{r.name}' has a stale parent link")
            # Regions of hlo ops are isolated from above except fusion/while/if/case bodies,
            # which StableHLO lets read enclosing values; we allow it uniformly.
            _verify_region(r, scope, module, chain)
        if op.name == "call" and module is not None:
            _verify_call(op, module)
        scope.update(op.results)
    for i, v in enumerate(region.outputs):
        if v not in scope and not any(v in s for s in chain):
            raise VerifyError(f"region '{region.name}' returns value #{i} ({v.type}) that is not in scope")


def _verify_call(op: Operation, module: Module) -> None:
    callee = op.attrs["callee"]
    if callee not in module:
        raise op_error(op, f"calls unknown function @{callee}")
    fn = module[callee]
    want_in = [t.without_layout() for t in fn.arg_types]
    got_in = [t.without_layout() for t in op.operand_types]
    if want_in != got_in:
        raise op_error(op, f"@{callee} takes ({', '.join(map(str, want_in))}), called with ({', '.join(map(str, got_in))})")
    want_out = [t.without_layout() for t in fn.result_types]
    got_out = [t.without_layout() for t in op.result_types]
    if want_out != got_out:
        raise op_error(op, f"@{callee} returns ({', '.join(map(str, want_out))}), call expects ({', '.join(map(str, got_out))})")


def verify_function(fn: Function) -> None:
    for i, sym in fn.dim_args.items():  # dimension arguments: scalar integers (issue 38)
        if not 0 <= i < len(fn.args) or fn.args[i].type.rank or not fn.args[i].type.dtype.is_int:
            what = str(fn.args[i].type) if 0 <= i < len(fn.args) else "missing"
            raise VerifyError(f"@{fn.name}: dimension argument #{i} ({sym}) must be a scalar "
                              f"integer, is {what}")
    _verify_region(fn.body, set(), fn.module)


def verify_module(module: Module) -> None:
    """Raise VerifyError at the first broken rule anywhere in the module."""
    for fn in module.functions.values():
        if fn.module is not module:
            raise VerifyError(f"function @{fn.name} is not attached to module @{module.name}")
        verify_function(fn)
    _check_no_recursion(module)


def _check_no_recursion(module: Module) -> None:
    graph = {name: {op.attrs["callee"] for op in fn.walk() if op.name == "call"}
             for name, fn in module.functions.items()}
    state = {}

    def visit(n, path):
        if state.get(n) == 1:
            raise VerifyError("recursive calls are not allowed: " + " -> ".join("@" + p for p in path + [n]))
        if state.get(n) == 2:
            return
        state[n] = 1
        for m in sorted(graph.get(n, ())):
            visit(m, path + [n])
        state[n] = 2

    for n in graph:
        visit(n, [])
