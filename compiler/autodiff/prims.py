"""The array operations that VJP rules are written with: one IR op each, emitted into the
current trace.

These are deliberately lower level than ``hlo.numpy``: no broadcasting, no type promotion, no
weak types; operands must already agree, exactly as the op table demands. A rule that breaks an
op's contract is a bug in hlo, reported as ``AutodiffInternalError`` (never a user error).

Every op made here carries the source location of the forward op whose VJP is being built
(``at(loc)``), so the backward pass of ``loss = f(x)`` reads as the user's lines in the IR.
"""
from __future__ import annotations

import contextlib
import threading
from typing import List, Optional, Sequence

import numpy as np

from hlo.ir import Builder, Location, Region, TensorType, VerifyError, element_type
from hlo.ir.dim_expr import as_dim

from ..errors import HloError
from ..tracing.abstract import aval_of_type
from ..tracing.tracer import Tracer, current_trace, lift


class AutodiffInternalError(HloError, RuntimeError):
    """A VJP rule built an op that does not verify: a bug in hlo.autodiff."""


_state = threading.local()


@contextlib.contextmanager
def at(loc: Optional[Location]):
    """Ops emitted inside carry ``loc`` (the forward op's location)."""
    old = getattr(_state, "loc", None)
    _state.loc = loc
    try:
        yield
    finally:
        _state.loc = old


def _loc() -> Optional[Location]:
    return getattr(_state, "loc", None)


def ir_type(shape, dtype) -> TensorType:
    return TensorType(tuple(shape), element_type(np.dtype(dtype)))


def emit(name: str, operands: Sequence[Tracer] = (), attrs=None, *, result_types=None,
         regions: Sequence[Region] = ()) -> List[Tracer]:
    """Append one op to the current trace; return its results as Tracers."""
    trace = current_trace()
    if trace is None:
        raise AutodiffInternalError("hlo.autodiff emitted an op outside of any trace", location=None)
    vals = [lift(o)._value for o in operands]
    try:
        op = trace.builder.op(name, vals, attrs, result_types=result_types, regions=regions, loc=_loc())
    except VerifyError as e:
        raise AutodiffInternalError(f"hlo.autodiff built an invalid op (a bug in hlo): {e}",
                                    location=None) from None
    return [Tracer(trace, v, aval_of_type(v.type)) for v in op.results]


def emit1(name: str, operands: Sequence[Tracer] = (), attrs=None, **kw) -> Tracer:
    (r,) = emit(name, operands, attrs, **kw)
    return r


# --------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------

def const(value, dtype) -> Tracer:
    """A rank-0 constant."""
    return emit1("constant", [], {"value": np.asarray(value, dtype=np.dtype(dtype))})


def full(shape, value, dtype) -> Tracer:
    c = const(value, dtype)
    return broadcast_in_dim(c, shape, []) if tuple(shape) else c


def zeros(shape, dtype) -> Tracer:
    return full(shape, 0, dtype)


def zeros_like(x: Tracer) -> Tracer:
    return zeros(x.shape, x.dtype)


def full_like(x: Tracer, value) -> Tracer:
    return full(x.shape, value, x.dtype)


def iota(shape, dimension: int, dtype) -> Tracer:
    return emit1("iota", [], {"iota_dimension": dimension}, result_types=[ir_type(shape, dtype)])


# --------------------------------------------------------------------------------------------
# Elementwise
# --------------------------------------------------------------------------------------------

def _like(x, ref: Tracer) -> Tracer:
    """A Python number becomes a constant of ``ref``'s shape and dtype; Tracers pass."""
    if isinstance(x, Tracer):
        return x
    return full(ref.shape, x, ref.dtype)


def unary(name: str, x: Tracer) -> Tracer:
    return emit1(name, [x])


def binary(name: str, a, b) -> Tracer:
    if not isinstance(a, Tracer):
        a = _like(a, b)
    b = _like(b, a)
    return emit1(name, [a, b])


def add(a, b):
    return binary("add", a, b)


def sub(a, b):
    return binary("subtract", a, b)


def mul(a, b):
    return binary("multiply", a, b)


def div(a, b):
    return binary("divide", a, b)


def neg(x):
    return unary("negate", x)


def compare(a, b, direction: str) -> Tracer:
    if not isinstance(a, Tracer):
        a = _like(a, b)
    b = _like(b, a)
    return emit1("compare", [a, b], {"comparison_direction": direction})


def select(pred: Tracer, on_true, on_false) -> Tracer:
    ref = on_true if isinstance(on_true, Tracer) else on_false
    return emit1("select", [pred, _like(on_true, ref), _like(on_false, ref)])


def logical_and(a: Tracer, b: Tracer) -> Tracer:
    return emit1("and", [a, b])


def convert(x: Tracer, dtype) -> Tracer:
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    return emit1("convert", [x], result_types=[ir_type(x.shape, dtype)])


def add_any(a: Optional[Tracer], b: Optional[Tracer]) -> Optional[Tracer]:
    """Sum of two cotangents where None stands for zero."""
    if a is None:
        return b
    if b is None:
        return a
    return add(a, b)


# --------------------------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------------------------

def broadcast_in_dim(x: Tracer, shape, dims: Sequence[int]) -> Tracer:
    shape = tuple(as_dim(d) for d in shape)
    if x.shape == shape and tuple(dims) == tuple(range(len(shape))):
        return x
    return emit1("broadcast_in_dim", [x], {"broadcast_dimensions": list(dims)},
                 result_types=[ir_type(shape, x.dtype)])


