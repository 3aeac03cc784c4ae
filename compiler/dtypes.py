"""Element types as the frontend sees them (numpy dtypes), and jax.numpy's promotion rules.

Type promotion follows jax.numpy's lattice (https://docs.jax.dev/en/latest/type_promotion.html):
Python scalars are *weakly typed* — ``x_f16 * 2.0`` stays float16, ``x_u8 + 1`` stays uint8 —
and mixed types promote to the least upper bound of

    bool -> i* -> u8 -> u16 -> u32 -> u64 -> f*            (u8 -> i16, u16 -> i32, u32 -> i32)
            i* -> i8 -> i16 -> i32 -> i64 -> f*
            i* -> each 2- or 4-bit integer, which promotes to nothing else
                              f* -> f16, bf16 -> f32 -> f64 -> c128
                              f* -> c* -> c64 -> c128,  f32 -> c64
                              f* -> each 8-bit (or narrower) float, which promotes to nothing else

where ``i*`` and ``f*`` are the weak integer and float types.

One deliberate difference from jax (without its global x64 switch): 64-bit inputs stay 64-bit.
A float64 or int64 numpy array computes in 64 bits (jax would silently downcast it to 32), and
when the least upper bound is ``f*`` because of 64-bit integers (``u64 + i64``, ``i64 * 2.0``)
the result is float64, as in jax with x64 enabled. Python scalars on their own stay 32-bit
(``hnp.asarray(1.0)`` is float32, ``hnp.arange(5)`` is int32), as in jax's default mode. Unlike
jax (which wraps), a Python int that does not fit the dtype it meets (``x_u8 + 300``) is an error.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Tuple

import ml_dtypes
import numpy as np

from hlo.ir import ElementType, element_type
from hlo.ir import types as _ir_types

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)
int2, int4 = np.dtype(ml_dtypes.int2), np.dtype(ml_dtypes.int4)
uint2, uint4 = np.dtype(ml_dtypes.uint2), np.dtype(ml_dtypes.uint4)
SMALL_FLOATS = tuple(t.np_dtype for t in _ir_types.SMALL_FLOATS)  # float8_e4m3fn, ...

SUPPORTED = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
             float16, bfloat16, float32, float64, complex64, complex128,
             int2, int4, uint2, uint4) + SMALL_FLOATS
_SUPPORTED_SET = frozenset(SUPPORTED)

DEFAULT_INT = int32
DEFAULT_UINT = uint32
DEFAULT_FLOAT = float32
INDEX = int32  # dtype of argmax/argsort results and of indices hlo makes itself

_PY_SCALARS = {bool: bool_, int: int32, float: float32, complex: complex64}
_NAMES = {"bf16": bfloat16, "bfloat16": bfloat16, "pred": bool_, "bool": bool_,
          "f16": float16, "f32": float32, "f64": float64,
          "s8": int8, "s16": int16, "s32": int32, "s64": int64,
          "u8": uint8, "u16": uint16, "u32": uint32, "u64": uint64,
          "c64": complex64, "c128": complex128, "s2": int2, "s4": int4, "u2": uint2, "u4": uint4,
          **{t.name: t.np_dtype for t in _ir_types.SMALL_FLOATS}}
_FLOATS = frozenset((float16, bfloat16, float32, float64) + SMALL_FLOATS)
_SUB_BYTE_SIGNED = frozenset((int2, int4))
_SUB_BYTE_UNSIGNED = frozenset((uint2, uint4))


def is_float(dt) -> bool:
    return dt in _FLOATS


def is_complex(dt) -> bool:
    return np.dtype(dt).kind == "c"


def is_int(dt) -> bool:
    return dt.kind in "iu" or dt in _SUB_BYTE_SIGNED or dt in _SUB_BYTE_UNSIGNED


def is_signed(dt) -> bool:
    return dt.kind == "i" or dt in _SUB_BYTE_SIGNED


def is_unsigned(dt) -> bool:
    return dt.kind == "u" or dt in _SUB_BYTE_UNSIGNED


def is_bool(dt) -> bool:
    return dt == bool_


def dtype_name(dt) -> str:
    """numpy's name (``float32``, ``bfloat16``), as error messages say it."""
    return str(np.dtype(dt))


