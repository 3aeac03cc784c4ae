"""Helpers shared by hlo.lax and hlo.numpy: turning operands into Tracers, dtype checks that
name the op, numpy-style broadcasting, and the handful of ops every other function uses
(convert, broadcast, reshape) in their most basic form."""
from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np

from hlo.ir import TensorType
from hlo.ir.dim_expr import as_dim

from .. import dtypes
from ..errors import ArgumentTypeError, DTypeError, HloIndexError, ShapeError
from ..tracing.abstract import ShapedArray, is_arraylike, to_numpy
from ..tracing.tracer import Tracer, emit1, lift


def aval_of(x, what: str = "operand") -> ShapedArray:
    """The abstract value of an operand: a Tracer, a Python or numpy scalar, or an array-like."""
    if isinstance(x, Tracer):
        return x.aval
    if dtypes.is_python_scalar(x):
        dt, weak = dtypes.scalar_type(x)
        return ShapedArray((), dt, weak)
    if isinstance(x, np.generic):
        return ShapedArray((), _dtype(x.dtype, what), False)
    if isinstance(x, np.ndarray):
        return ShapedArray(x.shape, _dtype(x.dtype, what), False)
    if isinstance(x, (list, tuple)):
        return ShapedArray(*nested_aval(x))
    if is_arraylike(x):
        a = to_numpy(x, what)
        return ShapedArray(a.shape, _dtype(a.dtype, what), False)
    if isinstance(x, complex):
        raise DTypeError(f"{what}: complex numbers are not supported by hlo")
    raise ArgumentTypeError(f"{what}: expected an array or a number, got {type(x).__name__}")


def _dtype(dt, what):
    try:
        return dtypes.canonicalize(dt)
    except DTypeError:
        raise DTypeError(f"{what}: dtype {dt} is not supported by hlo") from None


def ir_type(shape, dtype) -> TensorType:
    return TensorType(tuple(shape), dtypes.ir_type(dtype))


def as_tracer(x, dtype=None, what: str = "operand") -> Tracer:
    """``x`` as a Tracer, converted to ``dtype`` when given (Python scalars become constants of
    that dtype directly, after a range check)."""
    if dtype is not None:
        dtype = np.dtype(dtype)
    if isinstance(x, Tracer):
        t = lift(x)
        return convert(t, dtype) if dtype is not None and t.dtype != dtype else t
    if dtypes.is_python_scalar(x):
        if dtype is not None:
            dtypes.check_scalar_fits(x, dtype, what)
        return lift(x, dtype)
    if isinstance(x, (list, tuple)):
        t = from_nested(x)
        return convert(t, dtype) if dtype is not None and t.dtype != dtype else t
    try:
        t = lift(x)
    except ArgumentTypeError:
        raise ArgumentTypeError(f"{what}: expected an array or a number, got {type(x).__name__}") from None
    return convert(t, dtype) if dtype is not None and t.dtype != dtype else t


def nested_aval(x) -> Tuple[Tuple[int, ...], np.dtype, bool]:
    """Shape, (promoted) dtype and weak type of a nested list/tuple of numbers and arrays."""
    if isinstance(x, (list, tuple)):
        if len(x) == 0:
            return (0,), dtypes.float32, False
        parts = [nested_aval(v) for v in x]
        shapes = {p[0] for p in parts}
        if len(shapes) != 1:
            raise ShapeError(f"array: the nested sequence is ragged (element shapes "
                             f"{sorted(shapes, key=len)}); all elements must have one shape")
        dt, weak = dtypes.result_type_of([(p[1], p[2]) for p in parts])
        return (len(x),) + parts[0][0], dt, False
    a = aval_of(x, "array")
    return a.shape, a.dtype, a.weak_type


