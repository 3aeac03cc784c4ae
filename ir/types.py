"""Element types and tensor types of the hlo IR.

Element types carry XLA's short names (``f32``, ``s32``, ``pred``, ``c64``, ``s4``,
``f8e4m3fn``...) in the text form and map one-to-one onto numpy dtypes (``ml_dtypes`` supplies
bfloat16, the 8-bit and narrower floats and the 2- and 4-bit integers, each one byte wide in numpy
arrays; complex64/complex128 are numpy's, real and imaginary parts interleaved). Tensor types are ranked:
a shape (possibly rank 0, possibly with zero-sized dimensions), an element type and an
optional physical layout (minor-to-major dimension order) that layout assignment fills in.
A dimension is a plain ``int``, or a ``DimExpr`` (``ir/dim_expr.py``) when it is symbolic
(``f32[b,512]``, ``f32[2*b]``); static shapes are tuples of ints, as before.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Optional, Tuple

import ml_dtypes
import numpy as np

from .dim_expr import DimExpr, SymbolicDimError


@dataclass(frozen=True)
class ElementType:
    """One scalar type: its text name, numpy dtype, kind and width in bits."""

    name: str
    kind: str  # "pred", "sint", "uint", "float", "complex"
    bits: int
    np_dtype: np.dtype

    @property
    def is_pred(self) -> bool:
        return self.kind == "pred"

    @property
    def is_int(self) -> bool:
        """Signed or unsigned integer (not pred)."""
        return self.kind in ("sint", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind == "sint"

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "uint"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_complex(self) -> bool:
        return self.kind == "complex"

    @property
    def is_narrow_float(self) -> bool:
        """A float type narrower than f32 (f16, bf16, the 8-bit and smaller floats): computed in
        f32 and rounded to the type after every operation."""
        return self.kind == "float" and self.bits < 32

    @property
    def is_sub_byte(self) -> bool:
        """A 2- or 4-bit integer (one per byte in memory, as numpy/ml_dtypes hold them)."""
        return self.kind in ("sint", "uint") and self.bits < 8

    @property
    def component(self) -> "ElementType":
        """The float type of a complex type's real and imaginary parts (the type itself
        otherwise)."""
        return _COMPONENT.get(self.name, self)

    @property
    def is_integral(self) -> bool:
        """pred or integer: the types that bitwise ops accept."""
        return self.kind in ("pred", "sint", "uint")

    @property
    def itemsize(self) -> int:
        return self.np_dtype.itemsize

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"ElementType({self.name})"


pred = ElementType("pred", "pred", 1, np.dtype(np.bool_))
s8 = ElementType("s8", "sint", 8, np.dtype(np.int8))
s16 = ElementType("s16", "sint", 16, np.dtype(np.int16))
s32 = ElementType("s32", "sint", 32, np.dtype(np.int32))
s64 = ElementType("s64", "sint", 64, np.dtype(np.int64))
u8 = ElementType("u8", "uint", 8, np.dtype(np.uint8))
u16 = ElementType("u16", "uint", 16, np.dtype(np.uint16))
u32 = ElementType("u32", "uint", 32, np.dtype(np.uint32))
u64 = ElementType("u64", "uint", 64, np.dtype(np.uint64))
f16 = ElementType("f16", "float", 16, np.dtype(np.float16))
bf16 = ElementType("bf16", "float", 16, np.dtype(ml_dtypes.bfloat16))
f32 = ElementType("f32", "float", 32, np.dtype(np.float32))
f64 = ElementType("f64", "float", 64, np.dtype(np.float64))
c64 = ElementType("c64", "complex", 64, np.dtype(np.complex64))
c128 = ElementType("c128", "complex", 128, np.dtype(np.complex128))
s2 = ElementType("s2", "sint", 2, np.dtype(ml_dtypes.int2))
s4 = ElementType("s4", "sint", 4, np.dtype(ml_dtypes.int4))
u2 = ElementType("u2", "uint", 2, np.dtype(ml_dtypes.uint2))
u4 = ElementType("u4", "uint", 4, np.dtype(ml_dtypes.uint4))
_COMPONENT = {"c64": f32, "c128": f64}

# The floats narrower than 16 bits (StableHLO's list; ml_dtypes's numpy dtypes): XLA's name,
# StableHLO's name, the ml_dtypes type, the width in bits. Each is one byte in memory.
_SMALL_FLOATS = (
    ("f8e4m3fn", "f8E4M3FN", ml_dtypes.float8_e4m3fn, 8),
    ("f8e5m2", "f8E5M2", ml_dtypes.float8_e5m2, 8),
    ("f8e4m3fnuz", "f8E4M3FNUZ", ml_dtypes.float8_e4m3fnuz, 8),
    ("f8e5m2fnuz", "f8E5M2FNUZ", ml_dtypes.float8_e5m2fnuz, 8),
    ("f8e4m3b11fnuz", "f8E4M3B11FNUZ", ml_dtypes.float8_e4m3b11fnuz, 8),
    ("f8e4m3", "f8E4M3", ml_dtypes.float8_e4m3, 8),
    ("f8e3m4", "f8E3M4", ml_dtypes.float8_e3m4, 8),
    ("f8e8m0fnu", "f8E8M0FNU", ml_dtypes.float8_e8m0fnu, 8),
    ("f6e2m3fn", "f6E2M3FN", ml_dtypes.float6_e2m3fn, 6),
    ("f6e3m2fn", "f6E3M2FN", ml_dtypes.float6_e3m2fn, 6),
    ("f4e2m1fn", "f4E2M1FN", ml_dtypes.float4_e2m1fn, 4),
)
SMALL_FLOATS: Tuple[ElementType, ...] = tuple(
    ElementType(n, "float", bits, np.dtype(t)) for n, _, t, bits in _SMALL_FLOATS)

ALL_ELEMENT_TYPES: Tuple[ElementType, ...] = (
    pred, s8, s16, s32, s64, u8, u16, u32, u64, f16, bf16, f32, f64, c64, c128,
    s2, s4, u2, u4) + SMALL_FLOATS
BY_NAME = {t.name: t for t in ALL_ELEMENT_TYPES}
_BY_DTYPE = {t.np_dtype: t for t in ALL_ELEMENT_TYPES}

# StableHLO / MLIR spellings of the same types, used by the StableHLO importer and exporter.
MLIR_NAMES = {
    "pred": "i1", "s8": "i8", "s16": "i16", "s32": "i32", "s64": "i64",
    "u8": "ui8", "u16": "ui16", "u32": "ui32", "u64": "ui64",
    "f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64",
    "c64": "complex<f32>", "c128": "complex<f64>",
    "s2": "i2", "s4": "i4", "u2": "ui2", "u4": "ui4",
    **{n: m for n, m, _, _ in _SMALL_FLOATS},
}
FROM_MLIR = {v: BY_NAME[k] for k, v in MLIR_NAMES.items()}


class UnsupportedTypeError(TypeError):
    """A dtype outside hlo's element types (quantized, strings, objects, ...)."""


