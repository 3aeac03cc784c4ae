"""The GPU a program is compiled for: architecture and multiprocessor count.

With a CUDA device present, both are read from device 0 (through the driver library, by
ctypes: compiling needs no CUDA Python package). Without one (cross-compilation),
``HLO_CUDA_ARCH`` (``sm_90``, ``90``, ``9.0``) picks the architecture, default ``sm_90``, and the
multiprocessor count is that architecture's usual data-center part (``HLO_CUDA_SMS`` overrides
it). Launch shapes are a function of the multiprocessor count; a program compiled for another
count still runs correctly (its kernels loop over whatever grid they get).
"""
from __future__ import annotations

import ctypes
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

DEFAULT_ARCH = "sm_90"
# SMs of the data-center part of each architecture (A100, H100/H200 SXM, B200)
TYPICAL_SMS = {70: 80, 75: 40, 80: 108, 86: 84, 89: 128, 90: 132, 100: 148, 120: 170}
_CU_ATTR_SM_COUNT = 16
_CU_ATTR_MAJOR = 75
_CU_ATTR_MINOR = 76


@dataclass(frozen=True)
class DeviceInfo:
    arch: str  # "sm_90"
    sm_count: int
    name: str = ""  # the device's name, or "" when compiled without one

    @property
    def cc(self) -> int:
        return int(self.arch[3:].rstrip("a"))


def parse_arch(text: str) -> str:
    """``sm_90`` from ``sm_90``, ``sm90``, ``90``, ``9.0`` or ``compute_90`` (an ``a`` suffix
    kept); anything else raises ValueError naming the accepted forms."""
    t = text.strip().lower()
    m = re.fullmatch(r"(?:sm_?|compute_?)?(\d+)(?:\.(\d))?(a?)", t)
    if not m:
        raise ValueError(f"HLO_CUDA_ARCH={text!r}: expected an architecture such as sm_90, 90 or 9.0")
    major = m.group(1)
    cc = int(major + m.group(2)) if m.group(2) is not None else int(major)
    if cc < 50 or cc > 200:
        raise ValueError(f"HLO_CUDA_ARCH={text!r}: compute capability {cc} is not an NVIDIA GPU's")
    return f"sm_{cc}{m.group(3)}"


def _driver() -> Optional[ctypes.CDLL]:
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        if lib.cuInit(0) != 0:
            return None
        n = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value < 1:
            return None
        return lib
    return None


@lru_cache(maxsize=1)
def present_device() -> Optional[DeviceInfo]:
    """Device 0 when a CUDA driver and device are present, else None."""
    lib = _driver()
    if lib is None:
        return None
    dev = ctypes.c_int(0)
    if lib.cuDeviceGet(ctypes.byref(dev), 0) != 0:
        return None

    def attr(a):
        v = ctypes.c_int(0)
        lib.cuDeviceGetAttribute(ctypes.byref(v), a, dev)
        return v.value
    name = ctypes.create_string_buffer(256)
    lib.cuDeviceGetName(name, 256, dev)
    return DeviceInfo(f"sm_{attr(_CU_ATTR_MAJOR)}{attr(_CU_ATTR_MINOR)}", attr(_CU_ATTR_SM_COUNT),
                      name.value.decode(errors="replace"))


def target_device() -> DeviceInfo:
    """What to compile for: ``HLO_CUDA_ARCH`` / ``HLO_CUDA_SMS`` if set, else the present
    device, else ``sm_90`` with its usual multiprocessor count."""
    env_arch = os.environ.get("HLO_CUDA_ARCH")
    dev = present_device()
    if env_arch:
        arch = parse_arch(env_arch)
        sms = dev.sm_count if dev is not None and dev.arch == arch else None
    elif dev is not None:
        arch, sms = dev.arch, dev.sm_count
    else:
        arch, sms = DEFAULT_ARCH, None
    env_sms = os.environ.get("HLO_CUDA_SMS")
    if env_sms:
        if not env_sms.isdigit() or int(env_sms) < 1:
            raise ValueError(f"HLO_CUDA_SMS={env_sms!r}: expected a positive number of multiprocessors")
        sms = int(env_sms)
    if sms is None:
        cc = int(arch[3:].rstrip("a"))
        sms = TYPICAL_SMS.get(cc, 108)
    return DeviceInfo(arch, sms, dev.name if dev is not None and dev.arch == arch else "")
