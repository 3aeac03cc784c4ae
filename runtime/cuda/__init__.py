"""hlo.runtime.cuda: running compiled code on NVIDIA GPUs.

Importing this package needs no GPU and no CUDA package: the driver bindings
(``cuda-bindings``, ``pip install 'hlo[cuda]'``) are imported on first use, and every way the
GPU can be missing raises ``CudaUnavailableError`` then.

- ``target``: the GPU as a compilation target (kind, triple, architecture, PTX ISA version).
- ``errors``: ``CudaError`` and its subclasses (``CudaUnavailableError``, ``CudaOutOfMemoryError``,
  ``KernelLaunchError``, ``CublasError``).
- ``driver``: contexts, streams, events, memory, checked driver calls.
- ``module``: PTX / cubin loading, kernel handles, pre-packed launch parameters.
- ``cublaslt``: the ctypes binding to cuBLASLt (matrix products).
- ``artifact``: ``CudaProgram``, what ``hlo.backends.cuda.compile`` returns and a ``.hlox``
  file's ``code.cuda`` sections hold (PTX, cubins, constants, the manifest).
- ``launch``: the step tree as pre-built launch records, and the loop that runs them.
- ``executable``: ``CudaExecutable`` (code + manifest -> a callable) and the manifest's checks.
- ``array``: ``DeviceArray``, what a call returns.
- ``interop``: DLPack and ``__cuda_array_interface__`` in and out.
- ``target``: the GPU as a target (kind, triple, architecture, PTX ISA version).
"""
from .errors import (CublasError, CudaError, CudaOutOfMemoryError, CudaUnavailableError,
                     KernelLaunchError)


def __getattr__(name):
    if name in ("CudaExecutable", "Manifest", "encode_constants"):
        from . import executable
        return getattr(executable, name)
    if name == "DeviceArray":
        from .array import DeviceArray
        return DeviceArray
    raise AttributeError(f"module 'hlo.runtime.cuda' has no attribute {name!r}")


def is_available(device: int = 0) -> bool:
    """True if a CUDA executable can run on ``device`` here (bindings, driver and GPU present)."""
    from . import driver
    try:
        driver.get_context(device)
        return True
    except CudaUnavailableError:
        return False


__all__ = ["CudaError", "CudaUnavailableError", "CudaOutOfMemoryError", "KernelLaunchError",
           "CublasError", "CudaExecutable", "Manifest", "DeviceArray", "encode_constants", "is_available"]
