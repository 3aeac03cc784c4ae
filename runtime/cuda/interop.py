"""Device arrays in and out without copies: DLPack capsules and ``__cuda_array_interface__``.

``export_capsule(ptr, shape, strides, dtype, device, owner)`` makes a DLPack (legacy
``dltensor``) capsule over device memory that ``owner`` keeps alive until the consumer calls
the deleter (or the capsule is dropped unused). ``import_array(obj, stream_handle, event)``
reads a GPU array of another library (torch, jax, cupy, numba): through ``__dlpack__`` first
(asking the producer to order its pending work before ``stream_handle``), else through
``__cuda_array_interface__`` (v3's ``stream``, or the legacy default stream when the producer
names none, is waited on through ``event``). It returns a ``ForeignArray`` or None when ``obj``
is not a GPU array.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Optional, Tuple

import ml_dtypes
import numpy as np

KDL_CUDA = 2
_CAPSULE_NAME = b"dltensor"
_USED_NAME = b"used_dltensor"
_NAME_BUF = ctypes.c_char_p(_CAPSULE_NAME)  # must outlive every capsule
_USED_BUF = ctypes.c_char_p(_USED_NAME)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


# numpy dtype <-> DLPack (code, bits): int 0, uint 1, float 2, bfloat 4, bool 6
_BF16 = np.dtype(ml_dtypes.bfloat16)


def dl_dtype(dtype: np.dtype) -> Tuple[int, int]:
    dtype = np.dtype(dtype)
    if dtype == _BF16:
        return 4, 16
    if dtype == np.bool_:
        return 6, 8
    code = {"i": 0, "u": 1, "f": 2}.get(dtype.kind)
    if code is None:
        raise TypeError(f"dtype {dtype} has no DLPack code")
    return code, dtype.itemsize * 8


def np_dtype(code: int, bits: int, lanes: int = 1) -> Optional[np.dtype]:
    if lanes != 1:
        return None
    if code == 4 and bits == 16:
        return _BF16
    if code == 6 and bits == 8:
        return np.dtype(np.bool_)
    kind = {0: "i", 1: "u", 2: "f"}.get(code)
    if kind is None or bits % 8:
        return None
    try:
        return np.dtype(f"{kind}{bits // 8}")
    except TypeError:
        return None


# -- export --------------------------------------------------------------------------------

_live = {}  # address of a DLManagedTensor -> what keeps it and its memory alive
_live_lock = threading.Lock()


def _drop(addr) -> None:
    with _live_lock:
        _live.pop(addr, None)


_delete_managed = _DELETER(_drop)


_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

# The destructor runs while the capsule is being freed: it must not take a Python reference
# to it, so it reads the capsule through prototypes that take a raw pointer.
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))


def _destroy_capsule(capsule_addr) -> None:
    """A capsule dropped without being consumed still owns its tensor: delete it."""
    if _raw_is_valid(capsule_addr, _CAPSULE_NAME):
        _drop(_raw_get_pointer(capsule_addr, _CAPSULE_NAME))


_capsule_destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_destroy_capsule)


def export_capsule(ptr: int, shape, strides_bytes, dtype: np.dtype, device_id: int, owner) -> object:
    """A ``dltensor`` capsule over ``ptr``. ``strides_bytes`` None means C-contiguous."""
    dtype = np.dtype(dtype)
    nd = len(shape)
    shp = (ctypes.c_int64 * max(nd, 1))(*shape)
    mt = DLManagedTensor()
    t = mt.dl_tensor
    t.data = ptr
    t.device = DLDevice(KDL_CUDA, device_id)
    t.ndim = nd
    code, bits = dl_dtype(dtype)
    t.dtype = DLDataType(code, bits, 1)
    t.shape = ctypes.cast(shp, ctypes.POINTER(ctypes.c_int64))
    strd = None
    if strides_bytes is not None:
        strd = (ctypes.c_int64 * max(nd, 1))(*[s // dtype.itemsize for s in strides_bytes])
        t.strides = ctypes.cast(strd, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    mt.deleter = _delete_managed
    addr = ctypes.addressof(mt)
    with _live_lock:
        _live[addr] = (mt, shp, strd, owner)
    return _api.PyCapsule_New(addr, _NAME_BUF, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


# -- import --------------------------------------------------------------------------------

class ForeignArray:
    """A GPU array of another library, seen through DLPack or the CUDA array interface.
    ``keep`` holds what must stay alive while the device may still read or write it."""

    __slots__ = ("ptr", "shape", "dtype", "strides", "device_id", "keep")

    def __init__(self, ptr, shape, dtype, strides, device_id, keep):
        self.ptr, self.shape, self.dtype, self.strides = ptr, shape, dtype, strides
        self.device_id, self.keep = device_id, keep


class _ConsumedTensor:
    """Owns a consumed DLManagedTensor: calls its deleter when dropped."""

    __slots__ = ("addr", "source")

    def __init__(self, addr: int, source):
        self.addr = addr
        self.source = source

    def __del__(self):
        try:
            mt = DLManagedTensor.from_address(self.addr)
            if mt.deleter:
                mt.deleter(self.addr)
        except Exception:
            pass


def _from_capsule(cap, source) -> Optional[ForeignArray]:
    if not _api.PyCapsule_IsValid(cap, _CAPSULE_NAME):
        return None
    addr = _api.PyCapsule_GetPointer(cap, _CAPSULE_NAME)
    mt = DLManagedTensor.from_address(addr)
    t = mt.dl_tensor
    owner = _ConsumedTensor(addr, source)
    _api.PyCapsule_SetName(cap, _USED_BUF)  # ours now: the producer's destructor leaves it
    if t.device.device_type != KDL_CUDA:
        return None
    nd = int(t.ndim)
    shape = tuple(int(t.shape[i]) for i in range(nd))
    dtype = np_dtype(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    if dtype is None:
        raise TypeError(f"a DLPack array of an unsupported dtype (code {t.dtype.code}, "
                        f"{t.dtype.bits} bits, {t.dtype.lanes} lanes)")
    strides = None
    if t.strides:
        strides = tuple(int(t.strides[i]) * dtype.itemsize for i in range(nd))
    return ForeignArray(int(t.data or 0) + int(t.byte_offset), shape, dtype, strides,
                        int(t.device.device_id), owner)


def import_array(obj, stream_handle: int, wait_stream) -> Optional[ForeignArray]:
    """``obj`` as a ``ForeignArray`` if it is a GPU array, else None. ``wait_stream(h)`` orders
    the consumer's stream after the work queued on raw stream handle ``h``."""
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is not None and hasattr(obj, "__dlpack__"):
        try:
            dtype_, _ = dev()
        except Exception:
            dtype_ = None
        if dtype_ == KDL_CUDA:
            try:
                cap = obj.__dlpack__(stream=stream_handle)
            except TypeError:
                cap = obj.__dlpack__()
                wait_stream(1)
            return _from_capsule(cap, obj)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is None:
        return None
    ptr = int(cai["data"][0] or 0)
    dtype = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    stream = cai.get("stream") if int(cai.get("version", 0)) >= 3 else 1
    if stream is not None:
        wait_stream(int(stream))
    return ForeignArray(ptr, tuple(cai["shape"]), dtype, tuple(strides) if strides else None, None, obj)
