"""Python's cyclic garbage collector held off while hlo traces and compiles.

A compile allocates tens of thousands of short-lived objects (IR operations, llvmlite values,
strings); those allocations trigger collections, and now and then one of the oldest generation,
whose cost grows with everything else the process holds, not with the compile: with jax and
torch imported (~250k objects) one such collection took 110 ms in the middle of a 340 ms
transformer compile. ``paused()`` switches the collector off for the duration and back on after
(the compile's own garbage is freed by reference counting; the few cycles wait for the next
collection). Nested and concurrent compiles share one pause; a collector the user turned off
stays off.
"""
from __future__ import annotations

import contextlib
import gc
import os
import threading

_lock = threading.Lock()
_depth = 0
_we_disabled = False


def _after_fork_in_child() -> None:
    """A fresh lock, and no pause: the threads of the parent that paused the collector are not
    in the child, and would never end their pause (base/fork_safety.py)."""
    global _lock, _depth, _we_disabled
    _lock = threading.Lock()
    if _depth and _we_disabled:
        gc.enable()
    _depth, _we_disabled = 0, False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@contextlib.contextmanager
def paused():
    global _depth, _we_disabled
    with _lock:
        if _depth == 0:
            _we_disabled = gc.isenabled()
            if _we_disabled:
                gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _we_disabled:
                _we_disabled = False
                gc.enable()
