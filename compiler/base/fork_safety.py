"""Fork safety of the process-wide state that every target shares: llvmlite's lock.

llvmlite serializes every call into LLVM behind one process-wide reentrant lock (``ffi.lib``'s
``_LLVMLock``). A child forked while another thread of the parent was inside LLVM (compiling,
or linking an executable loaded from the compile cache) would inherit that lock held by a
thread it does not have, and hang on its first call into LLVM; and LLVM's own C++ state (its
mutexes, a module half emitted) would be caught mid-way too. So:

- before a fork, the forking thread takes llvmlite's lock: it waits until the thread inside
  LLVM finishes its current call (one C call: a module's optimization or object emission at
  most), so no thread is inside LLVM at the instant of the fork;
- after it, the parent releases the lock, and the child gets a fresh one (the copied lock is
  owned by the forking thread, which in the child is the one thread left; a fresh lock needs no
  reasoning about that).

``import hlo`` imports this module first of all (``compiler/__init__.py``; any ``hlo.*`` import
runs that first), so its handlers are registered before any other module's:
``os.register_at_fork`` runs the ``before`` handlers in reverse order of registration, so
``backends/cpu/gemm_library.py`` (whose library thread compiles in LLVM and must be let finish
first) waits for its thread before this handler takes the lock that thread needs. Modules with
locks of their own reset them in the child with their own ``after_in_child`` handler
(``compile_cache``, ``config``, ``api``, ``api_util``, ``gc_pause``, ``ir.nesting``,
``ir.callbacks``, ``gemm_library``). Nothing is done where llvmlite was never imported.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Any, Optional

_held: Optional[Any] = None   # the _LLVMLock taken before a fork, released after it


def _llvm_lock():
    ffi = sys.modules.get("llvmlite.binding.ffi")
    lib = getattr(ffi, "lib", None) if ffi is not None else None
    lock = getattr(lib, "_lock", None)
    return lock if lock is not None and hasattr(lock, "_lock") else None


def _before_fork() -> None:
    global _held
    lock = _llvm_lock()
    if lock is not None:
        lock._lock.acquire()
        _held = lock


def _after_fork_in_parent() -> None:
    global _held
    lock, _held = _held, None
    if lock is not None:
        lock._lock.release()


def _after_fork_in_child() -> None:
    global _held
    lock, _held = _held, None
    if lock is not None:
        lock._lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
