"""Deep copies of regions, functions and modules (new Values, same types and attributes)."""
from __future__ import annotations

from typing import Dict

from .core import Function, Module, Operation, Region, Value


def clone_region(r: Region, vmap: Dict[Value, Value]) -> Region:
    """Copy ``r``; values defined outside it map through ``vmap`` (or stay as they are)."""
    out = Region(r.arg_types, name=r.name)
    for a, b in zip(r.args, out.args):
        vmap[a] = b
    for op in r.ops:
        out.append(clone_op(op, vmap))
    out.outputs = [vmap.get(v, v) for v in r.outputs]
    out.output_loc = r.output_loc
    return out


def clone_op(op: Operation, vmap: Dict[Value, Value]) -> Operation:
    regions = [clone_region(r, vmap) for r in op.regions]
    new = Operation(op.name, [vmap.get(v, v) for v in op.operands], dict(op.attrs),
                    op.result_types, regions, op.loc)
    for a, b in zip(op.results, new.results):
        vmap[a] = b
    return new


def clone_function(fn: Function) -> Function:
    new = Function(fn.name, fn.arg_types, fn.visibility, fn.loc)
    new.dim_args = dict(fn.dim_args)
    new.arg_shardings = dict(fn.arg_shardings)
    new.result_shardings = dict(fn.result_shardings)
    vmap: Dict[Value, Value] = dict(zip(fn.args, new.args))
    body = clone_region(fn.body, vmap)
    new.body.ops = body.ops
    for op in new.body.ops:
        op.parent = new.body
    new.body.outputs = body.outputs
    # clone_region made fresh args; rebind uses of them to the function's own args.
    amap = dict(zip(body.args, new.args))
    for op in new.body.walk():
        op.operands = [amap.get(v, v) for v in op.operands]
    for r in _regions(new.body):
        r.outputs = [amap.get(v, v) for v in r.outputs]
    return new


def _regions(r: Region):
    yield r
    for op in r.walk():
        yield from op.regions


def clone_module(m: Module) -> Module:
    out = Module(m.name)
    for fn in m.functions.values():
        out.add(clone_function(fn))
    return out