def canonicalize(dtype_like, what: str = "dtype") -> np.dtype:
    """The numpy dtype hlo uses for a user's dtype: numpy dtypes and scalar types, strings
    (``"float32"``, ``"f32"``, ``"bfloat16"``), hlo ElementTypes, and Python's ``bool``, ``int``,
    ``float`` (meaning bool, int32, float32 as in jax.numpy)."""
    from .errors import DTypeError
    if isinstance(dtype_like, np.dtype) and dtype_like in _SUPPORTED_SET:
        return dtype_like
    if isinstance(dtype_like, ElementType):
        return dtype_like.np_dtype
    if dtype_like in _PY_SCALARS:
        return _PY_SCALARS[dtype_like]
    if isinstance(dtype_like, str) and dtype_like in _NAMES:
        return _NAMES[dtype_like]
    if dtype_like is None:
        raise DTypeError(f"{what} is None")
    try:
        dt = np.dtype(dtype_like)
    except TypeError:
        dt = getattr(dtype_like, "dtype", None)
        if not isinstance(dt, np.dtype):
            raise DTypeError(f"{what} {dtype_like!r} is not a dtype") from None
    if dt not in _SUPPORTED_SET:
        raise DTypeError(f"{what} {dt} is not supported by hlo (supported: "
                         + ", ".join(dtype_name(d) for d in SUPPORTED) + ")")
    return dt


def ir_type(dt) -> ElementType:
    return element_type(dt)


# ---------------------------------------------------------------------------------------------
# The promotion lattice
# ---------------------------------------------------------------------------------------------

_WEAK_INT = "i*"
_WEAK_FLOAT = "f*"
_WEAK_COMPLEX = "c*"
_TOP = "top"  # no common dtype (8-bit floats with anything else): an error

_LATTICE = {
    bool_: [_WEAK_INT],
    _WEAK_INT: [uint8, int8, uint2, int2],
    uint2: [_TOP], uint4: [_TOP], int2: [_TOP], int4: [_TOP],
    uint8: [uint16, int16], uint16: [uint32, int32], uint32: [uint64, int32], uint64: [_WEAK_FLOAT],
    int8: [int16], int16: [int32], int32: [int64], int64: [_WEAK_FLOAT],
    _WEAK_FLOAT: [float16, bfloat16, _WEAK_COMPLEX] + list(SMALL_FLOATS),
    float16: [float32], bfloat16: [float32],
    float32: [float64, complex64], float64: [complex128],
    _WEAK_COMPLEX: [complex64], complex64: [complex128], complex128: [_TOP],
    **{f: [_TOP] for f in SMALL_FLOATS}, _TOP: [],
}


def _upper_bounds():
    ub = {}
    for n in _LATTICE:
        seen, todo = {n}, [n]
        while todo:
            for m in _LATTICE[todo.pop()]:
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        ub[n] = frozenset(seen)
    return ub


_UB = _upper_bounds()


def _node(dt, weak: bool):
    if weak and not is_bool(dt):
        return _WEAK_COMPLEX if is_complex(dt) else _WEAK_FLOAT if is_float(dt) else _WEAK_INT
    return dt


@lru_cache(maxsize=4096)
def _lub(nodes: frozenset):
    common = frozenset.intersection(*(_UB[n] for n in nodes))
    for c in common:
        if common <= _UB[c]:
            if c == _TOP:
                from .errors import DTypeError
                raise DTypeError("no implicit promotion between " + " and ".join(
                    sorted(n if isinstance(n, str) else dtype_name(n) for n in nodes))
                    + " (8-bit floats and 2/4-bit integers promote only with Python scalars, as "
                    "in jax: convert with .astype)")
            return c
    raise AssertionError(f"no least upper bound for {nodes}")  # the lattice is complete


def promote_types(a, b) -> np.dtype:
    """The dtype two (strongly typed) dtypes promote to, like ``jnp.promote_types`` (with the
    64-bit rule described in this module's docstring)."""
    return result_type_of([(canonicalize(a), False), (canonicalize(b), False)])[0]


