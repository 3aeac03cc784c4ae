"""Nesting depth of a module's regions, and running a recursive walk with the stack it needs.

Walks over the nested structure of a program (control flow inside control flow: the lowering's
step tree, its code generation, the passes' region walks) recurse once per level, a few Python
frames each. Long straight-line programs cost no depth (the elemental emitter walks elementwise
chains iteratively); depth comes only from regions inside regions. ``call_with_stack_for``
measures the module's depth (iteratively) and, when it is deep, runs the walk in a thread whose
stack and recursion limit are sized for that depth, so a 200-deep ``case`` nest compiles where
the default limit (1,000 frames) would stop it. The bound is the program's own nesting."""
from __future__ import annotations

import contextvars
import os
import sys
import threading
from typing import Any, Callable

FRAMES_PER_LEVEL = 40  # generous: the lowering takes ~6 frames per nested region, codegen more
SHALLOW = 16  # nests this deep run on the caller's thread, as they are
_lock = threading.Lock()
_deep_calls = 0
_saved_limit = 0


def _after_fork_in_child() -> None:
    """A thread of the parent may have held the lock at the fork; its deep walk is not in the
    child (the recursion limit it raised stays raised: harmless)."""
    global _lock, _deep_calls
    _lock = threading.Lock()
    _deep_calls = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def region_depth(module) -> int:
    """The deepest nesting of regions in ``module`` (0: no op holds a region)."""
    deepest = 0
    stack = [(fn.body, 0) for fn in module.functions.values()]
    while stack:
        region, depth = stack.pop()
        deepest = max(deepest, depth)
        for op in region.ops:
            for r in op.regions:
                stack.append((r, depth + 1))
    return deepest


def call_with_stack_for(module, fn: Callable[..., Any], *args, **kwargs) -> Any:
    """``fn(*args, **kwargs)``, on a thread with room for ``module``'s nesting when it is deep."""
    return call_with_stack_for_depth(region_depth(module), fn, *args, **kwargs)


def call_with_stack_for_depth(depth: int, fn: Callable[..., Any], *args, **kwargs) -> Any:
    """``fn(*args, **kwargs)``, on a thread with room for a walk ``depth`` levels deep when that
    is deep (the parser's: the text's nesting, before there is a module)."""
    if depth <= SHALLOW:
        return fn(*args, **kwargs)
    frames = 1000 + depth * FRAMES_PER_LEVEL
    result: list = []
    ctx = contextvars.copy_context()

    def run():
        try:
            result.append((True, ctx.run(fn, *args, **kwargs)))
        except BaseException as e:  # re-raised on the caller's thread
            result.append((False, e))

    raise_limit(frames)
    try:
        old = threading.stack_size()
        with _lock:  # stack_size is process-wide: set it only while this thread starts
            threading.stack_size(min(1 << 30, (16 << 20) + frames * (16 << 10)))
            try:
                t = threading.Thread(target=run, name="hlo-deep-walk")
                t.start()
            finally:
                threading.stack_size(old)
        t.join()
    finally:
        restore_limit()
    ok, value = result[0]
    if not ok:
        raise value
    return value


def frames_in_use() -> int:
    """How many Python frames the calling thread's stack holds (a walk up: O(depth))."""
    n, f = 0, sys._getframe(1)
    while f is not None:
        n += 1
        f = f.f_back
    return n


def raise_limit(frames: int) -> None:
    """Make Python's recursion limit at least ``frames`` until the matching ``restore_limit``
    (calls nest and may come from several threads: the limit is restored when the last ends)."""
    global _deep_calls, _saved_limit
    with _lock:
        if _deep_calls == 0:
            _saved_limit = sys.getrecursionlimit()
        _deep_calls += 1
        if sys.getrecursionlimit() < frames:
            sys.setrecursionlimit(frames)


def restore_limit() -> None:
    global _deep_calls
    with _lock:
        _deep_calls -= 1
        if _deep_calls == 0:
            sys.setrecursionlimit(_saved_limit)
