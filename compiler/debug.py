"""``hlo.debug``: printing from compiled code (jax's ``jax.debug.print``).

``hlo.debug.print("loss {x}", x=loss)`` formats with ``str.format`` (positional and keyword
arguments, any pytree of arrays, which arrive as numpy arrays) and prints when the compiled
program reaches it, with the run-time values: every iteration of a loop, the branch that runs,
one line per example under ``hlo.vmap``, the primal values under ``hlo.grad``. Prints run in
program order (``ordered=`` is accepted; every print is ordered). A host callback
(``callbacks.py``) on the cpu and interpreter targets.
"""
from __future__ import annotations

import builtins

from .base.source_info import user_location
from .lax.callbacks import HostFunction, call_host
from .tree_util import tree_flatten, tree_unflatten


def print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:  # jax's name
    """Print ``fmt.format(*args, **kwargs)`` when the program runs this line."""
    if not isinstance(fmt, str):
        raise TypeError(f"{user_location()}: hlo.debug.print needs a format string, got "
                        f"{type(fmt).__name__}")
    _effect("hlo.debug.print", lambda *a, **kw: builtins.print(fmt.format(*a, **kw)), args, kwargs)


def callback(fn, *args, ordered: bool = False, **kwargs) -> None:
    """Call ``fn(*args, **kwargs)`` (numpy arrays for the array leaves) for its side effects
    when the program runs this line (jax's ``jax.debug.callback``); its result is ignored."""
    if not callable(fn):
        raise TypeError(f"{user_location()}: hlo.debug.callback needs a callable, got "
                        f"{type(fn).__name__}")
    _effect("hlo.debug.callback", fn, args, kwargs)


def _effect(what: str, fn, args, kwargs) -> None:
    leaves, tree = tree_flatten((args, kwargs))

    def run(arrays):
        a, kw = tree_unflatten(tree, arrays)
        fn(*a, **kw)
        return []

    call_host(HostFunction(run, [], what, user_location(), "sequential"), leaves)


__all__ = ["print", "callback"]
