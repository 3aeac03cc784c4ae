"""Decorators for hlo's public entry points.

``api_boundary`` and ``native_first`` live in ``boundary`` (loading a saved executable uses
them without importing this module) and are re-exported here.

``api_function``: for hlo.numpy / hlo.lax / hlo.nn functions. Inside a trace they record ops.
Called outside any trace (eagerly, on numpy arrays), the call is compiled on its own — array
arguments become parameters, everything else (Python scalars, shapes, axes, dtypes) is static —
cached per signature, run on the default target, and the result comes back as numpy arrays.
The compiler that does this is registered (``set_eager_compiler``) by ``hlo.staging.jit`` (``hlo.jit``),
which sits above the array libraries: this module, below them, never imports it.
"""
from __future__ import annotations

import collections
import functools
import os
import threading
from typing import Any, Callable


def api_function(fn: Callable) -> Callable:
    """Mark a public array function: traced inside ``hlo.jit``, compiled on its own outside."""
    from .tracer import is_tracing

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        __tracebackhide__ = True
        if is_tracing():
            return fn(*args, **kwargs)
        return _eager_call(fn, args, kwargs)
    wrapper.__hlo_traced__ = fn  # type: ignore[attr-defined]  # the undecorated function (for calls known to be inside a trace)
    return wrapper


# --------------------------------------------------------------------------------------------
# Eager calls
# --------------------------------------------------------------------------------------------

_eager_lock = threading.Lock()
_eager_jits: "collections.OrderedDict[Any, Any]" = collections.OrderedDict()
_EAGER_CACHE_SIZE = 4096


def _after_fork_in_child() -> None:
    """A thread of the parent may have held the lock at the fork (base/fork_safety.py)."""
    global _eager_lock
    _eager_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def static_key(x):
    """A cache key for a static value that tells 1, 1.0 and True apart, and 0.0 from -0.0."""
    if isinstance(x, float):
        return (float, repr(x))
    if isinstance(x, tuple):
        return (tuple, tuple(static_key(v) for v in x))
    return (type(x), x)


def _is_dynamic(x) -> bool:
    from .abstract import is_arraylike
    return is_arraylike(x)


_eager_compiler = None


def set_eager_compiler(jit: Callable) -> None:
    """Register ``jit`` (``hlo.jit``'s signature, plus ``_eager=True``) as what compiles calls
    made outside a trace. ``hlo.staging.jit`` registers ``hlo.jit`` when it is imported."""
    global _eager_compiler
    _eager_compiler = jit


def _eager_call(fn: Callable, args, kwargs):
    __tracebackhide__ = True
    jit = _eager_compiler
    if jit is None:
        raise RuntimeError(f"{getattr(fn, '__name__', fn)} was called outside hlo.jit before "
                           "hlo.jit was loaded (import hlo, hlo.numpy or hlo.lax first)")
    from ..tree_util import tree_flatten, tree_unflatten
    from .tracer import Tracer, leaked_tracer_error
    leaves, tree = tree_flatten((args, kwargs))
    for x in leaves:
        if isinstance(x, Tracer):
            raise leaked_tracer_error(x)
    dyn_pos = tuple(i for i, x in enumerate(leaves) if _is_dynamic(x))
    statics = tuple(None if i in dyn_pos else x for i, x in enumerate(leaves))
    dyn = [leaves[i] for i in dyn_pos]

    def run(static_leaves, *dyn_leaves):
        full = list(static_leaves)
        for i, x in zip(dyn_pos, dyn_leaves):
            full[i] = x
        a, k = tree_unflatten(tree, full)
        return fn(*a, **k)

    run.__name__ = getattr(fn, "__name__", "fn")
    run.__qualname__ = getattr(fn, "__qualname__", run.__name__)
    try:
        key = (fn, tree, dyn_pos, tuple(static_key(s) for s in statics))
        hash(key)
    except TypeError:
        key = None
    if key is None:
        return jit(lambda *d: run(statics, *d), _eager=True)(*dyn)
    with _eager_lock:
        j = _eager_jits.get(key)
        if j is None:
            j = _eager_jits[key] = jit(functools.partial(run, statics), _eager=True)
            if len(_eager_jits) > _EAGER_CACHE_SIZE:
                _eager_jits.popitem(last=False)
        else:
            _eager_jits.move_to_end(key)
    return j(*dyn)
