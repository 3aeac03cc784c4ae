"""Operators, array methods and properties of traced values (installed on ``Tracer``).

``x + y``, ``x @ w``, ``x[idx]``, ``x.at[idx].set(v)``, ``x.sum(axis)``, ``x.reshape(...)``,
``x.T``, ``x.astype(dtype)``... behave as hlo.numpy's functions of the same name. Arrays are
immutable: item assignment raises and points to ``.at``.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import TracerArrayConversionError, UnsupportedError
from ..lax.common import convert
from ..tracing.abstract import is_arraylike
from ..tracing.tracer import Tracer, concretization_message
from . import complexes, indexing, products, reductions, shapes, sorting, ufuncs


def _operand_ok(other) -> bool:
    return (isinstance(other, Tracer) or dtypes.is_python_scalar(other)
            or isinstance(other, (np.ndarray, np.generic, list, tuple)) or is_arraylike(other))


def _binary(fn, reflected=False):
    def method(self, other):
        if not _operand_ok(other):
            return NotImplemented
        return fn(other, self) if reflected else fn(self, other)
    method.__name__ = fn.__name__
    return method


def _astype(self, dtype, copy=False):
    """Convert to ``dtype`` (float to int truncates toward zero, as numpy)."""
    return convert(self, dtypes.canonicalize(dtype, "astype: dtype"))


def _reshape(self, *shape, order="C"):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return shapes.reshape(self, shape, order=order)


def _transpose(self, *axes):
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    return shapes.transpose(self, axes or None)


def _setitem(self, idx, value):
    raise TypeError(f"traced arrays are immutable: x[idx] = v is not possible ({self.aval.str_short()}); "
                    "use x = x.at[idx].set(v), which returns the updated array")


def _nonzero(self, *args, **kwargs):
    raise UnsupportedError("nonzero() returns arrays whose size depends on the data, which hlo "
                           "cannot compile; use a boolean mask with hlo.numpy.where instead")


_METHODS = {
    "__add__": _binary(ufuncs.add), "__radd__": _binary(ufuncs.add, True),
    "__sub__": _binary(ufuncs.subtract), "__rsub__": _binary(ufuncs.subtract, True),
    "__mul__": _binary(ufuncs.multiply), "__rmul__": _binary(ufuncs.multiply, True),
    "__truediv__": _binary(ufuncs.true_divide), "__rtruediv__": _binary(ufuncs.true_divide, True),
    "__floordiv__": _binary(ufuncs.floor_divide), "__rfloordiv__": _binary(ufuncs.floor_divide, True),
    "__mod__": _binary(ufuncs.remainder), "__rmod__": _binary(ufuncs.remainder, True),
    "__divmod__": _binary(ufuncs.divmod), "__rdivmod__": _binary(ufuncs.divmod, True),
    "__pow__": _binary(ufuncs.power), "__rpow__": _binary(ufuncs.power, True),
    "__matmul__": _binary(products.matmul), "__rmatmul__": _binary(products.matmul, True),
    "__and__": _binary(ufuncs.bitwise_and), "__rand__": _binary(ufuncs.bitwise_and, True),
    "__or__": _binary(ufuncs.bitwise_or), "__ror__": _binary(ufuncs.bitwise_or, True),
    "__xor__": _binary(ufuncs.bitwise_xor), "__rxor__": _binary(ufuncs.bitwise_xor, True),
    "__lshift__": _binary(ufuncs.left_shift), "__rlshift__": _binary(ufuncs.left_shift, True),
    "__rshift__": _binary(ufuncs.right_shift), "__rrshift__": _binary(ufuncs.right_shift, True),
    "__eq__": _binary(ufuncs.equal), "__ne__": _binary(ufuncs.not_equal),
    "__lt__": _binary(ufuncs.less), "__le__": _binary(ufuncs.less_equal),
    "__gt__": _binary(ufuncs.greater), "__ge__": _binary(ufuncs.greater_equal),
    "__neg__": lambda self: ufuncs.negative(self),
    "__pos__": lambda self: ufuncs.positive(self),
    "__abs__": lambda self: ufuncs.absolute(self),
    "__invert__": lambda self: ufuncs.bitwise_not(self),
    "__round__": lambda self, ndigits=None: ufuncs.round(self, ndigits or 0),
    "__getitem__": lambda self, idx: indexing.getitem(self, idx),
    "__setitem__": _setitem,
    "astype": _astype,
    "reshape": _reshape,
    "transpose": _transpose,
    "ravel": lambda self, order="C": shapes.ravel(self, order),
    "flatten": lambda self, order="C": shapes.ravel(self, order),
    "squeeze": lambda self, axis=None: shapes.squeeze(self, axis),
    "swapaxes": lambda self, a, b: shapes.swapaxes(self, a, b),
    "repeat": lambda self, repeats, axis=None: shapes.repeat(self, repeats, axis),
    "take": lambda self, indices, axis=None, mode=None: shapes.take(self, indices, axis, mode=mode),
    "diagonal": lambda self, offset=0, axis1=0, axis2=1: shapes.diagonal(self, offset, axis1, axis2),
    "trace": lambda self, offset=0, axis1=0, axis2=1, dtype=None: shapes.trace(self, offset, axis1, axis2, dtype),
    "sum": reductions.sum, "prod": reductions.prod, "mean": reductions.mean,
    "var": reductions.var, "std": reductions.std, "max": reductions.max, "min": reductions.min,
    "argmax": reductions.argmax, "argmin": reductions.argmin, "any": reductions.any,
    "all": reductions.all, "cumsum": reductions.cumsum, "cumprod": reductions.cumprod,
    "ptp": reductions.ptp,
    "clip": lambda self, min=None, max=None: ufuncs.clip(self, min, max),
    "round": lambda self, decimals=0: ufuncs.round(self, decimals),
    "dot": lambda self, b: products.dot(self, b),
    "sort": lambda self, axis=-1: sorting.sort(self, axis),
    "argsort": lambda self, axis=-1: sorting.argsort(self, axis),
    "conj": lambda self: complexes.conjugate(self), "conjugate": lambda self: complexes.conjugate(self),
    "copy": lambda self: self,
    "nonzero": _nonzero,
}

_PROPERTIES = {
    "T": lambda self: shapes.transpose(self),
    "mT": lambda self: shapes.matrix_transpose(self),
    "at": lambda self: indexing._IndexUpdateHelper(self),
    "real": lambda self: complexes.real(self),
    "imag": lambda self: complexes.imag(self),
    "itemsize": lambda self: self.dtype.itemsize,
    "nbytes": lambda self: self.size * self.dtype.itemsize,
}


def _hnp_module(hnp, numpy_module: str):
    """The hlo.numpy module that mirrors numpy's ``numpy_module`` (a function's ``__module__``:
    ``numpy`` -> hlo.numpy, ``numpy.linalg`` (or ``numpy.linalg._linalg``) -> hlo.numpy.linalg,
    ``numpy.fft`` -> hlo.numpy.fft), or None for a module that is not numpy's."""
    parts = numpy_module.split(".")
    if parts[0] != "numpy":
        return None
    mod = hnp
    for part in parts[1:]:
        if part.startswith("_") or part in ("core", "lib"):  # numpy's private implementation
            break
        mod = getattr(mod, part, None) if part in ("linalg", "fft") else None
        if mod is None:
            return None
    return mod


