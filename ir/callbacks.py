"""Host callbacks: the Python callables that ``host_callback`` ops call, by id.

An op names its callable by ``callback_id``, an integer of this process's registry; the
callable lives here for as long as the process does (a traced program, its executables and
their batched or differentiated variants may all refer to it). The frontend registers its
callables (``hlo.lax.callbacks``: ``hlo.debug.print``, ``hlo.pure_callback``); the interpreter and
the CPU runtime call them through ``invoke``. An id means nothing in another process, which is
why a program with a host callback is neither saved (``.hlox``) nor put in the persistent
compilation cache.

A registered callable takes the operand values (numpy arrays, copies the callee may keep) and
returns the results (numpy arrays of the op's result types); it raises with a message naming
the user's line when the user's function returns something else. ``invoke`` checks the results
once more, so nothing of the wrong size is ever written into a buffer.
"""
from __future__ import annotations

import itertools
import os
import threading
from typing import Callable, Dict, List, Sequence

import numpy as np

from .types import TensorType

_REGISTRY: Dict[int, Callable] = {}
_ids = itertools.count(1)
_lock = threading.Lock()


def _after_fork_in_child() -> None:
    """A thread of the parent may have held the lock at the fork."""
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

OP_NAME = "host_callback"


class CallbackError(RuntimeError):
    """A host callback that cannot be called, or that returned values of the wrong type."""


def register(fn: Callable[[List[np.ndarray]], Sequence[np.ndarray]]) -> int:
    """Keep ``fn`` for the process's lifetime; returns its id."""
    with _lock:
        i = next(_ids)
        _REGISTRY[i] = fn
    return i


def lookup(callback_id: int) -> Callable:
    try:
        return _REGISTRY[callback_id]
    except KeyError:
        raise CallbackError(f"host callback #{callback_id} is not registered in this process "
                            "(a program with host callbacks runs only in the process that traced "
                            "it)") from None


def invoke(callback_id: int, args: List[np.ndarray], result_types: Sequence[TensorType],
           where: str = "") -> List[np.ndarray]:
    """Call callback ``callback_id`` on ``args``; its results, checked against ``result_types``
    (as C-contiguous arrays of exactly those shapes and element types)."""
    outs = list(lookup(callback_id)(args))
    at = f" at {where}" if where else ""
    if len(outs) != len(result_types):
        raise CallbackError(f"host callback{at} returned {len(outs)} value(s), expected "
                            f"{len(result_types)}")
    checked = []
    for k, (o, t) in enumerate(zip(outs, result_types)):
        o = np.asarray(o)
        if o.shape != tuple(t.shape) or o.dtype != t.dtype.np_dtype:
            raise CallbackError(f"host callback{at}: result {k} is {o.dtype}{list(o.shape)}, "
                                f"expected {t.without_layout()}")
        checked.append(np.asarray(o, order="C"))  # (ascontiguousarray makes 0-d 1-d)
    return checked


def has_host_callbacks(module) -> bool:
    """True if any function of ``module`` holds a ``host_callback`` op."""
    return any(op.name == OP_NAME for fn in module.functions.values() for op in fn.walk())


def first_host_callback(module):
    """The first ``host_callback`` op of ``module`` (for errors naming its line), or None."""
    for fn in module.functions.values():
        for op in fn.walk():
            if op.name == OP_NAME:
                return op
    return None
