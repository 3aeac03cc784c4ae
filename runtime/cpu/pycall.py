"""The CPython entry of a CPU executable as a Python builtin function (``abi.CALL_ENTRY``).

``make`` wraps the executable's ``hlo_call_py`` into a builtin function object (a
``PyMethodDef`` kept alive by the function itself, ``METH_FASTCALL``) whose ``self`` is the
tuple ``(ctx, fallback, finish, keep)``: ``ctx`` holds, per process and per callable, every
address the native code uses (``abi.CTX_*``), ``keep`` everything those addresses point into
(the executable's code, the descriptors, the outputs' allocators, the arena, the method
definition). The function
object owns all of it: nothing the native code reads can go away while it can run.

``available()`` says whether this interpreter and numpy have the object layout the native
code reads (``abi``'s offsets, checked against real objects, and numpy's
``PyArray_NewFromDescr`` found in its C-API table and tried once); where not, no callable is
made and every call takes the Python path.

The guard cell (``guard``: epoch, active traces) is process-wide: ``hlo.config`` bumps the
epoch on every update and tracing counts the traces in progress; a callable made in an older
epoch, or called while any trace is in progress, hands its calls to its fallback.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import abi

guard = np.zeros(2, np.int64)  # (epoch, traces in progress): read by every native call
_guard_lock = threading.Lock()


def bump_epoch() -> None:
    """Make every callable made so far hand its calls to its fallback (a setting changed)."""
    with _guard_lock:
        guard[0] += 1


def epoch() -> int:
    return int(guard[0])


def trace_started() -> None:
    with _guard_lock:
        guard[1] += 1


def trace_ended() -> None:
    with _guard_lock:
        guard[1] -= 1


class _PyMethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


_METH_FASTCALL = 0x80
_api: Optional[dict] = None  # the C-API addresses once probed; {} when unusable


def _addr(name: str) -> int:
    return ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value


def _numpy_api_table() -> int:
    try:
        from numpy._core import _multiarray_umath as mu  # type: ignore[attr-defined]  # (not in numpy's stubs)
    except ImportError:  # numpy 1.x
        from numpy.core import _multiarray_umath as mu
    cap = mu._ARRAY_API
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_void_p, [ctypes.py_object]
    get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
    get_ptr.restype, get_ptr.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_void_p]
    return get_ptr(cap, get_name(cap))


_NEW_FROM_DESCR_INDEX = 94  # PyArray_NewFromDescr's slot in numpy's C-API table (1.x and 2.x)


def _probe() -> dict:
    """The addresses the native entry calls, or {} when this interpreter's layout is not the
    one it reads."""
    if sys.implementation.name != "cpython" or ctypes.sizeof(ctypes.c_void_p) != 8:
        return {}
    if not getattr(sys, "_is_gil_enabled", lambda: True)():
        return {}
    rd = lambda addr: ctypes.c_void_p.from_address(addr).value
    i32 = lambda addr: ctypes.c_int32.from_address(addr).value
    a = np.zeros((3, 5), np.float32)
    t = (a, None)
    if rd(id(t) + abi.PY_TUPLE_ITEMS) != id(a) or rd(id(t) + abi.PY_TUPLE_ITEMS + 8) != id(None):
        return {}
    if rd(id(a) + abi.PY_TYPE) != id(np.ndarray) or rd(id(1.5) + abi.PY_TYPE) != id(float):
        return {}
    if rd(id(a) + abi.NP_ARRAY_DATA) != a.ctypes.data or i32(id(a) + abi.NP_ARRAY_NDIM) != 2:
        return {}
    dims = rd(id(a) + abi.NP_ARRAY_DIMS)
    if (ctypes.c_int64 * 2).from_address(dims)[:] != [3, 5]:
        return {}
    if rd(id(a) + abi.NP_ARRAY_DESCR) != id(a.dtype) or a.dtype is not np.dtype(np.float32):
        return {}
    view = a[1:]
    if rd(id(view) + abi.NP_ARRAY_BASE) != id(a) or rd(id(a) + abi.NP_ARRAY_BASE) is not None:
        return {}
    ro = a.copy()
    ro.flags.writeable = False
    flag = lambda x: i32(id(x) + abi.NP_ARRAY_FLAGS)
    if flag(a) & (abi.NPY_OWNDATA | abi.NPY_WRITEABLE) != abi.NPY_OWNDATA | abi.NPY_WRITEABLE \
            or flag(view) & abi.NPY_OWNDATA or flag(ro) & abi.NPY_WRITEABLE:
        return {}
    cont = abi.NPY_C_CONTIGUOUS_ALIGNED
    strided = a[:, ::2]
    unaligned = np.zeros(9, np.uint8)[1:].view(np.int32)
    if i32(id(a) + abi.NP_ARRAY_FLAGS) & cont != cont or i32(id(strided) + abi.NP_ARRAY_FLAGS) & 1 \
            or i32(id(unaligned) + abi.NP_ARRAY_FLAGS) & 0x100:
        return {}
    api = {abi.CTX_NDARRAY: id(np.ndarray)}
    for slot, name in ((abi.CTX_VECTORCALL, "PyObject_Vectorcall"), (abi.CTX_TUPLE_NEW, "PyTuple_New"),
                       (abi.CTX_INCREF, "Py_IncRef"), (abi.CTX_DECREF, "Py_DecRef"),
                       (abi.CTX_SAVE_THREAD, "PyEval_SaveThread"),
                       (abi.CTX_RESTORE_THREAD, "PyEval_RestoreThread")):
        api[slot] = _addr(name)
    new = ctypes.c_void_p.from_address(_numpy_api_table() + 8 * _NEW_FROM_DESCR_INDEX).value
    # try it: an f64[2,3] made as the native code makes its outputs
    proto = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                              ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                              ctypes.c_void_p)
    d = np.dtype(np.float64)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(d))  # the call steals one reference
    shape = (ctypes.c_int64 * 2)(2, 3)
    out = proto(new)(id(np.ndarray), id(d), 2, ctypes.addressof(shape), None, None, 0, None)
    if type(out) is not np.ndarray or out.shape != (2, 3) or out.dtype is not d \
            or not out.flags.c_contiguous or not out.flags.owndata:
        return {}
    api[abi.CTX_NEW_FROM_DESCR] = new
    return api


def available() -> bool:
    """Whether native callables can be made in this process (``HLO_NATIVE_CALL=0`` turns them
    off)."""
    global _api
    if os.environ.get("HLO_NATIVE_CALL", "1") == "0":
        return False
    if _api is None:
        try:
            _api = _probe()
        except Exception:
            _api = {}
    return bool(_api)


def make(entry: int, keep: Any, descrs: Sequence[np.dtype], arena_size: int, nthreads: int,
         fallback: Callable, finish, allocators: Sequence[Optional[Callable]]) -> Optional[Callable]:
    """A builtin function running the ``hlo_call_py`` at address ``entry`` (see the module
    docstring); ``keep``: what must outlive it (the executable's code); ``descrs``: the input
    then output dtypes; ``finish``: "single", "tuple" or a callable of the outputs' tuple;
    ``allocators``: per output, a function of no arguments that makes it (the recycled-output
    pool's, ``output_pool.allocator``) or None (numpy's ``PyArray_NewFromDescr``). None where
    ``available()`` is False."""
    if not available():
        return None
    allocators = tuple(allocators)
    from ..output_pool import _Block
    ctx = np.zeros(abi.CTX_DESCRS + len(descrs) + len(allocators) + 1, np.int64)
    ctx[abi.CTX_GUARD] = guard.ctypes.data
    ctx[abi.CTX_EPOCH] = guard[0]
    for slot, addr in _api.items():
        ctx[slot] = addr
    descrs = tuple(np.dtype(d) for d in descrs)
    ctx[abi.CTX_DESCRS:abi.CTX_DESCRS + len(descrs)] = [id(d) for d in descrs]
    ctx[abi.CTX_DESCRS + len(descrs):-1] = [0 if a is None else id(a) for a in allocators]
    ctx[-1] = id(_Block)  # (a class: alive as long as the module)
    ctx[abi.CTX_NTHREADS] = nthreads
    arena = None
    if arena_size:
        arena = np.zeros(arena_size + 64, np.uint8)
        ctx[abi.CTX_ARENA] = arena.ctypes.data + (-arena.ctypes.data) % 64
    if finish == "single":
        ctx[abi.CTX_OUT_MODE], finish = abi.OUT_SINGLE, None
    elif finish == "tuple":
        ctx[abi.CTX_OUT_MODE], finish = abi.OUT_TUPLE, None
    else:
        ctx[abi.CTX_OUT_MODE] = abi.OUT_FINISH
    md = _PyMethodDef(b"hlo_call", entry, _METH_FASTCALL, None)
    me = (ctx, fallback, finish, (md, keep, descrs, allocators, arena, guard))
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]
    return new(ctypes.addressof(md), me, None)


def hits(fn: Any) -> int:   # a builtin method: its __self__ is the context tuple
    """How many calls ``fn`` (made by ``make``) ran natively."""
    return int(fn.__self__[abi.SELF_CTX][abi.CTX_HITS])