def _numpy_protocols(hnp):
    """``__array_ufunc__`` / ``__array_function__``: numpy's functions applied to traced values
    run as the function of the same name in ``hnp`` (the hlo.numpy namespace)."""
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """``numpy_array + tracer`` and ``numpy.sin(tracer)`` run as hlo.numpy when hlo.numpy has
        the ufunc; anything else (``out=``, ``ufunc.reduce``...) is refused with a clear error."""
        fn = getattr(hnp, ufunc.__name__, None)
        if method == "__call__" and fn is not None and not kwargs:
            return fn(*inputs)
        raise TracerArrayConversionError(concretization_message(
            self, f"numpy.{ufunc.__name__}{'' if method == '__call__' else '.' + method}",
            f"use hlo.numpy.{ufunc.__name__} inside hlo.jit"))

    def __array_function__(self, func, types, args, kwargs):
        """``numpy.concatenate([tracer, ...])`` and friends run as hlo.numpy when it has them."""
        where = _hnp_module(hnp, getattr(func, "__module__", None) or "")
        fn = getattr(where, func.__name__, None) if where is not None else None
        if fn is not None:
            return fn(*args, **kwargs)
        public = "numpy" if where is None or where is hnp else where.__name__.replace("hlo.", "", 1)
        hlo_name = "hlo.numpy" if where is None else where.__name__
        raise TracerArrayConversionError(concretization_message(
            self, f"{public}.{func.__name__}", f"{hlo_name} has no function {func.__name__}; "
            "write it with hlo.numpy functions"))
    return {"__array_ufunc__": __array_ufunc__, "__array_function__": __array_function__}


def install(hnp) -> None:
    """Install the operators, methods and properties on ``Tracer``, and numpy's dispatch
    protocols resolving to ``hnp`` (called by ``hlo.numpy`` with itself)."""
    for name, fn in {**_METHODS, **_numpy_protocols(hnp)}.items():
        setattr(Tracer, name, fn)
    for name, fn in _PROPERTIES.items():
        setattr(Tracer, name, property(fn))
