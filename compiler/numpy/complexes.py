"""hlo.numpy's functions of complex numbers: real, imag, conj/conjugate, angle, and the
is-complex predicates. On real arrays they behave as numpy's do (real: the array, imag: zeros,
conj: the array, angle: 0 or pi)."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..lax import elementwise as lax_ew
from ..lax.common import with_weak
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from .promotion import promote, promote_inexact


@api_function
def real(val) -> Tracer:
    """The real part (the array itself when it is real)."""
    (a,), dt, weak = promote("real", val)
    return lax_ew.real(a) if dtypes.is_complex(dt) else a


@api_function
def imag(val) -> Tracer:
    """The imaginary part (zeros of the array's dtype when it is real)."""
    (a,), dt, weak = promote("imag", val)
    if dtypes.is_complex(dt):
        return lax_ew.imag(a)
    return with_weak(lax_ew.mul(a, 0) if not dtypes.is_bool(dt) else lax_ew.and_(a, False), weak)


@api_function
def conjugate(x) -> Tracer:
    """The complex conjugate (the array itself when it is real)."""
    (a,), dt, weak = promote("conjugate", x)
    return lax_ew.conj(a) if dtypes.is_complex(dt) else a


conj = conjugate


@api_function
def angle(z, deg: bool = False) -> Tracer:
    """The argument atan2(imag, real), in radians (degrees with ``deg``); a float array."""
    (a,), dt, weak = promote_inexact("angle", z)
    if dtypes.is_complex(dt):
        r = lax_ew.atan2(lax_ew.imag(a), lax_ew.real(a))
    else:
        r = lax_ew.atan2(lax_ew.mul(a, 0.0), a)
    if deg:
        r = lax_ew.mul(r, 180.0 / np.pi)
    return with_weak(r, weak)


def iscomplexobj(x) -> bool:
    """Whether ``x``'s dtype is complex (a static fact, as in numpy)."""
    return dtypes.is_complex(np.dtype(getattr(x, "dtype", np.asarray(x).dtype)))


def isrealobj(x) -> bool:
    return not iscomplexobj(x)


@api_function
def iscomplex(x) -> Tracer:
    """True where the imaginary part is nonzero."""
    return lax_ew.ne(imag(x), 0)


@api_function
def isreal(x) -> Tracer:
    """True where the imaginary part is zero."""
    return lax_ew.eq(imag(x), 0)
