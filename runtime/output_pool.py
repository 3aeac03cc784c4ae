"""Recycled memory for large outputs.

A freshly allocated multi-megabyte array costs a page fault per page the first time the kernel
writes it (about a third of a memory-bound kernel's time here). Large outputs therefore come
from this pool: each is a numpy array whose base is a ``_Block``; when the caller drops the
last array that uses the block, the block's memory goes back to the pool and the next call of
any executable reuses it, already faulted in (what XLA's allocator does for jax).

The pool keeps at most ``MAX_CACHED_BYTES`` of free memory (oldest sizes dropped first) and
only handles outputs of at least ``MIN_BYTES`` (``call_threshold`` lowers that for a call with
several medium outputs); smaller ones are plain ``np.empty``.
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Dict, List

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
    def __init__(self):
        self.free: "OrderedDict[int, List[np.ndarray]]" = OrderedDict()
        self.cached = 0
        self.lock = threading.Lock()

    def take(self, nbytes: int) -> np.ndarray:
        with self.lock:
            lst = self.free.get(nbytes)
            if lst:
                raw = lst.pop()
                self.cached -= nbytes
                return raw
        return np.empty(nbytes + _ALIGN, np.uint8)

    def give(self, nbytes: int, raw: np.ndarray) -> None:
        with self.lock:
            if nbytes > MAX_CACHED_BYTES:
                return
            self.free.setdefault(nbytes, []).append(raw)
            self.free.move_to_end(nbytes)
            self.cached += nbytes
            while self.cached > MAX_CACHED_BYTES and self.free:
                size, lst = next(iter(self.free.items()))
                lst.pop()
                self.cached -= size
                if not lst:
                    del self.free[size]


_POOL = _Pool()


class _Block:
    """Owns one pooled allocation while arrays use it; returns it to the pool when freed."""

    __slots__ = ("raw", "nbytes", "__array_interface__")

    def __init__(self, raw: np.ndarray, nbytes: int, shape, dtype: np.dtype):
        self.raw = raw
        self.nbytes = nbytes
        addr = raw.ctypes.data
        addr += (-addr) % _ALIGN
        self.__array_interface__ = {"shape": tuple(shape), "typestr": dtype.str,
                                    "data": (addr, False), "version": 3}

    def __del__(self):
        try:
            _POOL.give(self.nbytes, self.raw)
        except Exception:  # interpreter shutdown
            pass


def empty(shape, dtype: np.dtype, min_bytes: int = MIN_BYTES) -> np.ndarray:
    """An uninitialized C-contiguous array, from the pool when it is ``min_bytes`` or more."""
    dtype = np.dtype(dtype)
    # math.prod, not np.prod: numpy's reduction machinery took ~2.5 us a call, 12 us of the
    # train step's 5 outputs (0.1 us here)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < min_bytes or dtype.hasobject or dtype.str[0] not in "<>|=":
        return np.empty(shape, dtype)
    return np.asarray(_Block(_POOL.take(nbytes), nbytes, shape, dtype))


def cached_bytes() -> int:
    return _POOL.cached
