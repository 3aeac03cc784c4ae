"""Loading GPU code and launching kernels.

``Module(ctx, image)`` loads PTX text (the driver JIT-compiles it for the device; a failure
raises with the JIT's error log in the message) or a cubin / fatbin (ELF bytes). ``function``
returns a kernel's handle by name. ``KernelParams`` packs a launch's parameters once (a ctypes
array of pointers to the values: device pointers as 64-bit words, then scalars), so a launch
only rewrites the pointers that change between calls and passes one integer to
``cuLaunchKernel`` (the cheap path).
"""
from __future__ import annotations

import ctypes
import re
from typing import Dict, List, Sequence, Tuple

from . import driver
from .driver import check
from .errors import CudaError, CudaUnavailableError

_LOG_BYTES = 1 << 16
_SCALAR_CTYPES = {"i32": ctypes.c_int32, "i64": ctypes.c_int64, "f32": ctypes.c_float}


def ptx_isa_version(ptx: str):
    """The ``.version`` of a PTX text as ``(major, minor)``, or None."""
    m = re.search(r"^\s*\.version\s+(\d+)\.(\d+)", ptx, re.M)
    return (int(m.group(1)), int(m.group(2))) if m else None


def ptx_target(ptx: str):
    """The ``.target`` of a PTX text (``sm_90``), or None."""
    m = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M)
    return m.group(1) if m else None


class Module:
    """Loaded GPU code in a context."""

    def __init__(self, ctx: "driver.Context", image):
        cu = driver.bindings()
        self.ctx = ctx
        self._functions: Dict[str, object] = {}
        if isinstance(image, str):
            image = image.encode()
        image = bytes(image)
        self.is_ptx = not image.startswith(b"\x7fELF") and not image.startswith(b"\x50\xed\x55\xba")
        if self.is_ptx and not image.endswith(b"\0"):
            image += b"\0"  # cuModuleLoadDataEx reads PTX as a C string
        ctx.make_current()
        err_log = bytearray(_LOG_BYTES)
        info_log = bytearray(_LOG_BYTES)
        J = cu.CUjit_option
        opts = [J.CU_JIT_ERROR_LOG_BUFFER, J.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                J.CU_JIT_INFO_LOG_BUFFER, J.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES]
        vals = [err_log, _LOG_BYTES, info_log, _LOG_BYTES]
        ret = cu.cuModuleLoadDataEx(image, len(opts), opts, vals)
        if ret[0] is not driver.OK and int(ret[0]) != 0:
            self._load_failed(ret[0], image, bytes(err_log).split(b"\0", 1)[0].decode(errors="replace"))
        self.handle = ret[1]

    def _load_failed(self, res, image: bytes, log: str):
        name, text = driver.result_name(res)
        what = "PTX" if self.is_ptx else "cubin"
        detail = f"cuModuleLoadDataEx failed: {name}" + (f" ({text})" if text else "")
        if log.strip():
            detail += f"; JIT log:\n{log.strip()}"
        if self.is_ptx:
            src = image.decode(errors="replace")
            isa, target = ptx_isa_version(src), ptx_target(src)
            if name == "CUDA_ERROR_UNSUPPORTED_PTX_VERSION":
                need = driver.PTX_ISA_CUDA.get(isa) if isa else None
                have = "%d.%d" % driver.driver_version()
                raise CudaUnavailableError(
                    f"the CUDA driver (CUDA {have}) is too old for this PTX (ISA "
                    f"{'%d.%d' % isa if isa else '?'}" + (f", from CUDA {need}" if need else "")
                    + "): update the NVIDIA driver or compile for an older PTX ISA. " + detail,
                    "cuModuleLoadDataEx", name)
            if target and name in ("CUDA_ERROR_INVALID_PTX", "CUDA_ERROR_NO_BINARY_FOR_GPU"):
                detail += f" (the PTX targets {target}; this GPU is {self.ctx.arch})"
        elif name == "CUDA_ERROR_NO_BINARY_FOR_GPU":
            raise CudaUnavailableError(f"the {what} has no code for this GPU ({self.ctx.name}, "
                                       f"{self.ctx.arch}): {detail}", "cuModuleLoadDataEx", name)
        raise CudaError(f"loading the {what} failed: {detail}", "cuModuleLoadDataEx", name)

    def function(self, name: str):
        """The handle of kernel ``name``."""
        f = self._functions.get(name)
        if f is None:
            cu = driver.cu
            ret = cu.cuModuleGetFunction(self.handle, name.encode())
            if ret[0] is not driver.OK and int(ret[0]) != 0:
                code, _ = driver.result_name(ret[0])
                if code == "CUDA_ERROR_NOT_FOUND":
                    raise CudaError(f"kernel {name!r} is not in the loaded module",
                                    "cuModuleGetFunction", code)
                driver.fail(ret[0], "cuModuleGetFunction", f"looking up kernel {name!r}")
            f = self._functions[name] = ret[1]
        return f

    def set_max_dynamic_shared(self, name: str, nbytes: int) -> None:
        """Let kernel ``name`` take ``nbytes`` of dynamic shared memory (needed above 48 KiB)."""
        cu = driver.cu
        check(cu.cuFuncSetAttribute(
            self.function(name),
            cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(nbytes)),
            "cuFuncSetAttribute", f"allowing {name!r} {nbytes} bytes of dynamic shared memory")

    def __del__(self):
        try:
            if driver.cu is not None and getattr(self, "handle", None) is not None:
                driver.cu.cuModuleUnload(self.handle)
        except Exception:
            pass


class KernelParams:
    """A launch's parameters packed once: ``npointers`` device pointers (``ptrs[i] = addr``
    rewrites one), then ``scalars`` (``(type, value)``, type ``i32`` / ``i64`` / ``f32``).
    ``address`` is the ``void**`` that ``cuLaunchKernel`` takes."""

    __slots__ = ("ptrs", "_scalars", "_array", "address")

    def __init__(self, npointers: int, scalars: Sequence[Tuple[str, object]] = ()):
        self.ptrs = (ctypes.c_uint64 * max(npointers, 1))()
        self._scalars: List[ctypes._SimpleCData] = []
        for t, v in scalars:
            ct = _SCALAR_CTYPES.get(t)
            if ct is None:
                raise ValueError(f"unknown kernel scalar parameter type {t!r}")
            self._scalars.append(ct(float(v) if t == "f32" else int(v)))
        n = npointers + len(self._scalars)
        self._array = (ctypes.c_void_p * max(n, 1))()
        base = ctypes.addressof(self.ptrs)
        for i in range(npointers):
            self._array[i] = base + 8 * i
        for j, s in enumerate(self._scalars):
            self._array[npointers + j] = ctypes.addressof(s)
        self.address = ctypes.addressof(self._array)
