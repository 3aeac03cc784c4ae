"""Lowering the collectives: each becomes a ``HostCall`` step whose site record carries the op
(``collective``: its name, attributes, result shapes and its computation's op), which the CPU
runtime runs in memory across the devices of an SPMD run (``hlo.runtime.cpu.collectives``).
The record names no callable of this process, so the program is cached and saved as usual.

A reduction's computation must be one commutative op of its two arguments (add, multiply,
maximum, minimum, and, or, xor), what XLA's and NCCL's collectives offer; any other body is an
error naming the op's line. ``run_parallel`` (the interpreter's grid of programs) is declined.
"""
from __future__ import annotations

from hlo.ir import ops as op_table
from hlo.passes.util import scalar_body_op
from hlo.runtime.steps import HostCall, type_desc

from .scalar_ops import UnsupportedOp

# The ops lowered here: the collective trait, less run_parallel (declined by the emitters).
LOWERED = frozenset(op_table.with_trait(op_table.COLLECTIVE)) - {"run_parallel"}
REDUCTIONS = ("add", "multiply", "maximum", "minimum", "and", "or", "xor")


def lower_collective(lw, op, dests, env) -> None:
    from hlo.runtime.cpu.collectives import record
    where = str(op.loc) if op.loc is not None else ""
    computation = None
    if op.regions:
        computation = scalar_body_op(op.regions[0])
        if computation not in REDUCTIONS:
            raise UnsupportedOp(f"'{op.name}': its computation must be one "
                                f"{'/'.join(REDUCTIONS)} of its two arguments on this target")
    values = list(op.operands) + list(op.results)
    types = [type_desc(v.type) for v in values]
    site = len(lw.host_sites)
    rec = record(op.name, dict(op.attrs), [r.type.shape for r in op.results], computation, where)
    lw.host_sites.append({"callback_id": 0, "types": types, "operands": len(op.operands),
                          "where": where, "collective": rec})
    lw.steps.append(HostCall(site, 0, [env[v] for v in op.operands] + list(dests),
                             [False] * len(op.operands) + [True] * len(dests), types,
                             op.name + (f" at {where}" if where else "")))
