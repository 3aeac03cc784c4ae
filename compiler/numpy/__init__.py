"""hlo.numpy (``import hlo.numpy as hnp``): numpy's API on traced arrays, with jax.numpy's
dtype promotion (weakly typed Python scalars) — see ``hlo.dtypes`` for the one difference:
float64 and int64 inputs compute in 64 bits.

Inside ``hlo.jit`` these functions record IR. Called on concrete arrays outside any trace, each
call is compiled on its own and run on the default target, returning numpy arrays.
"""
import builtins as _builtins
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
from .float_bits import nextafter, spacing, frexp, ldexp, modf
from .integer_fns import gcd, lcm, bitwise_count, packbits, unpackbits
from .windows import i0, bartlett, blackman, hamming, hanning, kaiser
from .quantiles import (quantile, nanquantile, percentile, nanpercentile, nanmedian, bincount, histogram,
                        histogram2d, histogramdd, histogram_bin_edges, cov, corrcoef)
from .nanfuncs import nanvar, nanstd, nanargmax, nanargmin, nancumsum, nancumprod
from .data_dependent import (nonzero, flatnonzero, argwhere, compress, extract, isin, union1d, intersect1d,
                             setdiff1d, setxor1d, unique_values, unique_counts, unique_inverse, unique_all,
                             trim_zeros)
from .index_tricks import (tril_indices, triu_indices, tril_indices_from, triu_indices_from, diag_indices,
                           diag_indices_from, mask_indices, indices, ix_, unravel_index, ravel_multi_index,
                           select, choose, piecewise, lexsort, fill_diagonal, put, place, put_along_axis,
                           delete, insert, diagflat)
from .polynomials import (convolve, correlate, polyval, polyadd, polysub, polymul, polydiv, polyder, polyint,
                          poly, vander, trapezoid, gradient, unwrap)
from .array_api import (isscalar, iterable, isdtype, copy, array_equiv, resize, block, dsplit, rollaxis,
                        vecdot, matvec, vecmat, partition, argpartition, sort_complex, geomspace,
                        fromfunction, apply_over_axes)
from . import linalg
from . import fft
from .host import (load, save, savez, frombuffer, fromstring, get_printoptions, set_printoptions, printoptions,
                   array_repr, array_str, ComplexWarning, character, flexible, object_)
from .linalg import _polyfit as polyfit
from . import array_methods as _array_methods

_array_methods.install(_sys.modules[__name__])  # Tracer's operators, methods, numpy protocols

bool_ = _dtypes.bool_.type
# numpy's C-style aliases, as jax.numpy names them
single, double, csingle, cdouble = _np.float32, _np.float64, _np.complex64, _np.complex128
int_, uint, float_, complex_ = _np.int64, _np.uint64, _np.float64, _np.complex128
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
        if isinstance(a, (type, _np.dtype, str)) and not isinstance(a, (_builtins.bool, int, float)):
            pairs.append((_dtypes.canonicalize(a), False))
        else:
            av = aval_of(a)
            pairs.append((av.dtype, av.weak_type))
    return _dtypes.result_type_of(pairs)[0]


def issubdtype(arg1, arg2) -> _builtins.bool:
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


def can_cast(from_, to, casting="safe") -> _builtins.bool:
    return _np.can_cast(from_, to, casting)


# vectorize and apply_along_axis are written with hlo.vmap (the batching layer, above this one):
# loaded on first use.
_BATCHED = ("vectorize", "apply_along_axis")


def __getattr__(name):
    if name in _BATCHED:
        from ..batching import vectorize as _vectorize
        return getattr(_vectorize, name)
    if name.startswith("__"):
        raise AttributeError(f"module 'hlo.numpy' has no attribute {name!r}")
    from ..base.missing import missing_name, public_names  # "did you mean ...?", and whether jax has it
    raise missing_name(__name__, name, public_names(_sys.modules[__name__]) + list(_BATCHED))


def __dir__():
    return sorted(set(globals()) | set(_BATCHED))


globals()["bool"] = bool_  # numpy 2's (and jax.numpy's) name; set last, so nothing above means it
