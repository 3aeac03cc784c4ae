"""Abstract values: what the tracer knows about an array (shape, dtype, weak type), and how
arguments of ``hlo.jit`` functions become abstract values and concrete numpy arrays.

Accepted array arguments: numpy arrays and scalars, Python ``bool``/``int``/``float`` (weakly
typed, as in jax.numpy), ``hlo.ShapeDtypeStruct`` (for ``lower`` only), and any object that
exports DLPack (``__dlpack__``) or ``__array__`` (jax arrays, torch CPU tensors, ...). GPU
arrays (``gpu_array_type``: hlo's ``DeviceArray``, torch / cupy / jax arrays in CUDA memory) are
described from their attributes without touching their memory; for the cuda target
``concrete_arg`` hands them to the runtime as they are (read in place), for other targets it
copies them to the host.
"""
from __future__ import annotations

import operator
from typing import Optional, Tuple

import numpy as np

from hlo.ir import TensorType
from hlo.ir.dim_expr import DimExpr, SymbolicDimError
from hlo.runtime.cuda.interop import gpu_array_type

from .. import dtypes
from ..errors import ArgumentTypeError


class ShapedArray:
    """The abstract value of an array: shape, numpy dtype and whether it is weakly typed."""

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, weak_type: bool = False):
        try:
            self.shape: Tuple[int, ...] = tuple(int(d) for d in shape)
        except SymbolicDimError:  # symbolic dimensions (hlo.ir.dim_expr)
            self.shape = tuple(d if isinstance(d, DimExpr) else int(d) for d in shape)
        self.dtype: np.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def ir_type(self) -> TensorType:
        return TensorType(self.shape, dtypes.ir_type(self.dtype))

    def strip_weak(self) -> "ShapedArray":
        return ShapedArray(self.shape, self.dtype, False) if self.weak_type else self

    def update(self, shape=None, dtype=None, weak_type=None) -> "ShapedArray":
        return ShapedArray(self.shape if shape is None else shape, self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def _key(self):
        return (self.shape, self.dtype, self.weak_type)

    def __eq__(self, other):
        return isinstance(other, ShapedArray) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def str_short(self) -> str:
        """``f32[4,8]`` (the IR's spelling), with ``{weak}`` for weakly typed values."""
        s = str(self.ir_type())
        return s + "{weak}" if self.weak_type else s

    def __str__(self):
        return self.str_short()

    def __repr__(self):
        return f"ShapedArray({self.str_short()})"


def aval_of_type(t: TensorType, weak_type: bool = False) -> ShapedArray:
    return ShapedArray(t.shape, t.np_dtype, weak_type)


def _static_shape(shape) -> Tuple[int, ...]:
    """``shape`` as a tuple of non-negative ints, or a TypeError / ValueError naming the
    dimension that is not one (dynamic dimensions, ``None``, are not supported)."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    if isinstance(shape, str):  # "b, 512": symbolic dimensions (hlo.Dim, hlo.ir.dim_expr)
        from hlo.ir.dim_expr import DimParseError

        from .dims import parse_shape_text
        try:
            shape = parse_shape_text(shape)
        except DimParseError as err:
            raise TypeError(f"ShapeDtypeStruct: shape {shape!r} is not a list of sizes and "
                            f"dimension expressions ({err})") from None
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"ShapeDtypeStruct: shape must be a tuple of ints, got {shape!r}") from None
    out = []
    for i, d in enumerate(dims):
        if d is None:
            raise TypeError(
                f"ShapeDtypeStruct: dimension {i} of shape {shape!r} is None: unknown dimensions "
                "are not supported; give the size, or name a symbolic one ('b', 'b, 512' or "
                "hlo.Dim('b', max=...))")
        if isinstance(d, DimExpr):
            out.append(d)
            continue
        if isinstance(d, str):
            from hlo.ir.dim_expr import DimParseError, parse
            try:
                e = parse(d)
            except DimParseError as err:
                raise TypeError(f"ShapeDtypeStruct: dimension {i} of shape {shape!r} is {d!r}, "
                                f"not a size or a dimension expression ({err})") from None
            out.append(e if isinstance(e, DimExpr) else int(e))
            continue
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"ShapeDtypeStruct: dimension {i} of shape {shape!r} is {d!r} of type "
                            f"{type(d).__name__}, not an int")
        if d < 0:
            raise ValueError(f"ShapeDtypeStruct: dimension {i} of shape {shape!r} is negative")
        out.append(int(d))
    return tuple(out)


def from_foreign_struct(x) -> Optional["ShapeDtypeStruct"]:
    """jax's ``jax.ShapeDtypeStruct`` as hlo's (shape, dtype, weak_type), or None for anything
    else. Recognised by its class, without importing jax."""
    t = type(x)
    if t.__name__ == "ShapeDtypeStruct" and (t.__module__ or "").startswith("jax"):
        return ShapeDtypeStruct(x.shape, x.dtype, bool(getattr(x, "weak_type", False)))
    return None


class ShapeDtypeStruct:
    """A stand-in for an array in ``f.lower(...)``: only its shape and dtype matter. A
    dimension may be symbolic: a name or expression (``("b", 512)``, ``"b, 2*b"``) or an
    ``hlo.Dim`` with a range (``hlo.tracing.dims``)."""

    __slots__ = ("shape", "dtype", "weak_type", "dim_ranges")

    def __init__(self, shape, dtype, weak_type: bool = False):
        self.shape = _static_shape(shape)
        self.dim_ranges = {}
        if any(isinstance(d, DimExpr) for d in self.shape):
            from .dims import ranges_of
            self.dim_ranges = ranges_of(self.shape)
        self.dtype = dtypes.canonicalize(dtype)
        self.weak_type = bool(weak_type)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __eq__(self, other):
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))

    def __repr__(self):
        w = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={dtypes.dtype_name(self.dtype)}{w})"


# ``(type, shape, dtype, strides)`` of a numpy array or scalar, in one C call: the fast paths of
# ``hlo.jit`` and ``Compiled`` compare or hash these instead of abstractifying each argument.
array_key = operator.attrgetter("__class__", "shape", "dtype", "strides")


def c_strides(shape, dtype) -> Tuple[int, ...]:
    """The strides of a C-contiguous numpy array of ``shape`` and ``dtype``."""
    out, step = [], np.dtype(dtype).itemsize
    for d in reversed(tuple(shape)):
        out.append(step)
        step *= d
    return tuple(reversed(out))


def is_arraylike(x) -> bool:
    """Objects that hlo.numpy treats as arrays (not Python scalars, not containers)."""
    return (isinstance(x, (np.ndarray, np.generic)) or hasattr(x, "__dlpack__")
            or hasattr(x, "__array__"))


def to_numpy(x, what: str = "argument") -> np.ndarray:
    """A concrete array as numpy (zero-copy through DLPack where possible)."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    if gpu_array_type(x) is not None:  # GPU memory: a copy to the host (hlo's own: __array__)
        try:
            return np.asarray(x)
        except (TypeError, ValueError, RuntimeError) as e:
            raise ArgumentTypeError(f"{what} is a {type(x).__name__} in GPU memory, which this target "
                                    f"reads from the host and cannot copy there ({e}); copy it to the "
                                    "host first, or call the function with target='cuda'") from None
    if hasattr(x, "__dlpack__"):
        try:
            return np.from_dlpack(x)
        except (TypeError, BufferError, RuntimeError, ValueError):
            pass  # e.g. a device the host cannot read directly: fall back to __array__
    if hasattr(x, "__array__"):
        return np.asarray(x)
    raise ArgumentTypeError(f"{what} of type {type(x).__name__} is not an array")


def concrete_arg(x, aval: ShapedArray, what: str = "argument", device: bool = False):
    """The array an executable receives for one argument leaf: numpy, or, with ``device``
    (the cuda target), a GPU array as it is (the runtime reads it in place)."""
    if device and gpu_array_type(x) is not None:
        return x
    if isinstance(x, np.ndarray):
        a = x
    elif isinstance(x, (bool, int, float)):
        return np.asarray(x, dtype=aval.dtype)
    else:
        a = to_numpy(x, what)
    if a.dtype != aval.dtype:
        a = a.astype(aval.dtype)
    return a
