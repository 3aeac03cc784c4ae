"""hlo.runtime: running compiled code.

Shared by every target: ``target`` (target identity: ``Target``, the compatibility check),
``hlox`` (the ``.hlox`` file format and the load errors), ``steps`` (the step tree a program
runs), ``memory_analysis``, ``output_pool`` (recycled memory for large outputs), ``signature``
(what an executable takes and returns, ``ArgumentError``) and ``executable`` (``Executable``: kernels + buffer plan + call sequence behind one native entry
point, argument checks). ``cpu/``: the host target, the object-code loader, the process-wide
worker pool and the BLAS's threads; ``cuda/``: an NVIDIA GPU's identity.
"""
from .hlox import TargetMismatchError
from .signature import ArgumentError


def __getattr__(name):
    # The CPU executable links object code with llvmlite: imported on first use, so that loading
    # a saved CUDA program does not pay for it.
    if name == "Executable":
        from .executable import Executable
        return Executable
    raise AttributeError(f"module 'hlo.runtime' has no attribute {name!r}")


__all__ = ["Executable", "ArgumentError", "TargetMismatchError"]