def reshape(x: Tracer, shape) -> Tracer:
    shape = tuple(as_dim(d) for d in shape)
    if x.shape == shape:
        return x
    return emit1("reshape", [x], result_types=[ir_type(shape, x.dtype)])


def transpose(x: Tracer, perm: Sequence[int]) -> Tracer:
    perm = [int(p) for p in perm]
    if perm == list(range(x.ndim)):
        return x
    return emit1("transpose", [x], {"permutation": perm})


def slice(x: Tracer, start, limit, strides=None) -> Tracer:
    start, limit = [int(s) for s in start], [int(s) for s in limit]
    strides = [1] * x.ndim if strides is None else [int(s) for s in strides]
    if start == [0] * x.ndim and limit == list(x.shape) and strides == [1] * x.ndim:
        return x
    return emit1("slice", [x], {"start_indices": start, "limit_indices": limit, "strides": strides})


def pad(x: Tracer, value: Tracer, low, high, interior) -> Tracer:
    low, high, interior = [int(v) for v in low], [int(v) for v in high], [int(v) for v in interior]
    if not any(low) and not any(high) and not any(interior):
        return x
    return emit1("pad", [x, value], {"edge_padding_low": low, "edge_padding_high": high,
                                     "interior_padding": interior})


def reverse(x: Tracer, dims: Sequence[int]) -> Tracer:
    if not dims:
        return x
    return emit1("reverse", [x], {"dimensions": list(dims)})


def concatenate(xs: Sequence[Tracer], dimension: int) -> Tracer:
    if len(xs) == 1:
        return xs[0]
    return emit1("concatenate", list(xs), {"dimension": dimension})


def dynamic_slice(x: Tracer, starts: Sequence[Tracer], sizes) -> Tracer:
    return emit1("dynamic_slice", [x, *starts], {"slice_sizes": [int(s) for s in sizes]})


def dynamic_update_slice(x: Tracer, update: Tracer, starts: Sequence[Tracer]) -> Tracer:
    return emit1("dynamic_update_slice", [x, update, *starts])


# --------------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------------

def scalar_body(op_name: str, dtype, n_ops: int = 1) -> Region:
    """The region ``^body(%a, %b): return(op_name(%a, %b))`` for scalars of ``dtype``."""
    t = ir_type((), dtype)
    r = Region([t, t], name="body")
    b = Builder(r, loc=_loc())
    r.outputs = [b.value(op_name, [r.args[0], r.args[1]])]
    return r


def reduce(x: Tracer, init: Tracer, dims: Sequence[int], body_op: str) -> Tracer:
    dims = sorted(int(d) for d in dims)
    if not dims:
        return x
    return emit1("reduce", [x, init], {"dimensions": dims}, regions=[scalar_body(body_op, x.dtype)])


def reduce_sum(x: Tracer, dims: Sequence[int]) -> Tracer:
    return reduce(x, const(0, x.dtype), dims, "add")


def sum_all(x: Tracer) -> Tracer:
    return reduce_sum(x, range(x.ndim))


def reduce_and(x: Tracer, dims: Sequence[int]) -> Tracer:
    return reduce(x, const(True, np.bool_), dims, "and")


def sum_to_shape(x: Tracer, shape) -> Tracer:
    """Sum ``x`` over the dimensions a scalar (``shape == ()``) was broadcast along; ``x`` as is
    when it already has ``shape``."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    if shape == ():
        return sum_all(x)
    raise AutodiffInternalError(f"cannot sum {x.aval.str_short()} to shape {shape}", location=None)


# --------------------------------------------------------------------------------------------
# Products and indexing
# --------------------------------------------------------------------------------------------

def dot_general(a: Tracer, b: Tracer, lhs_batch, rhs_batch, lhs_contract, rhs_contract,
                result_dtype=None) -> Tracer:
    attrs = {"lhs_batching_dimensions": list(lhs_batch), "rhs_batching_dimensions": list(rhs_batch),
             "lhs_contracting_dimensions": list(lhs_contract),
             "rhs_contracting_dimensions": list(rhs_contract)}
    if result_dtype is None or np.dtype(result_dtype) == a.dtype:
        return emit1("dot_general", [a, b], attrs)
    shape = ([a.shape[d] for d in lhs_batch]
             + [s for i, s in enumerate(a.shape) if i not in lhs_batch and i not in lhs_contract]
             + [s for i, s in enumerate(b.shape) if i not in rhs_batch and i not in rhs_contract])
    return emit1("dot_general", [a, b], attrs, result_types=[ir_type(shape, result_dtype)])


def gather(x: Tracer, idx: Tracer, **attrs) -> Tracer:
    return emit1("gather", [x, idx], attrs)


def scatter(x: Tracer, idx: Tracer, updates: Tracer, body_op: Optional[str], **attrs) -> Tracer:
    """``scatter`` whose update region is ``body_op(old, new)``, or ``return(new)`` for None."""
    t = ir_type((), x.dtype)
    r = Region([t, t], name="update")
    if body_op is None:
        r.outputs = [r.args[1]]
    else:
        r.outputs = [Builder(r, loc=_loc()).value(body_op, [r.args[0], r.args[1]])]
    return emit1("scatter", [x, idx, updates], attrs, regions=[r])
