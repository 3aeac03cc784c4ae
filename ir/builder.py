"""A small builder API for constructing IR: ``Builder(region).op("add", [x, y])``.

Result types are inferred from the op table unless given; every op is verified as it is made,
so construction errors surface at the line that built the op (with its source location).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from . import ops as op_table
from .core import Location, Operation, Region, Value
from .dim_expr import InconclusiveDimensionError, SymbolicDimError
from .ops import OpError
from .types import TensorType
from .verifier import op_error, verify_op_local


class Builder:
    """Appends ops to the end of a region (or at ``index`` when given)."""

    def __init__(self, region: Region, loc: Optional[Location] = None, index: Optional[int] = None):
        self.region = region
        self.loc = loc
        self.index = index

    def op(self, name: str, operands: Sequence[Value] = (), attrs: Optional[Dict[str, Any]] = None,
           result_types: Optional[Sequence[TensorType]] = None, regions: Sequence[Region] = (),
           loc: Optional[Location] = None) -> Operation:
        loc = loc if loc is not None else self.loc
        attrs = {k: v for k, v in (attrs or {}).items() if v is not None}
        if result_types is None:
            probe = Operation(name, operands, attrs, [], regions, loc)
            try:
                d = op_table.get(name)
                norm = d.normalize_attrs(attrs)
                inferred = d.infer([v.type for v in operands], norm, list(regions))
            except (OpError, InconclusiveDimensionError, SymbolicDimError) as e:
                raise op_error(probe, str(e)) from None
            if inferred is None:
                raise op_error(probe, "result types cannot be inferred for this op; pass result_types")
            result_types = inferred
            for r in regions:  # detach from the probe
                r.parent_op = None
        op = Operation(name, operands, attrs, result_types, regions, loc)
        verify_op_local(op)
        if self.index is None:
            self.region.append(op)
        else:
            self.region.insert(self.index, op)
            self.index += 1
        return op

    def value(self, name: str, operands: Sequence[Value] = (), **kw) -> Value:
        """Build a single-result op and return its result."""
        return self.op(name, operands, **kw).result
