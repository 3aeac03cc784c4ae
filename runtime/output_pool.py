"""Recycled memory for large outputs.

A freshly allocated multi-megabyte array costs a page fault per page the first time the kernel
writes it (about a third of a memory-bound kernel's time here). Large outputs therefore come
from this pool: each is a numpy array whose base is a ``_Block``; when the caller drops the
last array that uses the block, the block's memory goes back to the pool and the next call of
any executable reuses it, already faulted in (what XLA's allocator does for jax).

The pool keeps at most ``MAX_CACHED_BYTES`` of free memory (oldest sizes dropped first) and
only handles outputs of at least ``MIN_BYTES`` (``call_threshold`` lowers that for a call with
several medium outputs; ``allocator``); smaller ones are plain ``np.empty``.
"""
from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from typing import Callable, List, Optional, Tuple

import numpy as np

MIN_BYTES = 1 << 20
MAX_CACHED_BYTES = 1 << 30
_ALIGN = 64
# A call whose outputs of a page or more (PAGE) are several and total CALL_MIN_BYTES takes
# them all from the pool (``call_threshold``).
PAGE = 4096
CALL_MIN_BYTES = 128 << 10


def call_threshold(sizes) -> int:
    """The size from which the outputs of a call with outputs of ``sizes`` bytes come from the
    pool: ``MIN_BYTES``, or ``PAGE`` when the call returns several outputs of a page or more
    that total ``CALL_MIN_BYTES``. Freed together, such outputs leave more free memory at the
    top of glibc's heap than its trim threshold (128 KiB, or twice the largest block it has
    unmapped), so malloc hands the pages back to the system after every call and the next
    call's outputs fault them in again: two 256 KiB outputs of a 128 x 512 add-and-relu took
    129 us a call (100 page faults) where one took 8. One output alone stays under it."""
    big = [n for n in sizes if n >= PAGE]
    if len(big) >= 2 and sum(big) >= CALL_MIN_BYTES:
        return PAGE
    return MIN_BYTES


class _Pool:
    """Free allocations by size: lists of ``(raw, addr)``, ``raw`` a uint8 array and ``addr``
    its first ``_ALIGN``-aligned address (computed once per allocation: ``ndarray.ctypes``
    costs ~0.8 us)."""

    def __init__(self):
        self.free: "OrderedDict[int, List[Tuple[np.ndarray, int]]]" = OrderedDict()
        self.cached = 0
        self.lock = threading.Lock()

    def take(self, nbytes: int) -> Tuple[np.ndarray, int]:
        with self.lock:
            lst = self.free.get(nbytes)
            if lst:
                mem = lst.pop()
                self.cached -= nbytes
                return mem
        raw = np.empty(nbytes + _ALIGN, np.uint8)
        addr = raw.ctypes.data
        return raw, addr + (-addr) % _ALIGN

    def give(self, nbytes: int, mem: Tuple[np.ndarray, int]) -> None:
        with self.lock:
            if nbytes > MAX_CACHED_BYTES:
                return
            self.free.setdefault(nbytes, []).append(mem)
            self.free.move_to_end(nbytes)
            self.cached += nbytes
            while self.cached > MAX_CACHED_BYTES and self.free:
                size, lst = next(iter(self.free.items()))
                lst.pop()
                self.cached -= size
                if not lst:
                    del self.free[size]


_POOL = _Pool()


def _after_fork_in_child() -> None:
    """A thread of the parent may have held the pool's lock at the fork."""
    _POOL.lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Block:
    """Owns one pooled allocation while arrays use it; returns it to the pool when freed."""

    __slots__ = ("mem", "nbytes", "__array_interface__")

    def __init__(self, mem: Tuple[np.ndarray, int], nbytes: int, shape: tuple, typestr: str):
        self.mem = mem
        self.nbytes = nbytes
        self.__array_interface__ = {"shape": shape, "typestr": typestr, "data": (mem[1], False),
                                    "version": 3}

    def __del__(self):
        try:
            _POOL.give(self.nbytes, self.mem)
        except Exception:  # interpreter shutdown
            pass


def allocator(shape, dtype, min_bytes: int = MIN_BYTES) -> Optional[Callable[[], np.ndarray]]:
    """A function of no arguments that returns an uninitialized C-contiguous array of ``shape``
    and ``dtype`` from the pool (its base a ``_Block``), or None where such an array does not
    come from the pool (under ``min_bytes``, or a dtype of Python objects or without a byte
    order). The executable calls it for every such output, from Python or from its native entry
    (``Executable.native_call``); everything per array is worked out here, once."""
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    # math.prod, not np.prod: numpy's reduction machinery took ~2.5 us a call
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < min_bytes or dtype.hasobject or dtype.str[0] not in "<>|=":
        return None
    typestr = dtype.str

    def take() -> np.ndarray:
        return np.asarray(_Block(_POOL.take(nbytes), nbytes, shape, typestr))
    return take


def cached_bytes() -> int:
    return _POOL.cached
