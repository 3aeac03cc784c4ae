"""Errors of the CUDA runtime. Importing this module needs no GPU and no CUDA package.

    CudaError (RuntimeError)                 a driver or library call failed; the message names
                                             the call and the driver's CUresult name and text
      CudaUnavailableError                   no cuda-bindings, no driver, no device, a driver too
                                             old for the PTX, a GPU older than the code's arch:
                                             the frontend maps it to TargetUnavailableError
      CudaOutOfMemoryError (MemoryError)     device memory ran out; names the sizes asked and free
      KernelLaunchError                      a kernel launch failed; names the kernel and its fusion
      CublasError                            a cuBLASLt call failed; names the call and the status
"""
from __future__ import annotations


class CudaError(RuntimeError):
    """A CUDA driver or library call failed. ``call`` is the function, ``code`` the status name
    (e.g. ``CUDA_ERROR_INVALID_VALUE``) where there is one."""

    def __init__(self, message: str, call: str = "", code: str = ""):
        super().__init__(message)
        self.call = call
        self.code = code


class CudaUnavailableError(CudaError):
    """The CUDA target cannot run here (no bindings, driver, device, or a too old driver/GPU)."""


class CudaOutOfMemoryError(CudaError, MemoryError):
    """Device memory ran out. The executable that raised it stays usable."""


class KernelLaunchError(CudaError):
    """A kernel launch (or the kernel itself) failed."""


class CublasError(CudaError):
    """A cuBLASLt call failed."""
