"""hlo.backends: code generation from hlo IR.

Shared by every LLVM target: ``llvm_util`` (types, storage conversions, loops), ``scalar_ops``
(per-element semantics of each op), ``mathlib`` (vectorizable math functions and the per-target
``MathPolicy``), ``elemental`` (the element of a value at an index, pulling fused producers in),
``index_trace`` (kernel-family analysis: row-fusable regions, in-place epilogues),
``kernel_emitter`` (the interface a target implements) and ``lower`` (module -> step tree over
that interface); ``nvptx`` (NVPTX modules, libdevice, PTX) for GPU targets. ``cpu`` compiles
for the host with llvmlite; ``hlo.backends.cpu.compile(optimized)`` is the entry.
"""