def from_nested(x, dtype=None) -> Tracer:
    """A nested list/tuple of numbers and arrays (traced ones too) as one array of ``dtype``,
    or of its elements' promoted dtype."""
    use = dtype or nested_aval(x)[1]
    if _contains_tracer(x):
        return _stack_nested(x, use)
    return as_tracer(np.asarray(_to_numpy_nested(x, use), dtype=use))


def _contains_tracer(x) -> bool:
    if isinstance(x, Tracer):
        return True
    if isinstance(x, (list, tuple)):
        return any(_contains_tracer(v) for v in x)
    return False


def _stack_nested(x, dt) -> Tracer:
    if isinstance(x, (list, tuple)):
        parts = [_stack_nested(v, dt) for v in x]
        if not parts:
            return as_tracer(np.zeros((0,), dt))
        shape = parts[0].shape
        parts = [reshape(p, (1,) + shape) for p in parts]
        if len(parts) == 1:
            return parts[0]
        return emit1("concatenate", parts, {"dimension": 0}, weak_type=all(p.weak_type for p in parts))
    return as_tracer(x, dt, "array")


def _to_numpy_nested(x, dt):
    if isinstance(x, (list, tuple)):
        return [_to_numpy_nested(v, dt) for v in x]
    if is_arraylike(x) and not isinstance(x, np.ndarray):
        return to_numpy(x)
    return x


def convert(x: Tracer, dtype, weak_type: bool = False) -> Tracer:
    """``convert`` to ``dtype`` (no op when it already has it)."""
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return with_weak(x, weak_type)
    return emit1("convert", [x], result_types=[ir_type(x.shape, dtype)], weak_type=weak_type)


def with_weak(x: Tracer, weak: bool) -> Tracer:
    """The same value with a different weak-type flag (no op)."""
    if x.weak_type == weak or (weak and dtypes.is_bool(x.dtype)):
        return x
    return Tracer(x._trace, x._value, x.aval.update(weak_type=weak))


def broadcast_in_dim(x: Tracer, shape, dims: Sequence[int]) -> Tracer:
    shape = tuple(as_dim(d) for d in shape)
    if x.shape == shape and tuple(dims) == tuple(range(len(shape))):
        return x
    return emit1("broadcast_in_dim", [x], {"broadcast_dimensions": list(dims)},
                 result_types=[ir_type(shape, x.dtype)], weak_type=x.weak_type)


def broadcast_to_shape(x: Tracer, shape, what: str = "broadcast_to") -> Tracer:
    """numpy-style broadcast of ``x`` to ``shape`` (trailing dimensions aligned)."""
    shape = tuple(as_dim(d) for d in shape)
    if x.shape == shape:
        return x
    nd, xd = len(shape), x.ndim
    if xd > nd or any(s not in (1, t) for s, t in zip(x.shape, shape[nd - xd:])):
        raise ShapeError(f"{what}: cannot broadcast shape {x.shape} to {shape}")
    # size-1 dims that must grow: squeeze them away first, then broadcast (broadcast_in_dim
    # also accepts size-1 operand dims directly, which is what we use)
    return broadcast_in_dim(x, shape, list(range(nd - xd, nd)))


def reshape(x: Tracer, shape) -> Tracer:
    shape = tuple(as_dim(d) for d in shape)
    if x.shape == shape:
        return x
    return emit1("reshape", [x], result_types=[ir_type(shape, x.dtype)], weak_type=x.weak_type)


def broadcast_shapes(what: str, *shapes) -> Tuple[int, ...]:
    """numpy's broadcast of shapes; a ShapeError naming ``what`` and all shapes otherwise."""
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(nd):
        size = 1
        for s in shapes:
            j = i - (nd - len(s))
            if j < 0:
                continue
            d = s[j]
            if d != 1:
                if size != 1 and size != d:
                    raise ShapeError(f"{what}: shapes {' and '.join(str(tuple(s)) for s in shapes)} "
                                     "cannot be broadcast together")
                size = d
        out.append(size)
    return tuple(out)


