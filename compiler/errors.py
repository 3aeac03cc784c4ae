"""The frontend's errors. Each names the user's own file:line (never an hlo-internal one).

Messages read like compiler diagnostics: ``/path/model.py:12: <what went wrong and how to fix
it>``. Each class also derives from the builtin exception a Python user would expect
(``TypeError`` for a bad conversion or dtype, ``ValueError`` for a shape, ``IndexError`` for an
index), so ``except TypeError`` keeps working.

    HloError
      ConcretizationError (TypeError)       a traced value where Python needs a concrete one
        TracerBoolConversionError           if / while / bool() / and / or / not on a traced value
        TracerIntegerConversionError        int() / index() / range() on a traced value
        TracerArrayConversionError          numpy.asarray() or a numpy function on a traced value
      TracerLeakError (RuntimeError)        a traced value used after its trace ended
      ShapeError (ValueError)               shapes that do not fit an op
      DTypeError (TypeError)                element types that do not fit an op
      HloIndexError (IndexError)            a static index out of range, a malformed index
      ArgumentTypeError (TypeError)         an argument hlo.jit cannot take (str, object, ...)
      SignatureMismatchError (TypeError)    a Compiled called with arguments it was not built for
      ScalarOverflowError (OverflowError)   a Python int too large for the dtype it meets
      TargetUnavailableError (NotImplementedError)  a target whose backend is not there
      UnsupportedError (NotImplementedError)        a feature hlo does not have (dynamic shapes...)
      CallbackError (RuntimeError)          a host callback returned values of the wrong type
"""
from __future__ import annotations

from typing import Optional

from .base.source_info import SourceLocation, user_location

_AUTO = object()


class HloError(Exception):
    """Base of every frontend error. ``location`` is the user's source position (or None)."""

    def __init__(self, message: str, location=_AUTO):
        if location is _AUTO:
            location = user_location()
        self.location: Optional[SourceLocation] = location
        self.message = message
        super().__init__(f"{location}: {message}" if location is not None else message)


class ConcretizationError(HloError, TypeError):
    """Python needed a concrete value (a bool, an int, a numpy array) but got a traced one."""


class TracerBoolConversionError(ConcretizationError):
    pass


class TracerIntegerConversionError(ConcretizationError):
    pass


class TracerArrayConversionError(ConcretizationError):
    pass


class TracerLeakError(HloError, RuntimeError):
    """A traced value escaped its trace (stored in a global or attribute) and was used later."""


class ShapeError(HloError, ValueError):
    pass


class DTypeError(HloError, TypeError):
    pass


class HloIndexError(HloError, IndexError):
    pass


class ArgumentTypeError(HloError, TypeError):
    pass


class SignatureMismatchError(HloError, TypeError):
    pass


class ScalarOverflowError(HloError, OverflowError):
    pass


class TargetUnavailableError(HloError, NotImplementedError):
    pass


class UnsupportedError(HloError, NotImplementedError):
    pass


class CallbackError(HloError, RuntimeError):
    """A host callback (``hlo.pure_callback``) returned arrays that do not match its declared
    result shapes and dtypes; the location is the line of the call."""


def cuda_runner(program):
    """``run(flat)`` of a CUDA program (``hlo.runtime.cuda.artifact.CudaProgram``): the runtime's
    ``DeviceArray`` results (asynchronous);
    where the program cannot run (no GPU, driver or bindings: the runtime's
    ``CudaUnavailableError``), ``TargetUnavailableError`` with the runtime's reason."""
    from hlo.runtime.cuda.errors import CudaUnavailableError

    def run(flat):
        try:
            return list(program(*flat))
        except CudaUnavailableError as e:
            raise TargetUnavailableError(f"target 'cuda' cannot run here: {e}") from None
    return run
