"""numpy-style argument handling for hlo.numpy: dtype promotion (jax.numpy's weak-type rules,
see ``hlo.dtypes``) and shape broadcasting, with errors that name the function."""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from .. import dtypes
from ..errors import DTypeError
from ..lax.common import as_tracer, aval_of, broadcast_shapes, broadcast_to_shape, convert, with_weak
from ..tracing.tracer import Tracer


def result_type_of_args(*args) -> Tuple[np.dtype, bool]:
    return dtypes.result_type_of([(a.dtype, a.weak_type) for a in (aval_of(x) for x in args)])


def promote(fname: str, *args, to_dtype=None, broadcast: bool = True) -> Tuple[List[Tracer], np.dtype, bool]:
    """Tracers of ``args`` promoted to one dtype (``to_dtype`` if given) and, when
    ``broadcast``, to one shape. Returns them, the dtype and the weak flag."""
    avals = [aval_of(x, fname) for x in args]
    dt, weak = dtypes.result_type_of([(a.dtype, a.weak_type) for a in avals])
    if to_dtype is not None:
        dt = np.dtype(to_dtype)
    shape = broadcast_shapes(fname, *[a.shape for a in avals]) if broadcast else None
    out = []
    for x in args:
        t = as_tracer(x, dt, fname)
        t = with_weak(t, weak)
        if broadcast:
            t = broadcast_to_shape(t, shape, fname)
        out.append(t)
    return out, dt, weak


def promote_inexact(fname: str, *args, broadcast: bool = True) -> Tuple[List[Tracer], np.dtype, bool]:
    """Like ``promote``, then to a float dtype (ints and bool become float32, 64-bit ints
    float64), as numpy's true division, sqrt and friends."""
    avals = [aval_of(x, fname) for x in args]
    dt, weak = dtypes.result_type_of([(a.dtype, a.weak_type) for a in avals])
    out = promote(fname, *args, to_dtype=dtypes.to_inexact(dt), broadcast=broadcast)[0]
    return out, dtypes.to_inexact(dt), weak


def promote_numeric(fname: str, *args) -> Tuple[List[Tracer], np.dtype, bool]:
    """Like ``promote``, but booleans are refused (numpy's subtract, floor_divide...)."""
    ts, dt, weak = promote(fname, *args)
    if dtypes.is_bool(dt):
        raise DTypeError(f"{fname} is not defined for boolean arrays; convert them with "
                         ".astype(int) first")
    return ts, dt, weak


def tracer(x, fname: str) -> Tracer:
    """One argument as a Tracer (no promotion)."""
    return as_tracer(x, what=fname)


def finish(x: Tracer, weak: bool) -> Tracer:
    return with_weak(x, weak)


def to_bool(x: Tracer) -> Tracer:
    """x != 0 as bool (no op for bool)."""
    if dtypes.is_bool(x.dtype):
        return x
    return convert(x, dtypes.bool_)