def result_type_of(typed: Iterable[Tuple[np.dtype, bool]]) -> Tuple[np.dtype, bool]:
    """Promote ``(dtype, weak_type)`` pairs: the result dtype and whether it is weak."""
    typed = list(typed)
    if not typed:
        raise ValueError("at least one dtype is needed")
    dts = {d for d, _ in typed}
    if len(typed) == 1:
        d, w = typed[0]
        return d, (w and not is_bool(d))
    if all(w for _, w in typed):
        # all weak: promote the strong counterparts, then mark the result weak (jax does this)
        r = _lub(frozenset(dts))
        return _resolve(r, dts), not is_bool(_resolve(r, dts))
    if len(dts) == 1:
        return next(iter(dts)), False
    r = _lub(frozenset(_node(d, w) for d, w in typed))
    strong = {d for d, w in typed if not w}
    out = _resolve(r, strong)
    return out, (r in (_WEAK_INT, _WEAK_FLOAT)) and not is_bool(out)


def _resolve(node, dts) -> np.dtype:
    """A lattice node as a dtype: ``i*`` is int32 and ``f*`` float32, or float64 when a 64-bit
    integer took part (u64 + i64, i64 * 2.0)."""
    if node == _WEAK_INT:
        return int32
    if node == _WEAK_FLOAT:
        return float64 if any(d.itemsize == 8 for d in dts) else float32
    if node == _WEAK_COMPLEX:
        return complex128 if any(d.itemsize == 8 and not is_complex(d) for d in dts) else complex64
    return node


def to_inexact(dt) -> np.dtype:
    """The float dtype an op such as mean or true division computes in for ``dt``: floats stay;
    64-bit integers give float64, other integers and bool give float32."""
    if is_float(dt) or is_complex(dt):
        return dt
    return float64 if dt.itemsize == 8 else float32


def sum_dtype(dt) -> np.dtype:
    """Accumulation dtype of sum/prod, as jax.numpy: small ints widen to 32 bits, bool to int32."""
    if is_bool(dt):
        return int32
    if is_signed(dt) and dt.itemsize < 4:
        return int32
    if is_unsigned(dt) and dt.itemsize < 4:
        return uint32
    return dt


# ---------------------------------------------------------------------------------------------
# Python scalars
# ---------------------------------------------------------------------------------------------

def is_python_scalar(x) -> bool:
    return type(x) in (bool, int, float, complex)


def scalar_type(x) -> Tuple[np.dtype, bool]:
    """``(dtype, weak)`` of a Python or numpy scalar (Python numbers are weak, except bool)."""
    if isinstance(x, bool):
        return bool_, False
    if isinstance(x, int):
        return int32, True
    if isinstance(x, float):
        return float32, True
    if isinstance(x, complex):
        return complex64, True
    if isinstance(x, np.generic):
        return canonicalize(x.dtype), False
    raise TypeError(f"not a scalar: {x!r}")


def check_scalar_fits(x, dt, what: str = "") -> None:
    """Raise ScalarOverflowError if a Python int does not fit the dtype it is converted to."""
    from .errors import ScalarOverflowError
    if isinstance(x, bool) or not isinstance(x, int) or not is_int(dt):
        return
    info = ml_dtypes.iinfo(dt)
    if not info.min <= x <= info.max:
        raise ScalarOverflowError(
            f"{what + ': ' if what else ''}Python int {x} is out of range for {dtype_name(dt)} "
            f"[{info.min}, {info.max}]; make it an array of a wider dtype first")


def finfo(dt):
    return ml_dtypes.finfo(canonicalize(dt))


def iinfo(dt):
    return ml_dtypes.iinfo(canonicalize(dt))


def min_value(dt):
    """The smallest value of a dtype (-inf for floats): the identity of max."""
    if is_float(dt):
        return -np.inf
    if is_bool(dt):
        return False
    return np.iinfo(dt).min


def max_value(dt):
    if is_float(dt):
        return np.inf
    if is_bool(dt):
        return True
    return np.iinfo(dt).max
