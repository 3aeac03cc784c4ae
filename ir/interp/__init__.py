"""The reference interpreter's op semantics, one module per op family; the entry point is
``hlo.ir.interpreter.run``.

- ``numerics``: element-level semantics (integer division, shifts, conversions, rounding, IEEE
  min/max, total order) shared by every family.
- ``elementwise``, ``shape_ops``, ``reduction`` (reduce, reduce_window), ``linalg``
  (dot_general, convolution), ``indexing`` (gather, scatter), ``sorting`` (sort), ``control``
  (while, if, case, call, fusion), ``collectives`` (the collective ops, run_parallel: a
  parallel run is a thread per process meeting at rendezvous).
"""
from .registry import HANDLERS, ELEMENTWISE, InterpreterError
from . import elementwise, shape_ops, reduction, linalg, indexing, sorting, control, collectives

__all__ = ["HANDLERS", "ELEMENTWISE", "InterpreterError"]
