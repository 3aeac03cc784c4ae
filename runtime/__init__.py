"""hlo.runtime: running compiled code.

Shared by every target: ``target`` (target identity: ``Target``, the compatibility check),
``hlox`` (the ``.hlox`` file format and the load errors), ``steps`` (the step tree a program
runs), ``memory_analysis``, ``output_pool`` (recycled memory for large outputs) and
``signature`` (what an executable takes and returns, ``ArgumentError``). ``cpu/``: the host
target, the object-code loader, ``executable`` (the CPU ``Executable``: kernels + buffer plan +
call sequence behind one native entry point), the in-program ``profile``, the process-wide
worker pool and the BLAS's threads; ``cuda/``: an NVIDIA GPU's identity and the CUDA runtime.
"""
from .hlox import TargetMismatchError
from .signature import ArgumentError

__all__ = ["ArgumentError", "TargetMismatchError"]