def element_type(x) -> ElementType:
    """The ElementType for a name, numpy dtype, numpy scalar type or ElementType."""
    if isinstance(x, ElementType):
        return x
    if isinstance(x, str) and x in BY_NAME:
        return BY_NAME[x]
    try:
        dt = np.dtype(x)
    except TypeError:
        raise UnsupportedTypeError(f"not an hlo element type: {x!r}") from None
    t = _BY_DTYPE.get(dt)
    if t is None:
        raise UnsupportedTypeError(
            f"dtype {dt} is not supported by hlo (supported: "
            + ", ".join(t.name for t in ALL_ELEMENT_TYPES) + ")")
    return t


# Every target indexes arrays with 64-bit signed integers (element indices and byte offsets:
# the CPU's loops and pointers, the CUDA kernels' i64 indices), so an array's byte size (and
# so its element count) must fit in one: a larger shape is refused where it is made (the
# tracer, the parser) instead of compiling into offsets that wrap.
INDEX_BITS = 64
INDEX_MAX = (1 << (INDEX_BITS - 1)) - 1


class ShapeOverflowError(ValueError):
    """A shape whose byte size does not fit the targets' 64-bit index (the frontend reports it
    as a ``ShapeError`` at the user's line, the parser as a ``ParseError``). ``origin``: the
    frame that made the type."""

    def __init__(self, message: str, origin=None):
        super().__init__(message)
        self.origin = origin


