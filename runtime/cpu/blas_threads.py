"""One BLAS thread while a BLAS-calling executable runs, and the user's setting back after.

Our parallel kernels call ?gemm from every pool thread at once, each on its own block, so the
BLAS must not start threads of its own inside them. OpenBLAS's thread count is process-wide, so
it is set to 1 around a whole call and restored when the last concurrent call ends. Setting it
inside the kernels, as each thread's calls began and ended, raced between the threads and could
leave the BLAS's other users (scipy, when it shares the library) on one thread after an hlo call.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Optional

_lock = threading.Lock()
_depth = 0          # calls running now
_saved = 0          # the count before the first of them
_setter: Optional[object] = None
_getter: Optional[object] = None
_resolved = False


def _set_fn():
    global _setter, _getter, _resolved
    if not _resolved:
        from hlo.backends.cpu.blas import find_blas
        b = find_blas()
        if b is not None and b.set_threads and b.get_threads:
            lib = ctypes.CDLL(b.path)
            _setter, _getter = getattr(lib, b.set_threads), getattr(lib, b.get_threads)
            _setter.argtypes, _setter.restype = [ctypes.c_int], None
            _getter.argtypes, _getter.restype = [], ctypes.c_int
        _resolved = True
    return _setter


def enter() -> None:
    """A BLAS-calling executable starts: the BLAS runs on the calling thread only."""
    global _depth, _saved
    with _lock:
        f = _set_fn()
        if _depth == 0 and f is not None:
            _saved = _getter()
            f(1)
        _depth += 1


def leave() -> None:
    """It ended: the last call running gives the BLAS its previous thread count back."""
    global _depth
    with _lock:
        _depth -= 1
        if _depth == 0 and _setter is not None:
            _setter(_saved)
