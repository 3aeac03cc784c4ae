"""hlo.numpy (``import hlo.numpy as hnp``): numpy's API on traced arrays, with jax.numpy's
dtype promotion (weakly typed Python scalars) — see ``hlo.dtypes`` for the one difference:
float64 and int64 inputs compute in 64 bits.

Inside ``hlo.jit`` these functions record IR. Called on concrete arrays outside any trace, each
call is compiled on its own and run on the default target, returning numpy arrays.
"""
import sys as _sys

import numpy as _np

from .. import dtypes as _dtypes
from .creation import (array, asarray, astype, zeros, ones, empty, full, zeros_like, ones_like, empty_like,
                       full_like, arange, linspace, logspace, eye, identity, tri, iota, diag,
                       meshgrid)
from .ufuncs import (add, subtract, multiply, true_divide, divide, floor_divide, remainder, mod, fmod,
                     divmod, power, pow, float_power, negative, positive, absolute, abs, fabs, sign,
                     reciprocal, square, sqrt, cbrt, rsqrt, exp, exp2, expm1, log, log2, log10, log1p,
                     sin, cos, tan, arcsin, arccos, arctan, arctan2, sinh, cosh, tanh, arcsinh, arccosh,
                     arctanh, asin, acos, atan, atan2, asinh, acosh, atanh, hypot, logaddexp,
                     logaddexp2, deg2rad, rad2deg, radians, degrees, sinc, copysign, heaviside, floor,
                     ceil, rint, trunc, fix, round, around, round_, maximum, minimum, fmax, fmin, clip,
                     where, isnan, isinf, isfinite, isposinf, isneginf, signbit, nan_to_num, equal,
                     not_equal, less, less_equal, greater, greater_equal, logical_and, logical_or,
                     logical_xor, logical_not, bitwise_and, bitwise_or, bitwise_xor, bitwise_not,
                     invert, bitwise_invert, left_shift, right_shift, bitwise_left_shift,
                     bitwise_right_shift, isclose, allclose, array_equal)
from .reductions import (sum, prod, mean, var, std, max, min, amax, amin, argmax, argmin, any, all,
                         cumsum, cumprod, cumulative_sum, cumulative_prod, count_nonzero, ptp,
                         average, median, nansum, nanprod, nanmax, nanmin, nanmean)
from .shapes import (reshape, ravel, transpose, permute_dims, matrix_transpose, moveaxis, swapaxes,
                     expand_dims, squeeze, broadcast_to, broadcast_arrays, atleast_1d, atleast_2d,
                     atleast_3d, concatenate, concat, stack, vstack, row_stack, hstack, dstack,
                     column_stack, split, array_split, hsplit, vsplit, unstack, tile, repeat, pad,
                     flip, fliplr, flipud, rot90, roll, take, take_along_axis, tril, triu, diagonal,
                     trace, append, ndim, shape, size)
from .shapes import broadcast_shapes_ as broadcast_shapes
from .products import matmul, dot, vdot, inner, outer, tensordot, einsum, kron
from .sorting import sort, argsort, msort
from .search import searchsorted, digitize, interp, unique
from .differences import diff, ediff1d, cross
from .complexes import real, imag, conj, conjugate, angle, iscomplex, isreal, iscomplexobj, isrealobj
from . import linalg
from . import fft
from . import array_methods as _array_methods

_array_methods.install(_sys.modules[__name__])  # Tracer's operators, methods, numpy protocols

bool_ = _dtypes.bool_.type
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
float16, float32, float64 = _np.float16, _np.float32, _np.float64
bfloat16 = _dtypes.bfloat16.type
complex64, complex128 = _np.complex64, _np.complex128
complexfloating = _np.complexfloating
int2, int4, uint2, uint4 = (_dtypes.int2.type, _dtypes.int4.type, _dtypes.uint2.type,
                            _dtypes.uint4.type)
(float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz, float8_e4m3b11fnuz, float8_e4m3,
 float8_e3m4, float8_e8m0fnu, float6_e2m3fn, float6_e3m2fn, float4_e2m1fn) = (
    d.type for d in _dtypes.SMALL_FLOATS)
dtype = _np.dtype
generic, number, integer, signedinteger, unsignedinteger, floating, inexact = (
    _np.generic, _np.number, _np.integer, _np.signedinteger, _np.unsignedinteger, _np.floating,
    _np.inexact)

pi, e, inf, nan, euler_gamma = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma
newaxis = None

promote_types = _dtypes.promote_types
finfo = _dtypes.finfo
iinfo = _dtypes.iinfo


def result_type(*args):
    """The dtype hlo.numpy gives an operation on ``args`` (arrays, dtypes or scalars)."""
    from ..lax.common import aval_of
    pairs = []
    for a in args:
        if isinstance(a, (type, _np.dtype, str)) and not isinstance(a, (bool, int, float)):
            pairs.append((_dtypes.canonicalize(a), False))
        else:
            av = aval_of(a)
            pairs.append((av.dtype, av.weak_type))
    return _dtypes.result_type_of(pairs)[0]


def issubdtype(arg1, arg2) -> bool:
    """numpy.issubdtype that also knows bfloat16 is a floating type."""
    a = _np.dtype(arg1)
    if a == _dtypes.bfloat16:
        if isinstance(arg2, type) and arg2 in (_np.floating, _np.inexact, _np.number, _np.generic):
            return True
        try:
            return _np.dtype(arg2) == a
        except TypeError:
            return False
    return _np.issubdtype(a, arg2)


def can_cast(from_, to, casting="safe") -> bool:
    return _np.can_cast(from_, to, casting)


def _install_missing_names():  # hnp.foo: "did you mean ...?", and whether jax has it
    from hlo.base import missing
    missing.install(__name__)


_install_missing_names()
