"""The one look at the CUDA driver that needs no CUDA package: ``probe()`` loads libcuda with
ctypes and reads GPU 0's compute capability and multiprocessor count, or says there is none.

Everything that asks whether a GPU is here reads it: the frontend's default target
(``hlo.staging.targets.has_usable_nvidia_gpu``), the architecture code is built for
(``target.device_target``), the launch shapes' multiprocessor count
(``hlo.backends.cuda.device``) and the error a saved program gives without a GPU
(``artifact.CudaProgram.executable``). The runtime itself talks to the driver through
cuda-bindings (``driver``).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

# CUdevice_attribute values
_ATTR_SM_COUNT = 16
_ATTR_CC_MAJOR = 75
_ATTR_CC_MINOR = 76


@dataclass(frozen=True)
class Gpu0:
    """What the driver reports: ``devices`` (how many), GPU 0's ``sm`` (compute capability
    major*10 + minor) and ``sm_count`` (multiprocessors)."""
    devices: int
    sm: int
    sm_count: int


@lru_cache(maxsize=1)
def probe() -> Optional[Gpu0]:
    """GPU 0 as the driver reports it, or None when no driver loads, it fails to initialize or
    reports no device."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            n, dev = ctypes.c_int(0), ctypes.c_int()
            if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value < 1:
                return None
            if lib.cuDeviceGet(ctypes.byref(dev), 0) != 0:
                return None
            attrs = []
            for attr in (_ATTR_CC_MAJOR, _ATTR_CC_MINOR, _ATTR_SM_COUNT):
                v = ctypes.c_int()
                if lib.cuDeviceGetAttribute(ctypes.byref(v), attr, dev) != 0:
                    return None
                attrs.append(v.value)
        except AttributeError:  # a library of that name without the driver API
            return None
        major, minor, sms = attrs
        return Gpu0(n.value, major * 10 + minor, sms)
    return None