def full(shape, value, dtype, weak_type: bool = False) -> Tracer:
    """A ``shape`` array of ``dtype`` filled with ``value`` (a scalar, or a Tracer that
    broadcasts to ``shape``)."""
    if isinstance(value, Tracer):
        c = convert(lift(value), dtype, weak_type)
    else:
        c = with_weak(lift(np.asarray(value, dtype=dtype)), weak_type)
    return broadcast_in_dim(c, shape, []) if c.ndim == 0 else broadcast_to_shape(c, shape)


def scalar_const(value, dtype) -> Tracer:
    """A rank-0 constant of ``dtype``."""
    return lift(np.asarray(value, dtype=dtype))


def canonical_axis(what: str, axis, ndim: int) -> int:
    """``axis`` as a non-negative int in ``[0, ndim)``; an HloIndexError naming ``what`` else."""
    if isinstance(axis, Tracer):
        raise ArgumentTypeError(f"{what}: axis must be a Python int, not a traced value")
    try:
        a = int(axis)
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"{what}: axis must be an int, got {axis!r}") from None
    if not -ndim <= a < ndim:
        raise HloIndexError(f"{what}: axis {a} is out of bounds for an array of rank {ndim}")
    return a + ndim if a < 0 else a


def canonical_axes(what: str, axis, ndim: int, allow_none: bool = True) -> Tuple[int, ...]:
    """``None`` (all axes), an int, or a sequence of ints, as a sorted-as-given tuple."""
    if axis is None:
        if not allow_none:
            raise ArgumentTypeError(f"{what}: axis must be given")
        return tuple(range(ndim))
    if isinstance(axis, (list, tuple)):
        out = tuple(canonical_axis(what, a, ndim) for a in axis)
    else:
        out = (canonical_axis(what, axis, ndim),)
    if len(set(out)) != len(out):
        raise ValueError(f"{what}: repeated axis in {axis!r}")
    return out


def require_kind(what: str, x: Tracer, kinds: str) -> None:
    """``kinds`` is a set of letters: f (float), i (signed), u (unsigned), b (bool)."""
    dt = x.dtype
    k = "f" if dtypes.is_float(dt) else ("b" if dtypes.is_bool(dt) else
                                          "i" if dtypes.is_signed(dt) else "u" if dtypes.is_int(dt) else dt.kind)
    if k not in kinds:
        words = {"f": "floating-point", "i": "signed integer", "u": "unsigned integer", "b": "boolean",
                 "c": "complex"}
        allowed = " or ".join(words[c] for c in kinds)
        raise DTypeError(f"{what}: expected {allowed} values, got {x.aval.str_short()}")


def static_int(what: str, v) -> int:
    if isinstance(v, Tracer):
        raise ArgumentTypeError(f"{what} must be a static Python int, not a traced value")
    if isinstance(v, (bool, np.bool_)):
        raise ArgumentTypeError(f"{what} must be an int, got {v!r}")
    try:
        return int(v) if isinstance(v, (int, np.integer)) else _int_or_fail(v, what)
    except TypeError:
        raise ArgumentTypeError(f"{what} must be an int, got {v!r}") from None


def _int_or_fail(v, what):
    if isinstance(v, float) and v.is_integer():
        raise ArgumentTypeError(f"{what} must be an int, got the float {v!r}")
    if hasattr(v, "__index__"):
        return int(v.__index__())
    raise ArgumentTypeError(f"{what} must be an int, got {v!r}")


def static_shape(what: str, shape) -> Tuple[int, ...]:
    if isinstance(shape, Tracer):
        raise ArgumentTypeError(f"{what}: a shape must be static (Python ints), not a traced value")
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        out = tuple(static_int(f"{what}: shape entry", d) for d in shape)
    except TypeError:
        raise ArgumentTypeError(f"{what}: shape must be a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise ShapeError(f"{what}: negative dimension in shape {out}")
    return out
