"""hlo.backends: code generation from hlo IR.

Shared by every backend: ``llvm_util`` (types, storage conversions, loops), ``scalar_ops``
(per-element semantics of each op), ``mathlib`` (vectorizable math functions) and
``elemental`` (the element of a value at an index, pulling fused producers in). ``cpu``
compiles for the host with llvmlite; ``hlo.backends.cpu.compile(optimized)`` is the entry.
"""