def _overflow_message(shape, dtype) -> str:
    n, i = 1, 0
    for i, d in enumerate(shape):
        n *= d
        if n * dtype.itemsize > INDEX_MAX:
            break
    total = 1
    for d in shape:
        total *= d
    return (f"shape {list(shape)} of {dtype.name} is too large: dimension {i} (size {shape[i]}) "
            f"takes it past {INDEX_MAX} bytes (2^{INDEX_BITS - 1} - 1), what a {INDEX_BITS}-bit "
            f"index can address ({total} elements, {total * dtype.itemsize} bytes)")


@dataclass(frozen=True)
class TensorType:
    """A ranked tensor type, e.g. ``f32[4,8]``, ``f32[4,8]{0,1}`` or ``f32[b,8]`` (symbolic).

    ``layout`` is the minor-to-major order of dimensions, or None while unassigned (which
    means the default row-major layout, minor-to-major ``rank-1, ..., 0``).
    """

    shape: Tuple[int, ...]
    dtype: ElementType
    layout: Optional[Tuple[int, ...]] = None

    def __post_init__(self):
        try:
            object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        except SymbolicDimError:  # symbolic dimensions (ir/dim_expr.py): no size checks here
            object.__setattr__(self, "shape", tuple(
                d if isinstance(d, DimExpr) else int(d) for d in self.shape))
            if any(not isinstance(d, DimExpr) and d < 0 for d in self.shape):
                raise ValueError(f"negative dimension in shape {self.shape}") from None
            n = 0
        else:
            n = 1
            for d in self.shape:
                if d < 0:
                    raise ValueError(f"negative dimension in shape {self.shape}")
                n *= d
        if n * self.dtype.itemsize > INDEX_MAX:
            # the frame that made the type (past the dataclass's generated __init__), for the
            # frontend to find the user's line from
            raise ShapeOverflowError(_overflow_message(self.shape, self.dtype), sys._getframe(2))
        if self.layout is not None:
            lay = tuple(int(d) for d in self.layout)
            if sorted(lay) != list(range(len(self.shape))):
                raise ValueError(f"layout {lay} is not a permutation of the dimensions of {self.shape}")
            object.__setattr__(self, "layout", lay)

    @property
    def is_static(self) -> bool:
        """Every dimension a plain int (no symbolic ``DimExpr``)."""
        return not any(isinstance(d, DimExpr) for d in self.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def np_dtype(self) -> np.dtype:
        return self.dtype.np_dtype

    @property
    def default_layout(self) -> Tuple[int, ...]:
        return tuple(range(self.rank - 1, -1, -1))

    @property
    def minor_to_major(self) -> Tuple[int, ...]:
        return self.layout if self.layout is not None else self.default_layout

    def with_shape(self, shape) -> "TensorType":
        return TensorType(tuple(shape), self.dtype)

    def with_dtype(self, dtype) -> "TensorType":
        return TensorType(self.shape, element_type(dtype))

    def with_layout(self, layout) -> "TensorType":
        return TensorType(self.shape, self.dtype, None if layout is None else tuple(layout))

    def without_layout(self) -> "TensorType":
        return TensorType(self.shape, self.dtype) if self.layout is not None else self

    def same_shape_dtype(self, other: "TensorType") -> bool:
        return self.shape == other.shape and self.dtype == other.dtype

    def __str__(self) -> str:
        s = f"{self.dtype.name}[{','.join(str(d) for d in self.shape)}]"
        if self.layout is not None:
            s += "{" + ",".join(str(d) for d in self.layout) + "}"
        return s

    def __repr__(self) -> str:
        return f"TensorType({self})"


def tensor(shape, dtype) -> TensorType:
    return TensorType(tuple(shape), element_type(dtype))


def scalar(dtype) -> TensorType:
    return TensorType((), element_type(dtype))
