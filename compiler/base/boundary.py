"""Where calls enter hlo from the user's code.

``api_boundary``: exceptions leaving the decorated function lose hlo's own frames from their
traceback (``hlo.config.traceback_filtering``; ``HLO_TRACEBACK=full`` keeps them), so what remains
is the user's code: hlo's errors, and also plain Python exceptions raised while tracing the user's
function (a wrong argument count, ``x[i] = v`` on a traced array, a missing ``hlo.numpy`` name),
as jax's ``traceback_util`` does. One hlo frame stays: the boundary's own re-raise (a frame
re-raising an exception is always part of its traceback; jax keeps its ``traceback_util`` frame
the same way), and the exception gets a note saying how many frames went and how to see them.

``native_first`` does the same for the ``__call__`` of an object that may have a native entry
(``hlo.jit`` functions, ``Compiled``, a loaded ``.hlox``): a call without keyword arguments goes
to ``self._native`` first (a builtin function, ``Executable.native_call``, that runs the
executable or calls its own ``api_boundary``-wrapped Python fallback), with no Python frame in
between; ``refresh_native`` (re)makes that entry once per ``hlo.config`` epoch.

Imported by loading a saved executable: nothing here may import tracing, passes or backends.
"""
from __future__ import annotations

import functools
import weakref
from typing import Callable, Optional

from hlo.ir.types import ShapeOverflowError
from hlo.runtime.cpu import pycall

from .. import config
from ..errors import HloError, ShapeError
from .source_info import SourceLocation, filter_traceback, note_filtered, user_frame, user_location_in


def api_boundary(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        __tracebackhide__ = True  # pytest hides this frame
        try:
            return fn(*args, **kwargs)
        except ShapeOverflowError as e:
            raise _shape_error(e) from None
        except Exception as e:
            if not config.read("traceback_filtering"):
                raise
            tb = e.__traceback__
            e = e.with_traceback(filter_traceback(tb))
            note_filtered(e, tb)
            if isinstance(e, HloError):
                e.__suppress_context__ = True
            del tb
            raise e  # (hlo's own frames removed: HLO_TRACEBACK=full keeps them)
    return wrapper


def _shape_error(e: ShapeOverflowError) -> ShapeError:
    """A shape too large for a 64-bit index (``ir.types.TensorType``), made wherever the tracer
    or the frontend built the type, as a ``ShapeError`` at the user's line that made it."""
    f = user_frame(e.origin) if e.origin is not None else None
    loc = (SourceLocation(f.f_code.co_filename, f.f_lineno, f.f_code.co_name) if f is not None
           else user_location_in(e.__traceback__))
    e.origin = None  # the frames are not kept alive by the error
    err = ShapeError(str(e), location=loc)
    tb = filter_traceback(e.__traceback__) if config.read("traceback_filtering") else e.__traceback__
    return err.with_traceback(tb)


def native_first(fn: Callable) -> Callable:
    """``__call__ = native_first(call)`` where ``call(self, args, kwargs)`` is the Python path
    (see the module docstring)."""
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        __tracebackhide__ = True
        native = self._native
        if native is not None and not kwargs:
            return native(*args)
        try:
            return fn(self, args, kwargs)
        except ShapeOverflowError as e:
            raise _shape_error(e) from None
        except Exception as e:  # (as api_boundary; not a shared helper: it would show as a frame)
            if not config.read("traceback_filtering"):
                raise
            tb = e.__traceback__
            e = e.with_traceback(filter_traceback(tb))
            note_filtered(e, tb)
            if isinstance(e, HloError):
                e.__suppress_context__ = True
            del tb
            raise e  # (hlo's own frames removed: HLO_TRACEBACK=full keeps them)
    return wrapper


def refresh_native(obj, make: Callable[[Callable], Optional[Callable]]) -> None:
    """Give ``obj`` (whose ``__call__`` is ``native_first``) its native entry for this
    ``hlo.config`` epoch, once per epoch: ``make(fallback)`` or None. The fallback runs the
    Python path, ``__call__.__wrapped__(obj, args, {})``, holding ``obj`` weakly (no cycle)."""
    epoch = pycall.epoch()
    if obj._native_epoch != epoch:
        ref = weakref.ref(obj)
        python_call = type(obj).__call__.__wrapped__  # type: ignore[attr-defined]  # (set by api_boundary)
        obj._native = make(api_boundary(lambda *args: python_call(ref(), args, {})))
        obj._native_epoch = epoch
