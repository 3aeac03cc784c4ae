"""hlo.runtime: running compiled code.

Shared by every target: ``target`` (target identity: ``Target``, the compatibility check),
``hlox`` (the ``.hlox`` file format and the load errors), ``steps`` (the step tree a program
runs), ``memory_analysis``, ``output_pool`` (recycled memory for large outputs) and
``executable`` (``Executable``: kernels + buffer plan + call sequence behind one native entry
point, argument checks). ``cpu/``: the host target, the object-code loader, the process-wide
worker pool and the BLAS's threads; ``cuda/``: an NVIDIA GPU's identity.
"""
from .executable import ArgumentError, Executable
from .hlox import TargetMismatchError

__all__ = ["Executable", "ArgumentError", "TargetMismatchError"]
