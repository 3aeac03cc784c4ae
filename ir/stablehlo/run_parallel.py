"""``interpreter.run_parallel`` of the StableHLO test vectors -> hlo's ``run_parallel`` op.

``programs = [[@f, @g], [@h, @k]]`` is a grid of ``num_replicas`` rows of ``num_partitions``
function names; the operands are every process's arguments in that (replica-major) order and
the results every process's results. hlo's op holds one region per process whose body is a
``call`` of the program, so the passes inline and optimize each process's program like any
other call. ``infeed`` (a process reading values pushed by the test) is unsupported.
"""
from __future__ import annotations

from typing import List

from ..core import Region
from ..types import TensorType
from .errors import StableHLOError, UnsupportedError
from .typemap import tensor_from_mlir


def import_run_parallel(imp, op, attrs, operands, rtypes, b, loc) -> List:
    from jaxlib.mlir import ir
    for k in attrs:
        if k not in ("programs",):
            raise UnsupportedError(f"attribute '{k}' of interpreter.run_parallel",
                                   "only programs is supported (no infeed)", loc)
    if "programs" not in attrs:
        raise StableHLOError(f"interpreter.run_parallel without programs{_at(loc)}")
    grid = []
    rows = ir.ArrayAttr(attrs["programs"])
    for i in range(len(rows)):
        row = ir.ArrayAttr(rows[i])
        grid.append([ir.FlatSymbolRefAttr(row[j]).value for j in range(len(row))])
    if not grid or not grid[0] or any(len(r) != len(grid[0]) for r in grid):
        raise StableHLOError(f"interpreter.run_parallel: programs must be a non-empty grid of "
                             f"replicas x partitions{_at(loc)}")
    regions, k, out_types = [], 0, []
    for row in grid:
        for sym in row:
            if sym not in imp.names:
                raise StableHLOError(f"interpreter.run_parallel runs unknown function @{sym}{_at(loc)}")
            ftype = ir.FunctionType(imp.func_ops[sym].operation.attributes["function_type"].value)
            ins = [tensor_from_mlir(t, loc) for t in ftype.inputs]
            outs = [tensor_from_mlir(t, loc) for t in ftype.results]
            r = Region(ins, name=f"program{len(regions)}")
            from ..builder import Builder
            call = Builder(r, loc).op("call", list(r.args), {"callee": imp.names[sym]}, result_types=outs)
            r.outputs = list(call.results)
            regions.append(r)
            k += len(ins)
            out_types.extend(outs)
    if k != len(operands):
        raise StableHLOError(f"interpreter.run_parallel: the programs take {k} arguments, "
                             f"{len(operands)} are given{_at(loc)}")
    if [t.without_layout() for t in out_types] != [TensorType(t.shape, t.dtype) for t in rtypes]:
        raise StableHLOError(f"interpreter.run_parallel: results do not match the programs' "
                             f"results{_at(loc)}")
    res = b.op("run_parallel", list(operands), {"num_replicas": len(grid), "num_partitions": len(grid[0])},
               result_types=list(rtypes), regions=regions)
    return list(res.results)


def _at(loc) -> str:
    return f" at {loc}" if loc is not None else ""


def export_programs(op, symbol) -> str:
    """The ``programs`` attribute text of a ``run_parallel`` op whose regions each forward their
    arguments to one call (as imported); other forms have no StableHLO spelling. ``symbol``
    writes a function's name as an MLIR symbol."""
    names = []
    for r in op.regions:
        ops = r.ops
        if not (len(ops) == 1 and ops[0].name == "call" and list(ops[0].operands) == list(r.args)
                and list(r.outputs) == list(ops[0].results)):
            where = f" at {op.loc}" if op.loc is not None else ""
            raise StableHLOError(f"run_parallel{where}: a program region that is not one call of a "
                                 f"function has no StableHLO (interpreter.run_parallel) form")
        names.append(symbol(ops[0].attrs["callee"]))
    n = op.attrs["num_partitions"]
    rows = [names[i:i + n] for i in range(0, len(names), n)]
    return "programs = [" + ", ".join("[" + ", ".join(row) + "]" for row in rows) + "]"
