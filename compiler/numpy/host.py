"""numpy's host-side names that jax.numpy offers too: file and buffer input/output (load, save,
savez, frombuffer, fromstring), printing options and array printing, and a few numpy types.

hlo's concrete arrays are numpy arrays (every result of a compiled call is one), so these call
numpy's own functions: ``hnp.load`` returns a numpy array that ``hlo.jit`` functions take as it
is. Given a traced value they raise hlo's TracerArrayConversionError (its value exists only in
the compiled program), as jax's do for its tracers. (They are wrappers, not numpy's objects:
numpy's ``__array_function__`` dispatch on a traced value reaches them and must not find
numpy's function again.)"""
from __future__ import annotations

import functools

import numpy as np
from numpy import character, flexible, get_printoptions, object_, printoptions, set_printoptions
from numpy.exceptions import ComplexWarning

from ..tracing.tracer import Tracer


def _host(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        for x in list(args) + list(kwargs.values()):
            if isinstance(x, Tracer):
                x.__array__()  # raises TracerArrayConversionError, naming the value and the line
        return fn(*args, **kwargs)
    return wrapper


load, save, savez, frombuffer, fromstring, array_repr, array_str = (
    _host(f) for f in (np.load, np.save, np.savez, np.frombuffer, np.fromstring, np.array_repr, np.array_str))

__all__ = ["load", "save", "savez", "frombuffer", "fromstring", "get_printoptions", "set_printoptions",
           "printoptions", "array_repr", "array_str", "ComplexWarning", "character", "flexible", "object_"]
