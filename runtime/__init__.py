"""hlo.runtime: running compiled code.

``Executable`` (kernels + buffer plan + call sequence behind one native entry point),
``loader`` (links object code into the process), ``thread_pool`` (the process-wide workers that
kernels spread their loops over) and ``output_pool`` (recycled memory for large outputs).
"""
from .executable import ArgumentError, Executable, TargetMismatchError

__all__ = ["Executable", "ArgumentError", "TargetMismatchError"]
